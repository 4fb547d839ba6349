"""Pause other workers' Python processes while a case is timed.

A batch imports the next candidates while one is judged. Their Python processes could launch
GPU work at import (or create their CUDA context) during another candidate's timed calls; a
stopped process launches nothing. Only the worker's own Python process is stopped, not the
compilers it started: a build keeps going on the CPU, which the timed calls do not use.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .proctree import Snapshot, process_state, process_tree

# A worker started on its own runs worker.main; one forked from the zygote keeps the zygote's
# command line.
WORKER_MODULES = (b"pytest_kernelboard.worker.main", b"pytest_kernelboard.worker.zygote")
# SIGSTOP takes effect when the kernel next schedules the process, not when kill() returns; a
# process still running could launch work in the first timed call. Wait this long at most.
STOP_WAIT_S = 2.0
_STOPPED_OR_GONE = frozenset({"T", "t", "Z", "X", None})


def python_processes(root_pid: int, snapshot: Snapshot | None = None) -> list[int]:
    """The worker's own Python process under `root_pid` (bwrap's children, or itself), found
    in `snapshot`, or by walking the tree from its root (proctree.process_tree)."""
    tree = snapshot.tree(root_pid) if snapshot is not None else process_tree(root_pid)
    found = []
    for pid in sorted(tree):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(module in cmdline for module in WORKER_MODULES):
            found.append(pid)
    return found


def stop(pids: Iterable[int]) -> list[int]:
    """SIGSTOP each and wait until it is stopped; the ones this stopped, for go_on. A process
    that has gone is skipped, and one already stopped is left to whoever stopped it (a batch's
    call set aside, a worker stopped while its output is read): they let it go on, not this."""
    stopped = []
    for pid in pids:
        if process_state(pid) in _STOPPED_OR_GONE:
            continue
        try:
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        except OSError:
            pass
    _wait_stopped(stopped)
    return stopped


def _wait_stopped(pids: list[int]) -> None:
    deadline = time.monotonic() + STOP_WAIT_S
    waiting = list(pids)
    while waiting and time.monotonic() < deadline:
        waiting = [pid for pid in waiting if process_state(pid) not in _STOPPED_OR_GONE]
        if waiting:
            time.sleep(0.0005)


def go_on(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass


@contextmanager
def paused(root_pids: Iterable[int]) -> Iterator[list[int]]:
    """Stop the worker Python processes under each root pid for the duration; yield them."""
    # Each worker's tree walked from its root, on the critical path before each timed case:
    # read afresh, so a process a candidate forked since is stopped too.
    stopped = stop(pid for root in root_pids for pid in python_processes(root))
    try:
        yield stopped
    finally:
        go_on(stopped)


def resume(root_pid: int) -> None:
    """Let a worker paused by `paused` go on (taken for a case while others are timed)."""
    go_on(python_processes(root_pid))
