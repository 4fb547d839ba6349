"""The reward service: the batch judge behind HTTP (`kernelboard serve`) for training loops.

A training run's workers post jobs (a leaderboard, a mode, candidates) and poll for their
records; the server judges them with the batch judge on this host's GPUs, or on every GPU of a
Ray cluster, and writes each record to its state folder as it is judged, so a restarted server
loses no verdict. `docs/agents.md` ("The reward service") is the user's guide.

- `jobs.py`: the wire format of a job and its validation (400 names the field)
- `store.py`: the state folder: jobs and their records, appended and fsync'd
- `runner.py`: the queue, its limit, and the thread that feeds the judge
- `judges.py`: which judge runs the jobs: this host's batch judge or Ray's
- `app.py`: the HTTP routes (aiohttp); `auth.py` the bearer token; `responses.py` JSON answers
- `cli.py`: `kernelboard serve`'s options; `server.py`: its start-up checks, then listening
"""
