"""Batch judging for programs that write kernels: many candidates against one leaderboard.

`judge_many(leaderboard, candidates, mode=...)` yields one record per candidate, in the order
given (records.py); `kernelboard judge` is the command over it (cli.py). It drives the same
evaluation core as the pytest plugin: no second harness.
"""

from .candidates import Candidate, CandidateError, load_candidates
from .judge import UnknownLeaderboard, judge_many
from .records import batch_fast_p, record_schema

__all__ = [
    "Candidate",
    "CandidateError",
    "UnknownLeaderboard",
    "batch_fast_p",
    "judge_many",
    "load_candidates",
    "record_schema",
]
