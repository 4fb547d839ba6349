"""Which CPU a worker's timed calls run on: the fastest of those it may use, probed per case.

A launch-bound call's time is its host time, and on a shared machine the CPUs do not run the
same code at the same speed: on an H200 runner one process moved to each of its 16 CPUs ran a
five-launch call in 66 - 153 µs, some CPUs slow sweep after sweep, others steadily fast
(docs/benchmarks.md, "Probes"). Left to the scheduler, the CPU a worker lands on decides
its host-bound times, so the reference and a candidate timed in two workers compare two CPUs.
At the start of each timed case the worker runs a short interpreter-bound probe on each CPU it
may use and keeps its calling thread on the fastest for the case. Where the judge keeps a core
for timed calls (a batch judge, judge/timing_core.py), the worker goes there instead.
"""

from __future__ import annotations

import os

from pytest_kernelboard.channel import cpu_probe

# Each CPU's probe: this many timed repetitions (their median counts) after one that refills the
# caches the move left cold. About 20 µs each: a 16-CPU machine is probed in about 2 ms.
PROBE_REPS = 5


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on (empty where the platform cannot say)."""
    getter = getattr(os, "sched_getaffinity", None)
    return frozenset(getter(0)) if getter is not None else frozenset()


def probe_us() -> float:
    """The median time of the probe on the CPU the calling thread runs on now, in µs."""
    return cpu_probe.probe_us(PROBE_REPS)


def choose_and_pin(cpus: frozenset[int]) -> tuple[int | None, dict[int, float]]:
    """Probe each CPU of `cpus`, keep the calling thread on the fastest; (cpu, probe µs by CPU).

    None where there is no choice to make (one CPU, or no affinity on this platform): the
    thread is then left where it is.
    """
    if len(cpus) < 2 or not hasattr(os, "sched_setaffinity"):
        return None, {}
    times: dict[int, float] = {}
    for cpu in sorted(cpus):
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:  # taken away since (a cgroup's cpuset shrank): skip it
            continue
        times[cpu] = probe_us()
    if not times:
        os.sched_setaffinity(0, cpus)
        return None, {}
    fastest = min(times, key=times.__getitem__)
    os.sched_setaffinity(0, {fastest})
    return fastest, times
