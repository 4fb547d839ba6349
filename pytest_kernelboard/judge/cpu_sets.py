"""Which CPUs each GPU's judge process, and every worker it starts, may run on.

A worker keeps its timed calls on the fastest CPU it may use (worker/cpu_choice.py). With one
judge per GPU and every CPU open to every judge, workers timing on different GPUs probe the
same CPUs and can settle on the same one, and the candidates importing ahead for one GPU run on
the CPUs another GPU's timed calls chose. So the parent splits the CPUs it may use into one
contiguous set per judge (contiguous numbers are the cores of one socket on common hosts), and
each judge's processes stay inside its set: what one GPU's judging does to the host's CPUs
reaches no other GPU's timed calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

# A judge keeps at least this many CPUs (its own threads, the zygote, the candidates importing
# ahead and the one being timed); with fewer to go round, every judge shares every CPU.
MIN_CPUS_PER_JUDGE = 2


def allowed_cpus() -> frozenset[int]:
    """The CPUs this process may run on (empty where the platform cannot say)."""
    getter = getattr(os, "sched_getaffinity", None)
    return frozenset(getter(0)) if getter is not None else frozenset()


def split_cpus(cpus: Iterable[int], judges: int) -> list[frozenset[int]]:
    """`cpus` in `judges` disjoint contiguous sets of sizes differing by at most one, or every
    CPU for every judge where each would get fewer than MIN_CPUS_PER_JUDGE."""
    ordered = sorted(cpus)
    if judges < 2 or len(ordered) < MIN_CPUS_PER_JUDGE * judges:
        return [frozenset(ordered)] * judges
    size, extra = divmod(len(ordered), judges)
    sets, start = [], 0
    for judge in range(judges):
        end = start + size + (judge < extra)
        sets.append(frozenset(ordered[start:end]))
        start = end
    return sets


def pin_process(pid: int, cpus: frozenset[int]) -> None:
    """Every thread of process `pid` onto `cpus`; the threads and processes it starts later
    inherit them. Nothing where the platform has no affinity or `cpus` is empty."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return
    try:
        threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:  # no /proc: the main thread, which is all a process just started has
        threads = [pid]
    for tid in threads:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # that thread has ended meanwhile
            pass
