"""How long a request waited for a CPU on a busy host: the part of the judge's view of a timed
call that the runner's load, not the submission, added.

The judge checks a GPU call's report against its own clock: a request that took far longer
than the worker accounts for is what work hidden outside the timed interval looks like. It is
also what a saturated host looks like: with every CPU taken, the judge woken by the reply and
the worker woken by the request each wait for a CPU, up to a scheduler slice each (6.3 ms of a
6.6 ms request on a 16-CPU H200 with 16 host spinners, in most calls). The kernel counts, for
every thread, the time it spent runnable but waiting on a run queue (`schedstat`'s second
field, nanoseconds). What explains the unseen time, and only that:

- the judge's own thread's waits: it is blocked until the reply is ready, so it can only wait
  after the worker's interval, and nothing of the worker's can make it wait without keeping
  CPUs busy (below);
- the worker's request thread's waits beyond its timed interval's length: it waits inside the
  interval too, at most the interval's length, which is already accounted for. Other threads
  of the worker do not delay the reply, and their waits explain nothing (a low-priority
  spinner waits nearly all the time).

None of it counts when the worker's process tree ran for longer than its timed interval plus
`CPU_SLACK_US` during the request: its own threads or children can make its request thread wait
(or the judge's, on every CPU) while they do the work the judge never saw timed. That run time
is read from below: each thread's own count, nothing at all when a thread ended meanwhile (its
count left with it), and its processes' clock ticks for threads that started and ended between
two readings (within a tick at each end, so such threads can still hide about 2 ticks, 20 ms at
100 Hz, beyond the slack). The judge reads it all by host PID around the request. Where the
kernel keeps no such counts (no `/proc`, or `schedstat` reads zeros), nothing is explained and
the check is as strict as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "CPU_SLACK_US",
    "HostWaitMeter",
    "TreeReader",
    "TreeSnapshot",
    "ThreadTimes",
    "ran_between",
    "thread_times",
]

# CPU time a worker spends on a request beyond its timed interval without suspicion: reading
# the request, unpacking its inputs, packing the reply (tens to hundreds of microseconds). The
# same bound as the unseen time the check itself allows (outside_clock.UNSEEN_MIN_US).
CPU_SLACK_US = 2000.0
# A clock tick, the unit of a process's CPU time in /proc/<pid>/stat.
TICK_US = 1e6 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


@dataclass(frozen=True)
class ThreadTimes:
    """One thread's nanoseconds: time run, time waited runnable on a run queue."""

    run_ns: int = 0
    wait_ns: int = 0


@dataclass(frozen=True)
class TreeSnapshot:
    """A process tree at one moment: each thread's times, and its processes' CPU time in clock
    ticks (utime + stime + cutime + cstime: it keeps what their ended threads and reaped
    children ran, which the threads' own counts lose)."""

    threads: dict[str, ThreadTimes]
    ticks: int


def ran_between(before: TreeSnapshot, after: TreeSnapshot) -> float | None:
    """Microseconds the tree ran between two snapshots, or None when that cannot be told from
    below: a thread of the first is gone (its time left with it)."""
    if any(key not in after.threads for key in before.threads):
        return None
    run_ns = sum(
        t.run_ns - before.threads.get(key, ThreadTimes()).run_ns for key, t in after.threads.items()
    )
    # A thread that started and ended between the two is in neither; its process's ticks have
    # it, to within a tick at each end.
    ticks_us = (after.ticks - before.ticks - 2) * TICK_US
    return max(run_ns / 1e3, ticks_us)


def _parse_schedstat(raw: bytes) -> tuple[int, int] | None:
    try:
        run, wait, _ = raw.split()
        return int(run), int(wait)
    except ValueError:  # a kernel without the counts
        return None


def _parse_ticks(raw: bytes) -> int:
    """utime + stime + cutime + cstime of a /proc/<pid>/stat line (after the name's ')')."""
    fields = raw[raw.rindex(b")") + 2 :].split()
    return sum(int(x) for x in fields[11:15])


