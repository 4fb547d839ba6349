"""Files that `kernelboard new` copies into a new leaderboard folder (package data)."""
