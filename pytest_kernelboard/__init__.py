"""kernelboard: a GPU-kernel leaderboard judged by pytest."""

__version__ = "0.1.0"
