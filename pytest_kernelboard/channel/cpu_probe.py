"""How fast the CPU the calling thread runs on is at interpreter work: the judge reads it to
keep a core for timed calls (judge/timing_core.py), a worker to choose a case's CPU where no
core is kept (worker/cpu_choice.py)."""

from __future__ import annotations

import time

_probe_clock = time.perf_counter  # bound at import, before any submission: it cannot patch it


def _probe_work() -> int:
    # Interpreter work of a launch path's kind: small objects, dicts, calls, branches.
    table = {i: str(i) for i in range(64)}
    return sum(len(table[i]) for i in range(64) if i % 3)


def probe_us(reps: int = 5) -> float:
    """The median time of `reps` probes (about 20 µs each) on the CPU the calling thread runs
    on now, in µs, after one that refills the caches a move to this CPU left cold."""
    _probe_work()
    times = []
    for _ in range(reps):
        start = _probe_clock()
        _probe_work()
        times.append((_probe_clock() - start) * 1e6)
    return sorted(times)[len(times) // 2]
