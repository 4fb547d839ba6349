"""When to stop measuring: warm-up, adaptive stopping, and per-case time budgets.

Modelled on nvbench's split: the measurement produces samples, a criterion decides when there
are enough, and reporting is separate. The rules take the elapsed time as an argument; the loop
that asks them is measure.CaseTimer.measure (tested with a fake clock and a fake worker).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_kernelboard.stats.stats import RunningMedian

__all__ = [
    "CONVERGED",
    "MAX_SAMPLES",
    "NOISE_BOUND",
    "TIME_BUDGET",
    "StoppingRule",
    "Warmup",
    "budget_for_case",
]

STEADY_CALLS = 3  # the last calls a noisy warm-up compares
CONVERGED = "converged"
TIME_BUDGET = "time_budget"
MAX_SAMPLES = "max_samples"
NOISE_BOUND = "noise_bound"


@dataclass(frozen=True)
class StoppingRule:
    """Stop when the ranking statistic is known well enough, when more calls cannot get it
    there within the budget, or when the case has used its time.

    reason() returns, checked in this order:
      "converged"    n >= min_samples, elapsed >= min_time_s, and the 95% interval of the
                     median is within +/- precision of it (relative half-width)
      "time_budget"  elapsed >= budget_s (whatever else holds: the task timeout is hard)
      "noise_bound"  n >= projection_min_samples, elapsed >= projection_min_time_s (and
                     min_time_s), and budget_s < projected_s() < inf: at the rate the interval
                     has narrowed so far, the precision cannot be reached within the budget
      "max_samples"  n >= max_samples
      None           keep measuring

    The interval is distribution-free (order statistics), so one slow outlier moves it by one
    rank at most: a case stops as soon as its centre is pinned down, not after a fixed time.
    min_time_s stays available (nvbench's --min-time) but defaults to 0: with the call queued
    behind a blocking kernel the samples carry no host jitter, and a fixed floor only cost time.
    A case whose calls do carry host jitter (host-bound calls, a CPU leaderboard) stops on
    "noise_bound" once its spread is known instead of running to its budget; its wider
    interval can only make it tie with more cases, never rank it falsely (docs/timing.md).
    """

    precision: float = 0.005
    min_samples: int = 5
    max_samples: int = 10_000
    min_time_s: float = 0.0
    budget_s: float = 10.0
    # Before a projection is trusted: enough samples that the order-statistic interval is not
    # widened by its rounding (about 1% at 50) and enough time to see the host's own rhythm
    # (scheduler ticks, other processes) rather than one quiet or busy burst.
    projection_min_samples: int = 50
    projection_min_time_s: float = 0.2

    def __post_init__(self) -> None:
        if not self.precision > 0:
            raise ValueError("precision must be > 0")
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")
        if self.min_time_s < 0 or not self.budget_s > 0:
            raise ValueError("need min_time_s >= 0 and budget_s > 0")
        if self.projection_min_samples < 2 or self.projection_min_time_s < 0:
            raise ValueError("need projection_min_samples >= 2 and projection_min_time_s >= 0")

    def reason(self, samples_us: Sequence[float] | RunningMedian, elapsed_s: float) -> str | None:
        """Why to stop now, or None. Pass a RunningMedian to avoid re-sorting per sample."""
        stats = samples_us if isinstance(samples_us, RunningMedian) else RunningMedian(samples_us)
        n = stats.n
        # Two samples at least: a spread estimated from one sample is no estimate.
        if (
            n >= max(self.min_samples, 2)
            and elapsed_s >= self.min_time_s
            and stats.relative_halfwidth() <= self.precision
        ):
            return CONVERGED
        if elapsed_s >= self.budget_s:
            return TIME_BUDGET
        if (
            n >= self.projection_min_samples
            and elapsed_s >= max(self.projection_min_time_s, self.min_time_s)
            and self.budget_s < self.projected_s(stats, elapsed_s) < math.inf
        ):
            return NOISE_BOUND
        if n >= self.max_samples:
            return MAX_SAMPLES
        return None

    def projected_s(self, samples_us: Sequence[float] | RunningMedian, elapsed_s: float) -> float:
        """Seconds of measuring the median's interval would need to reach the precision, at
        the rate so far: its half-width shrinks as 1/sqrt(n), and n grows with the time spent,
        so elapsed * (half-width / precision)^2. Inf while the spread is unknown, or where a
        median of 0 makes a relative width meaningless: such a case runs to its budget."""
        stats = samples_us if isinstance(samples_us, RunningMedian) else RunningMedian(samples_us)
        halfwidth = stats.relative_halfwidth()
        if math.isinf(halfwidth):
            return math.inf
        return elapsed_s * (halfwidth / self.precision) ** 2


@dataclass(frozen=True)
class Warmup:
    """Warm-up is over once JIT compilation, autotuning and lazy allocation are out of the way.

    done() when all of: at least min_calls calls, at least min_time_s spent, and the last two
    calls agree within `tolerance` (|a - b| <= tolerance * min(a, b)) or the last three stay
    within `steady_ratio` of each other (noisy calls that never agree pairwise are warm too);
    or, as a bound, once max_calls calls or max_time_s have been spent. A first call that compiles for seconds never
    agrees with the second one, so it never leaks into the measured samples. The judge seeds the
    list with the correctness call's own duration, so a long kernel that needs no compilation
    is warm after one more call instead of two (each costs as much as a sample).
    """

    min_calls: int = 2
    min_time_s: float = 0.0
    tolerance: float = 0.10
    max_calls: int = 100
    max_time_s: float = 5.0
    steady_ratio: float = 1.5

    def __post_init__(self) -> None:
        if not 1 <= self.min_calls <= self.max_calls:
            raise ValueError("need 1 <= min_calls <= max_calls")
        if self.tolerance < 0 or self.min_time_s < 0 or self.max_time_s < 0:
            raise ValueError("tolerance and times must be >= 0")

    def reason(self, durations_us: Sequence[float], elapsed_s: float) -> str | None:
        """Why warm-up is over ("stable", "max_calls" or "max_time"), or None to keep going."""
        n = len(durations_us)
        if n >= max(self.min_calls, 2) and elapsed_s >= self.min_time_s:
            a, b = durations_us[-2], durations_us[-1]
            if abs(a - b) <= self.tolerance * min(a, b):
                return "stable"
            # Noisy but steady: compilation, autotuning and first touch make a call many times
            # slower than the next; calls that stay within steady_ratio of each other are warm,
            # even where their noise keeps any two from agreeing within the tolerance.
            last = durations_us[-STEADY_CALLS:]
            if n >= STEADY_CALLS + 1 and max(last) <= self.steady_ratio * max(min(last), 1e-9):
                return "steady"
        if n >= self.max_calls:
            return "max_calls"
        if elapsed_s >= self.max_time_s and n >= 1:
            return "max_time"
        return None

    def done(self, durations_us: Sequence[float], elapsed_s: float) -> bool:
        return self.reason(durations_us, elapsed_s) is not None


def budget_for_case(
    timeout_s: float,
    n_cases: int,
    *,
    fixed_overhead_s: float = 10.0,
    headroom: float = 0.3,
    timed_runs_per_case: int = 2,
    min_budget_s: float = 0.1,
    max_budget_s: float = 10.0,
) -> float:
    """Seconds of measurement one case may spend, derived from the task's benchmark timeout.

        budget = clamp((timeout_s * (1 - headroom) - fixed_overhead_s)
                       / (n_cases * timed_runs_per_case),  min_budget_s, max_budget_s)

    fixed_overhead_s pays for process start-up, imports and CUDA context creation once per run;
    headroom is the share of the timeout kept for warm-up, verification of every output and the
    judge/worker round trips that the stopping rule's elapsed time does not see in full;
    timed_runs_per_case counts the submission and the reference, each timed under its own budget.
    The result never drops below min_budget_s (a case always gets a few samples, even when the
    timeout is too short to honour) nor exceeds max_budget_s (beyond it more samples buy nothing).
    """
    if n_cases < 1:
        raise ValueError("n_cases must be >= 1")
    if not 0 <= headroom < 1:
        raise ValueError("headroom must be in [0, 1)")
    if timed_runs_per_case < 1:
        raise ValueError("timed_runs_per_case must be >= 1")
    usable = timeout_s * (1.0 - headroom) - fixed_overhead_s
    per_case = usable / (n_cases * timed_runs_per_case)
    return min(max(per_case, min_budget_s), max_budget_s)