def thread_times() -> ThreadTimes | None:
    """The calling thread's own times, or None where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            found = _parse_schedstat(f.read())
    except OSError:
        return None
    return ThreadTimes(*found) if found else None


class TreeReader:
    """Reads a process tree's threads, keeping their /proc files open between readings: a
    reading is then one `pread` a file (an 18-thread CUDA worker: about 50 rather than 320 µs
    on an H200 runner's CPU, twice per timed call)."""

    MAX_OPEN = 256  # files kept open; beyond, a thread's files are opened for each reading

    def __init__(self) -> None:
        self._files: dict[str, int] = {}
        self._touched: set[str] = set()  # the paths the reading under way has read

    def _read(self, path: str) -> bytes | None:
        self._touched.add(path)
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

    def _thread(self, schedstat: str) -> ThreadTimes | None:
        """One thread's times, from its schedstat file's path, or None."""
        raw = self._read(schedstat)
        found = _parse_schedstat(raw) if raw is not None else None
        return ThreadTimes(*found) if found else None

    def snapshot(self, root: int) -> TreeSnapshot | None:
        """Every thread of `root` and its descendants, or None where unreadable."""
        threads: dict[str, ThreadTimes] = {}
        ticks = 0
        self._touched = set()
        todo = [root]
        while todo:
            pid = todo.pop()
            stat = self._read(f"/proc/{pid}/stat")
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            if stat:
                ticks += _parse_ticks(stat)
            for tid in tids:
                found = self._thread(f"/proc/{pid}/task/{tid}/schedstat")
                if found is None:
                    continue
                threads[f"{pid}/{tid}"] = found
                children = self._read(f"/proc/{pid}/task/{tid}/children")
                if children:
                    todo.extend(int(child) for child in children.split())
        # Files of threads and processes this reading no longer found are closed, so a worker
        # whose threads come and go does not fill the cache with ended ones.
        for path in self._files.keys() - self._touched:
            os.close(self._files.pop(path))
        return TreeSnapshot(threads, ticks) if threads else None

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()


class HostWaitMeter:
    """A worker's meter, reused for each request it measures, on the thread that waits for the
    reply: `start()` before the request is sent (the worker is idle then), `sent()` once it is
    (the judge's clock opens), `stop()` as soon as its reply is ready (the clock closes), then
    `explained_us(wall_us)`; `close()` with the worker.

    `worker_pid`: the worker's process by host PID, whose main thread serves the requests; its
    descendants are in the tree."""

    def __init__(self, worker_pid: int):
        self.worker_pid = worker_pid
        self._main_thread = f"{worker_pid}/{worker_pid}"
        self._reader = TreeReader()
        self._tree: list[TreeSnapshot | None] = []
        self._judge: list[ThreadTimes | None] = []
        self._ran: float | None = None

    def start(self) -> None:
        self._tree, self._judge = [self._reader.snapshot(self.worker_pid)], []
        self._ran = None  # ran_us(), read once per request

    def sent(self) -> None:
        self._judge = [thread_times()]

    def stop(self) -> None:
        self._judge.append(thread_times())
        self._tree.append(self._reader.snapshot(self.worker_pid))

    def ran_us(self) -> float | None:
        """Microseconds of CPU the worker's process tree ran during the last request, read from
        below (None where that cannot be told): the judge's own measure, for its messages."""
        tree = self._tree
        if self._ran is None and len(tree) == 2 and tree[0] is not None and tree[1] is not None:
            self._ran = ran_between(tree[0], tree[1])
        return self._ran

    def explained_us(self, wall_us: float) -> float:
        """Microseconds of the request the busy host explains (0 where it cannot be told)."""
        if len(self._tree) != 2 or len(self._judge) != 2:
            return 0.0
        (tree0, tree1), (judge0, judge1) = self._tree, self._judge
        if tree0 is None or tree1 is None or judge0 is None or judge1 is None:
            return 0.0
        ran = self.ran_us()
        if ran is None or ran > wall_us + CPU_SLACK_US:
            return 0.0  # the worker kept CPUs busy outside its interval: the waits may be its own
        main0, main1 = tree0.threads.get(self._main_thread), tree1.threads.get(self._main_thread)
        main_wait_us = (main1.wait_ns - main0.wait_ns) / 1e3 if main0 and main1 else 0.0
        judge_wait_us = (judge1.wait_ns - judge0.wait_ns) / 1e3
        return max(judge_wait_us, 0.0) + max(main_wait_us - wall_us, 0.0)

    def close(self) -> None:
        self._reader.close()
