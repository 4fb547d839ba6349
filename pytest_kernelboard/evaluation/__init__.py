"""The evaluation core: one submission judged against one leaderboard, in a session shared by
a run. The pytest plugin and the batch judge are its two front-ends."""
