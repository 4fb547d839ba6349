"""kernelboard: a GPU-kernel leaderboard judged by pytest."""

__version__ = "0.1.0"
# How a call is timed (flush, blocking kernel, events, statistic). Bump it whenever the method
# changes: filed reference runs of another method then stop being reused (results/reference_runs.py).
# 2: the stream held by a blocking kernel, the median ranks, every timed call verified.
# 3: a call that follows an idle gap first waits for a 2 ms GPU spin (an idle GPU is slower).
# 4: each case's calls on the fastest CPU; a call under 1 ms first warmed by an untimed call.
# 5: a submission's mostly host-bound case timed in as many workers as the reference's.
# 6: a case whose reference timing is host-bound timed in turns with a worker of the
#    reference's; its speedup and both times are those turns' (evaluation/paired.py).
# 7: a case timed in turns runs without the GPU wake spin of method 3 (TimingPlan.wake).
# 8: a later turn whose worker ended its last turn warm makes no warm-up call: the untimed call
#    of method 4 warms its first call too (TimingPlan.warm_start).
TIMING_METHOD = 8


def __getattr__(name: str):
    """`pytest_kernelboard.judge_many`: the batch judge, imported only when asked for (the
    plugin loads this package in every pytest run)."""
    if name == "judge_many":
        from .batch import judge_many

        return judge_many
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
