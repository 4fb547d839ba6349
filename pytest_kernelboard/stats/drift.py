"""A host-bound reference timing carried to the moment a candidate is timed.

A launch-bound call's time is its host time, and a host's speed moves over a batch: on a
2 x H200 host the same candidates' host-bound times read 1.2 - 2.3x slower in the first half
of one run than in the other's, and 0.6 - 0.9x in the last half, while their device-bound ones
stayed within 1% (docs/benchmarks.md). The reference is timed as the batch starts, so each
later candidate would be compared with the host as it was then. A batch keeps one of the
reference's workers alive and times the reference again in it right after each host-bound
candidate's case: that worker's time now against its own time among the reference's workers
says how far the host has moved, and the reference's timing is carried by as much.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .scoring import rank_us


def _half_width(timing: Mapping[str, Any]) -> float:
    """Half the width of a timing's own ranking interval, in log units (0 without one)."""
    interval = timing.get("rank_ci95_within_us") or timing.get("rank_ci95_us")
    if not interval or min(interval) <= 0:
        return 0.0
    return math.log(float(interval[1]) / float(interval[0])) / 2


def carried(
    reference: Mapping[str, Any], then: Mapping[str, Any], now: Mapping[str, Any]
) -> dict[str, Any]:
    """The reference's timing scaled by how the kept worker's time moved from `then` (its
    timing among the reference's workers) to `now`, its interval widened, on log times as
    between_workers.widened does, by both of that worker's own intervals. Only the ranking
    time and its interval are carried (`rank_us`, `rank_ci95_us`); `drift` is the factor and
    `drift_us` the kept worker's two times."""
    factor = rank_us(now) / rank_us(then)
    moved = math.hypot(_half_width(then), _half_width(now))
    center = rank_us(reference) * factor
    carried_timing = {
        **reference,
        "rank_us": center,
        "drift": factor,
        "drift_us": [rank_us(then), rank_us(now)],
    }
    interval = reference.get("rank_ci95_us")
    if interval and min(interval) > 0 and rank_us(reference) > 0:
        low, high = (float(x) / rank_us(reference) for x in interval)
        carried_timing["rank_ci95_us"] = [
            center * math.exp(-math.hypot(-math.log(min(low, 1.0)), moved)),
            center * math.exp(math.hypot(math.log(max(high, 1.0)), moved)),
        ]
    return carried_timing
