"""Speed of light: how close a call came to the device's peak DRAM bandwidth.

Every timed case has a byte floor (`floor_us`, stats/floors.py): the time the bytes the call
must move take at the device's theoretical peak bandwidth. The fraction floor / time of the
ranking statistic is the share of that peak the call achieved: 1.0 is the physical limit
(a memory-bound kernel cannot beat it), 0.05 means 20x headroom. Compute-bound kernels stay
far below 1 by nature; the number tells a competitor which kind of limit is left to chase.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_kernelboard.stats.scoring import rank_us


def _finite_positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value > 0 else None


def speed_of_light(timing: Mapping[str, Any] | None) -> float | None:
    """floor_us / the ranking statistic of a case timing record; None without a floor or a time.

    A record that already carries `speed_of_light` keeps its own value (it was computed
    when the run was recorded); older records without it get it computed from their floor.
    """
    if not timing:
        return None
    stored = timing.get("speed_of_light")
    if stored is not None:
        return _finite_positive(stored)
    floor = _finite_positive(timing.get("floor_us"))
    if timing.get("rank_us") is None and timing.get("mean_us") is None:
        return None
    time_us = _finite_positive(rank_us(timing))  # against the number that ranks
    if floor is None or time_us is None:
        return None
    return floor / time_us


def with_speed_of_light(timing: dict[str, Any] | None) -> dict[str, Any] | None:
    """The timing record with `speed_of_light` set (None where there is no floor: CPU runs)."""
    if timing is None:
        return None
    fraction = speed_of_light({k: v for k, v in timing.items() if k != "speed_of_light"})
    return {**timing, "speed_of_light": None if fraction is None else round(fraction, 6)}
