"""How far a case's time moves from one worker process to the next, and intervals that hold it.

A launch-bound call's time is its host time, and on a shared machine that moves from one fresh
worker to the next by far more than one worker's samples show: in one batch on an H200,
candidates with the reference's own device work read 130 - 216 µs in as many workers, each
with an interval of about ±5% (git history of docs/benchmarks.md). A run that times the
reference on a case in several fresh workers measures that spread; a time taken in one worker
then gets an interval for where another worker's time of the same code could fall (a
prediction interval), not only for where its own samples' median lies.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from .scoring import rank_us
from .stats import student_t_critical

# The median of k workers' times has a standard error about sqrt(pi / 2) / sqrt(k) of one
# worker's (the asymptotic efficiency of the median of normal values).
_MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)


def host_bound(timing: Mapping[str, Any] | None) -> bool | None:
    """Whether most of a GPU timing's calls took their host time as their sample (None for a
    host clock, where every time is the host's, and for an untimed case)."""
    if not timing or timing.get("clock") != "cuda_event":
        return None
    return 2 * int(timing.get("host_bound_calls") or 0) > int(timing["n"])


def mostly_host_bound(timings: Sequence[Mapping[str, Any]]) -> bool:
    """Whether most of a case's timings, one per worker, were host-bound (host_bound)."""
    return 2 * sum(bool(host_bound(t)) for t in timings) > len(timings)


def spread(times_us: Sequence[float]) -> float | None:
    """The relative spread of one case's time over workers: the sample standard deviation of
    the log times. None below two workers, or with a time that is not positive."""
    if len(times_us) < 2 or min(times_us) <= 0:
        return None
    return statistics.stdev(math.log(t) for t in times_us)


def widened(
    timing: Mapping[str, Any], relative_spread: float, workers: int, median_of: int = 1
) -> dict[str, Any]:
    """The timing with its ranking interval widened by the spread between workers.

    `relative_spread` was measured over `workers` workers (spread()); the timing is one
    worker's (median_of=1) or the median of `median_of` workers'. The widening is done on log
    times, as the spread was measured: each side's half-width in log units becomes
    sqrt(h^2 + b^2), h that side's own and b = t(0.975, workers - 1) * s * f, s the spread and
    f 1 or sqrt(pi/2)/sqrt(median_of); so an interval never reaches zero, however wide the
    spread. The samples' interval stays as `rank_ci95_within_us`, the spread as
    `between_workers_rsd`. A timing without a ranking interval is returned as it is.
    """
    if not timing.get("rank_ci95_us"):
        return dict(timing)
    low, high = (float(x) for x in timing["rank_ci95_us"])
    center = float(timing["rank_us"])
    if center <= 0:
        return dict(timing)
    factor = 1.0 if median_of <= 1 else _MEDIAN_SE_FACTOR / math.sqrt(median_of)
    between = student_t_critical(workers - 1) * relative_spread * factor
    widened_low = 0.0
    if low > 0:
        widened_low = center * math.exp(-math.hypot(math.log(center / low), between))
    above = math.hypot(math.log(max(high, center) / center), between)
    return {
        **timing,
        "rank_ci95_us": [widened_low, center * math.exp(above)],
        "rank_ci95_within_us": [low, high],
        "between_workers_rsd": relative_spread,
    }


def measured_spread(reference: Mapping[str, Any]) -> tuple[float, int] | None:
    """(the spread, the workers it was measured over) of a reference timed in several workers;
    None for one timed in one."""
    relative_spread = reference.get("between_workers_rsd")
    workers = len(reference.get("rank_us_by_worker") or ())
    if relative_spread is None or workers < 2:
        return None
    return float(relative_spread), workers


def one_worker(timing: dict[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
    """One worker's timing of a case, widened by the spread the reference's workers measured on
    it (unchanged where the reference was timed in one worker)."""
    measured = measured_spread(reference)
    if measured is None:
        return timing
    return widened(timing, *measured)


def combined_workers(records: list[dict[str, Any]]) -> tuple[dict[str, Any], float | None]:
    """One case's timing from its records in several workers (the reference's, or a host-bound
    submission's): the median worker's, its interval widened by the spread between them; and
    that spread (None below two)."""
    chosen = median_worker(records)
    relative_spread = spread([rank_us(r) for r in records])
    if relative_spread is not None:
        chosen = widened(chosen, relative_spread, len(records), median_of=len(records))
    return chosen, relative_spread


def median_worker(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Of one case's timings in several workers, the one whose ranking time is the median
    (the slower middle one of an even count), with every worker's time beside it.

    A launch-bound call's host time moved by about ±20% from one worker to the next on an H200
    (git history of docs/benchmarks.md); a batch's one reference timing carried its
    worker's shift into every speedup of the run."""
    ordered = sorted(records, key=rank_us)
    chosen = dict(ordered[len(ordered) // 2])
    if len(records) > 1:
        chosen["rank_us_by_worker"] = [round(rank_us(r), 4) for r in records]
    return chosen
