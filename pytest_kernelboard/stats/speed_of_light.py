"""Speed of light: how close a call came to the device's peak DRAM bandwidth.

Every timed case has a byte floor (`floor_us`, stats/floors.py): the time the bytes the call
must move take at the device's theoretical peak bandwidth. The fraction floor / time of the
ranking statistic is the share of that peak the call achieved: 1.0 is the physical limit
(a memory-bound kernel cannot beat it), 0.05 means 20x headroom. Compute-bound kernels stay
far below 1 by nature; the number tells a competitor which kind of limit is left to chase.

A multi-GPU case also has a communication ceiling (`comm_speed_of_light`): the median time of
an all-reduce of the bytes one rank reads, over the case's process group on this host's links
(judge/distributed.py), with its bandwidth in NCCL-tests' terms; its `of_light` is ceiling /
the ranking statistic, the same kind of fraction.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from typing import Any

from pytest_kernelboard.stats.scoring import rank_us

COMM_KEY = "comm_speed_of_light"  # a multi-GPU case timing record's communication ceiling


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
    """The timing record with `speed_of_light` set (None where there is no floor: CPU runs),
    and its communication ceiling's `of_light` where it has one."""
    if timing is None:
        return None
    fraction = speed_of_light({k: v for k, v in timing.items() if k != "speed_of_light"})
    timing = {**timing, "speed_of_light": None if fraction is None else round(fraction, 6)}
    ceiling = timing.get(COMM_KEY)
    if isinstance(ceiling, Mapping):
        fresh = {k: v for k, v in ceiling.items() if k != "of_light"}
        comm = comm_speed_of_light({**timing, COMM_KEY: fresh})
        timing[COMM_KEY] = {**fresh, "of_light": None if comm is None else round(comm, 6)}
    return timing


# -- the communication ceiling of a multi-GPU case --------------------------------------------


def all_reduce_bus_factor(world_size: int) -> float:
    """busbw / algbw for an all-reduce (NCCL-tests' convention): each rank sends and receives
    2(W-1)/W of the buffer in a ring, so the bus bandwidth is comparable across world sizes."""
    return 2.0 * (world_size - 1) / world_size


def comm_ceiling(
    comm_bytes: int, samples_us: list[float], world_size: int, backend: str, clock: str
) -> dict[str, Any] | None:
    """The ceiling's record from its timed all-reduces (each the slowest rank's time): their
    median, and the algorithm and bus bandwidths in GB/s (1e9 bytes/s) at that median. None
    without a positive time (nothing to divide by)."""
    times = [t for t in samples_us if _finite_positive(t) is not None]
    if comm_bytes <= 0 or world_size < 2 or not times:
        return None
    ceiling_us = statistics.median(times)
    algbw = comm_bytes / ceiling_us / 1e3  # bytes per microsecond -> GB/s
    return {
        "collective": "all_reduce",
        "backend": backend,
        "world_size": world_size,
        "comm_bytes": comm_bytes,
        "ceiling_us": round(ceiling_us, 4),
        "repetitions": len(times),
        "clock": clock,
        "algbw_gbps": round(algbw, 4),
        "bus_gbps": round(algbw * all_reduce_bus_factor(world_size), 4),
    }


def comm_speed_of_light(timing: Mapping[str, Any] | None) -> float | None:
    """ceiling_us / the ranking statistic of a multi-GPU case's timing record; None without a
    ceiling (single-GPU cases, test cases) or a time. A stored `of_light` is kept."""
    if not timing or not isinstance(timing.get(COMM_KEY), Mapping):
        return None
    ceiling = timing[COMM_KEY]
    if ceiling.get("of_light") is not None:
        return _finite_positive(ceiling["of_light"])
    if timing.get("rank_us") is None and timing.get("mean_us") is None:
        return None
    ceiling_us = _finite_positive(ceiling.get("ceiling_us"))
    time_us = _finite_positive(rank_us(timing))
    if ceiling_us is None or time_us is None:
        return None
    return ceiling_us / time_us
