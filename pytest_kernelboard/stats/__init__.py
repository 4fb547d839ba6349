"""Pure timing helpers for the benchmark engine: statistics, stopping, scoring, physical floors.

Nothing here touches a GPU or imports torch at module level, so every rule can be tested with
fake clocks and fake samples. The measurement loop lives elsewhere and calls into these modules.
"""

from pytest_kernelboard.stats.floors import (
    bandwidth_floor_us,
    clock_drop_flag,
    io_bytes,
    plausibility_flags,
    tensor_bytes,
)
from pytest_kernelboard.stats.scoring import (
    RANKINGS,
    fast_p,
    score,
    score_interval,
    speedup,
)
from pytest_kernelboard.stats.stats import (
    Summary,
    geometric_mean,
    student_t_critical,
    summarize,
)
from pytest_kernelboard.stats.stopping import (
    StoppingRule,
    Warmup,
    budget_for_case,
)

__all__ = [
    "RANKINGS",
    "StoppingRule",
    "Summary",
    "Warmup",
    "bandwidth_floor_us",
    "budget_for_case",
    "clock_drop_flag",
    "fast_p",
    "geometric_mean",
    "io_bytes",
    "plausibility_flags",
    "score",
    "score_interval",
    "speedup",
    "student_t_critical",
    "summarize",
    "tensor_bytes",
]
