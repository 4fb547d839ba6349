"""How long a request waited for a CPU on a busy host: the part of the judge's view of a timed
call that the runner's load, not the submission, added.

The judge checks a GPU call's report against its own clock: the request took far longer than
the worker accounts for is what work hidden outside the timed interval looks like. It is also
what a saturated host looks like: with every CPU taken, the judge woken by the reply and the
worker woken by the request each wait for a CPU, a scheduler slice or two (6.3 ms of a 6.6 ms
request on a 16-CPU H200 with 16 host spinners, in most calls). The kernel counts, for every
thread, the time it spent runnable but waiting on a run queue (`schedstat`'s second field,
nanoseconds): the judge reads its own thread's and those of every thread of the worker's
process tree, by their host PIDs, around the request.

Those waits explain the unseen time only when the worker did not cause them: its own busy
threads or children make its request thread wait too, and the same CPU then did work the
judge never saw timed. So where the worker's tree ran for longer than its timed interval plus
`CPU_SLACK_US` during the request, nothing is explained. Where the kernel keeps no such counts
(no `/proc`, or `schedstat` reads zeros), nothing is explained either and the check is as
strict as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["CPU_SLACK_US", "HostWaitMeter", "TreeTimes", "thread_times", "tree_times"]

# CPU time a worker spends on a request beyond its timed interval without suspicion: reading
# the request, unpacking its inputs, packing the reply (tens to hundreds of microseconds). The
# same bound as the unseen time the check itself allows (outside_clock.UNSEEN_MIN_US).
CPU_SLACK_US = 2000.0


@dataclass(frozen=True)
class TreeTimes:
    """Nanoseconds summed over threads: time run, time waited runnable on a run queue."""

    run_ns: int = 0
    wait_ns: int = 0

    def __sub__(self, other: TreeTimes) -> TreeTimes:
        return TreeTimes(self.run_ns - other.run_ns, self.wait_ns - other.wait_ns)


def _schedstat(path: str) -> tuple[int, int] | None:
    try:
        with open(path, "rb") as f:
            run, wait, _ = f.read().split()
        return int(run), int(wait)
    except (OSError, ValueError):  # gone, or a kernel without the counts
        return None


def thread_times() -> TreeTimes | None:
    """The calling thread's own times, or None where the kernel does not say."""
    found = _schedstat("/proc/thread-self/schedstat")
    return TreeTimes(*found) if found else None


def tree_times(root: int) -> TreeTimes | None:
    """The times of every thread of `root` and its descendants, or None where unreadable.
    A thread or process that ends between two readings leaves the sum: a difference can then
    come out low, which explains less, never more."""
    run = wait = 0
    seen_any = False
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            found = _schedstat(f"/proc/{pid}/task/{tid}/schedstat")
            if found is None:
                continue
            seen_any = True
            run, wait = run + found[0], wait + found[1]
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    todo.extend(int(child) for child in f.read().split())
            except (OSError, ValueError):
                pass
    return TreeTimes(run, wait) if seen_any else None


class HostWaitMeter:
    """Around one request, on the thread that waits for its reply: `start()` before it is
    sent (the worker is idle then), `sent()` once it is (the judge's clock opens), `stop()` as
    soon as its reply is ready (the clock closes), then `explained_us(wall_us)`."""

    def __init__(self, worker_pid: int):
        self.worker_pid = worker_pid
        self._worker: list[TreeTimes | None] = []
        self._judge: list[TreeTimes | None] = []

    def start(self) -> None:
        self._worker = [tree_times(self.worker_pid)]

    def sent(self) -> None:
        self._judge = [thread_times()]

    def stop(self) -> None:
        self._judge.append(thread_times())
        self._worker.append(tree_times(self.worker_pid))

    def explained_us(self, wall_us: float) -> float:
        """Microseconds of the request the busy host explains (0 where it cannot be told)."""
        if len(self._judge) != 2 or len(self._worker) != 2 or None in self._judge + self._worker:
            return 0.0
        judge = self._judge[1] - self._judge[0]
        worker = self._worker[1] - self._worker[0]
        if worker.run_ns / 1e3 > wall_us + CPU_SLACK_US:
            return 0.0  # the worker kept CPUs busy outside its interval: its waits are its own
        return max(judge.wait_ns + worker.wait_ns, 0) / 1e3
