"""A hang told apart from a slow build: the progress watch on a worker's import.

Importing a submission runs under the build budget (compile_timeout, 600 s by default), which a
cold nvcc build on a busy runner may need in full. A submission that sleeps or deadlocks at
import would hold the runner for all of it. So while the judge waits for the import, it
samples the worker's whole process tree (supervisor/proctree.py) every half second; the import is
getting on while the tree uses CPU (at least MIN_CPU_SHARE of one core since it last got on),
runs a compiler, or waits on a file lock whose holder is getting on. When none of these holds
for the stall window, the import has stalled: the judge kills the worker and says so. A tree
with a stopped process is not charged for the stop: a judge that pauses other workers while it
times a case (SIGSTOP) must not see them as hung.

A lock waiter rides on its holder: workers that want the same build wait in worker/builds.py's
`build_lock` (an flock, also around torch's `load_inline` builds) for the one that compiles,
using no CPU themselves. /proc/locks names the holder, in any sandbox; while the holder's tree
gets on, so does the waiter. A holder that stalls is killed by its own judge's watch (or dies),
its flock goes with it, and the waiter takes the lock and builds. A waiter whose holder cannot
be seen (another PID namespace) counts as stalled.

The watch is for accidents, not attacks: code that spins keeps itself alive, but never past the
build budget, as before.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping

from .proctree import Snapshot, read_snapshot

__all__ = ["STALL_VARIABLE", "STALL_WINDOW_S", "ImportWatch", "import_watch", "stall_window_s"]

STALL_WINDOW_S = 60.0
STALL_VARIABLE = "KERNELBOARD_IMPORT_STALL_S"  # seconds; 0 turns the watch off
# CPU use below this share of one core is idling (a runtime's housekeeping threads), not work.
MIN_CPU_SHARE = 0.01
MAX_LOCK_CHAIN = 8  # waiters of waiters: a holder that itself waits, and so on


def stall_window_s(environ: Mapping[str, str] = os.environ) -> float | None:
    """The stall window in seconds (STALL_VARIABLE, else STALL_WINDOW_S); None when off."""
    raw = environ.get(STALL_VARIABLE, "").strip()
    if not raw:
        return STALL_WINDOW_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"{STALL_VARIABLE}={raw!r}: expected seconds without progress before an import "
            "fails (a number >= 0; 0 turns the watch off)"
        )
    return value or None


class _TreeProgress:
    """When one process tree last got on, and its CPU time then."""

    def __init__(self, now: float, cpu_s: float) -> None:
        self.since = now
        self.cpu_at = cpu_s

    def update(self, now: float, cpu_s: float, busy: bool) -> bool:
        """Whether the tree got on by now: it is `busy` (a compiler runs, or it is paused), or
        it used its share of CPU since."""
        used = cpu_s - self.cpu_at
        if busy or (used > 0 and used >= MIN_CPU_SHARE * (now - self.since)):
            self.since, self.cpu_at = now, cpu_s
            return True
        return False


class ImportWatch:
    """Samples a worker's tree while it imports; `check()` says when the import has stalled."""

    def __init__(
        self,
        root_pid: int,
        window_s: float,
        budget_s: float,
        clock: Callable[[], float] = time.monotonic,
        snapshot: Callable[[], Snapshot | None] = read_snapshot,
    ) -> None:
        self.root = root_pid
        self.window_s = window_s
        self.budget_s = budget_s
        self.clock = clock
        self.snapshot = snapshot
        self.last_progress = clock()
        self._trees: dict[int, _TreeProgress] = {}
        self._cpu_at_progress: float | None = None
        self._cpu_now = 0.0

    def check(self) -> str | None:
        """Sample now; the failure message once nothing got on for the window, else None."""
        found = self.snapshot()
        now = self.clock()
        if found is None or self.root not in found.processes:
            return None  # no /proc here, or the worker is gone (the judge sees its death)
        if self._progressed(self.root, found, now, {}):
            self.last_progress = now
            self._cpu_at_progress = self._cpu_now
            return None
        if self._cpu_at_progress is None:
            self._cpu_at_progress = self._cpu_now
        if now - self.last_progress < self.window_s:
            return None
        used = self._cpu_now - self._cpu_at_progress
        return (
            f"no progress for {self.window_s:g} s during import (no CPU used and no compiler "
            f"running: the worker's processes used {used:.2f} s of CPU in that time); a build "
            f"that keeps working keeps its whole build budget of {self.budget_s:g} s"
        )

    def _progressed(self, root: int, found: Snapshot, now: float, seen: dict[int, bool]) -> bool:
        """Whether the tree under `root` got on, itself or through a lock holder it waits on."""
        seen[root] = False  # a wait that leads back here adds nothing
        pids = found.tree(root)
        cpu = found.cpu_s(pids)
        busy = bool(found.compilers(pids)) or found.stopped(pids)
        if root == self.root:
            self._cpu_now = cpu
        tree = self._trees.get(root)
        if tree is None:  # first seen: its CPU so far is the baseline
            self._trees[root] = _TreeProgress(now, cpu)
            progressed = busy
        else:
            progressed = tree.update(now, cpu, busy)
        for holder in sorted(found.holders_awaited(pids)):
            if holder not in seen and len(seen) < MAX_LOCK_CHAIN:
                self._progressed(holder, found, now, seen)
            progressed = progressed or seen.get(holder, False)
        seen[root] = progressed
        return progressed


def import_watch(root_pid: int, budget_s: float) -> ImportWatch | None:
    """The watch for one import under the configured window; None when the watch is off or
    the window is no shorter than the budget (the budget's own timeout comes first)."""
    window = stall_window_s()
    if window is None or window >= budget_s:
        return None
    return ImportWatch(root_pid, window, budget_s)
