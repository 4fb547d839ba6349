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

__all__ = [
    "CPU_SLACK_US",
    "HostWaitMeter",
    "TreeReader",
    "TreeTimes",
    "thread_times",
    "tree_times",
]

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


def _parse_schedstat(raw: bytes) -> tuple[int, int] | None:
    try:
        run, wait, _ = raw.split()
        return int(run), int(wait)
    except ValueError:  # a kernel without the counts
        return None


def thread_times() -> TreeTimes | None:
    """The calling thread's own times, or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            found = _parse_schedstat(f.read())
    except OSError:
        return None
    return TreeTimes(*found) if found else None


class TreeReader:
    """Reads the times of every thread of a process tree, keeping each thread's /proc files
    open between readings: a reading is then one `pread` a file (an 18-thread CUDA worker:
    about 50 rather than 320 µs on an H200 runner's CPU, twice per timed call)."""

    MAX_OPEN = 256  # files kept open; beyond, a thread's files are opened for each reading

    def __init__(self) -> None:
        self._files: dict[str, int] = {}

    def _read(self, path: str) -> bytes | None:
        fd = self._files.get(path)
        if fd is not None:
            try:
                return os.pread(fd, 4096, 0)
            except OSError:  # the thread ended (its number may come back as another's)
                os.close(self._files.pop(path))
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None
        try:
            data = os.pread(fd, 4096, 0)
        except OSError:
            os.close(fd)
            return None
        if len(self._files) < self.MAX_OPEN:
            self._files[path] = fd
        else:
            os.close(fd)
        return data

    def times(self, root: int) -> TreeTimes | None:
        """The times of every thread of `root` and its descendants, or None where unreadable.
        A thread or process that ends between two readings leaves the sum: a difference can
        then come out low, which explains less, never more."""
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
                raw = self._read(f"/proc/{pid}/task/{tid}/schedstat")
                found = _parse_schedstat(raw) if raw is not None else None
                if found is None:
                    continue
                seen_any = True
                run, wait = run + found[0], wait + found[1]
                children = self._read(f"/proc/{pid}/task/{tid}/children")
                if children:
                    todo.extend(int(child) for child in children.split())
        return TreeTimes(run, wait) if seen_any else None

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


def tree_times(root: int) -> TreeTimes | None:
    """One reading of a tree's times (TreeReader.times, with nothing kept open)."""
    reader = TreeReader()
    try:
        return reader.times(root)
    finally:
        reader.close()


class HostWaitMeter:
    """A worker's meter, reused for each request it measures, on the thread that waits for the
    reply: `start()` before the request is sent (the worker is idle then), `sent()` once it is
    (the judge's clock opens), `stop()` as soon as its reply is ready (the clock closes), then
    `explained_us(wall_us)`; `close()` with the worker."""

    def __init__(self, worker_pid: int):
        self.worker_pid = worker_pid
        self._reader = TreeReader()
        self._worker: list[TreeTimes | None] = []
        self._judge: list[TreeTimes | None] = []

    def start(self) -> None:
        self._judge = []
        self._worker = [self._reader.times(self.worker_pid)]

    def sent(self) -> None:
        self._judge = [thread_times()]

    def stop(self) -> None:
        self._judge.append(thread_times())
        self._worker.append(self._reader.times(self.worker_pid))

    def close(self) -> None:
        self._reader.close()

    def explained_us(self, wall_us: float) -> float:
        """Microseconds of the request the busy host explains (0 where it cannot be told)."""
        if len(self._judge) != 2 or len(self._worker) != 2 or None in self._judge + self._worker:
            return 0.0
        judge = self._judge[1] - self._judge[0]
        worker = self._worker[1] - self._worker[0]
        if worker.run_ns / 1e3 > wall_us + CPU_SLACK_US:
            return 0.0  # the worker kept CPUs busy outside its interval: its waits are its own
        return max(judge.wait_ns + worker.wait_ns, 0) / 1e3
