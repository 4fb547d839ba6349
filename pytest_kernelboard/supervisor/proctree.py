"""A process tree as /proc shows it: CPU time used, compilers running, file locks awaited.

The judge reads this about a worker while it imports a submission (supervisor/stall.py). A
sandboxed worker is a bwrap process and everything under it; the judge sees them all by their
host PIDs. Linux only: elsewhere `read_snapshot` returns None and nothing is watched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcessInfo", "Snapshot", "is_compiler", "read_snapshot"]

PROC = Path("/proc")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# Process names (the kernel's 15-character `comm`) of build tools: while one runs, a build is
# under way even if it waits (for the disk, for its own children). CUDA's pipeline, the C/C++
# toolchains torch's extension builds drive, and the build systems that run them.
COMPILERS = frozenset(
    {
        "nvcc", "cicc", "ptxas", "fatbinary", "nvlink", "cudafe++", "nvdisasm", "cuobjdump",
        "gcc", "g++", "cc", "c++", "cc1", "cc1plus", "cpp", "collect2", "lto1", "lto-wrapper",
        "clang", "clang++", "as", "ld", "ld.bfd", "ld.gold", "ld.lld", "lld",
        "ninja", "make", "gmake", "cmake", "hipcc",
    }
)  # fmt: skip
# A versioned or cross-prefixed name: gcc-12, x86_64-linux-gnu-g++-12 (cut to 15 characters),
# ptxas-blackwell (Triton's own copy).
_DECORATED = re.compile(r"^(?:[a-z0-9_]+-linux-gn\w*-)?([a-z+.]+)(?:-[\w.]+)?$")


def is_compiler(name: str) -> bool:
    """Whether a process named `name` (its comm) is a build tool."""
    if name in COMPILERS:
        return True
    if name.startswith(("x86_64-linux-gn", "aarch64-linux-g")):  # a cross gcc, name cut short
        return True
    found = _DECORATED.match(name)
    return bool(found) and found.group(1) in COMPILERS


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    name: str
    cpu_ticks: int  # utime + stime, plus cutime + cstime: the children it has already reaped
    state: str = "S"  # R running, S sleeping, D disk wait, T stopped, t traced, Z zombie, ...


@dataclass(frozen=True)
class Snapshot:
    """Every process and every file-lock wait at one moment."""

    processes: Mapping[int, ProcessInfo]
    # pid of a process blocked on a lock -> pids of the processes holding that lock
    lock_waits: Mapping[int, frozenset[int]]

    def tree(self, root: int) -> frozenset[int]:
        """root and all its descendants (empty when root is gone)."""
        if root not in self.processes:
            return frozenset()
        children: dict[int, list[int]] = {}
        for info in self.processes.values():
            children.setdefault(info.ppid, []).append(info.pid)
        found, todo = {root}, [root]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return frozenset(found)

    def cpu_s(self, pids: Iterable[int]) -> float:
        """CPU seconds the processes and the children they reaped have used. A child's time
        moves into its parent's when it exits, so the sum over a tree only grows."""
        ticks = sum(self.processes[p].cpu_ticks for p in pids if p in self.processes)
        return ticks / _TICKS_PER_S

    def compilers(self, pids: Iterable[int]) -> list[str]:
        """Names of the build tools running among the processes."""
        names = (self.processes[p].name for p in pids if p in self.processes)
        return sorted(name for name in names if is_compiler(name))

    def stopped(self, pids: Iterable[int]) -> bool:
        """Whether one of the processes is stopped (SIGSTOP, or held by a tracer)."""
        return any(self.processes[p].state in ("T", "t") for p in pids if p in self.processes)

    def holders_awaited(self, pids: frozenset[int]) -> frozenset[int]:
        """Processes outside `pids` holding a lock that one of `pids` is blocked on."""
        holders: set[int] = set()
        for waiter in pids:
            holders |= self.lock_waits.get(waiter, frozenset())
        return frozenset(holders - pids)


def read_snapshot(proc: Path = PROC) -> Snapshot | None:
    """All processes and lock waits from `proc`; None where there is no such /proc."""
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return None
    processes = {}
    for entry in entries:
        info = _read_stat(proc / entry / "stat")
        if info is not None:
            processes[info.pid] = info
    return Snapshot(processes, _read_lock_waits(proc / "locks"))


def process_state(pid: int, proc: Path = PROC) -> str | None:
    """One process's state letter (R, S, T, Z, ...); None when it is gone."""
    info = _read_stat(proc / str(pid) / "stat")
    return info.state if info is not None else None


def process_tree(root: int) -> frozenset[int]:
    """root and all its descendants: its children files walked (descendants), or, where the
    kernel keeps none, every process of the host read once (a Snapshot)."""
    tree = descendants(root)
    if tree is None:
        snapshot = read_snapshot()
        tree = snapshot.tree(root) if snapshot is not None else frozenset()
    return tree


def descendants(root: int, proc: Path = PROC) -> frozenset[int] | None:
    """root and all its descendants, read from each one's own threads' `children` files: a few
    reads for a worker's tree where a Snapshot reads every process of the host (25 ms on a GPU
    host, before every timed case). Empty when root is gone; None where the kernel keeps no
    such files (read a Snapshot instead)."""
    if not (proc / str(root) / "task").is_dir():
        return frozenset()
    found, todo = {root}, [root]
    while todo:
        pid = todo.pop()
        try:
            threads = os.listdir(proc / str(pid) / "task")
        except OSError:
            continue  # gone meanwhile
        for thread in threads:
            try:
                listed = (proc / str(pid) / "task" / thread / "children").read_bytes()
            except FileNotFoundError:
                if pid == root and thread == str(root):
                    return None  # no CONFIG_PROC_CHILDREN
                continue
            except OSError:
                continue
            for child in map(int, listed.split()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
    return frozenset(found)


def _read_stat(path: Path) -> ProcessInfo | None:
    """One /proc/PID/stat; None when the process is gone or the line is not understood."""
    try:  # raw reads: a runner has hundreds of processes, sampled twice a second
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        return None
    # "pid (comm) state ppid ..."; comm may hold spaces and parentheses, so split at the last ')'.
    head, _, rest = data.rpartition(b")")
    pid_text, _, raw_name = head.partition(b" (")
    name = raw_name.decode(errors="replace")
    fields = rest.split()
    try:
        # Fields 3 (state), 4 (ppid) and 14-17 (utime, stime, cutime, cstime), from 1.
        ppid = int(fields[1])
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
        return ProcessInfo(int(pid_text), ppid, name, ticks, fields[0].decode())
    except (IndexError, ValueError):
        return None


def _read_lock_waits(path: Path) -> dict[int, frozenset[int]]:
    """Who waits for whom, from /proc/locks.

    A held lock reads `1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146898 0 EOF`; a process blocked
    on it follows as `1: -> FLOCK ...` with its own pid (deeper waiters indent further). PIDs
    are the reader's own namespace's, so the host's for a sandboxed worker. A waiter is matched
    with the holders of its own kind of lock on the file (an flock never waits for a POSIX
    record lock; an OFD lock names no process, so it names no holder either).
    """
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    holders: dict[tuple[str, str], set[int]] = {}
    waiting: list[tuple[int, tuple[str, str]]] = []
    for line in lines:
        tokens = line.split()
        waiter = len(tokens) > 1 and tokens[1] == "->"
        fields = tokens[2:] if waiter else tokens[1:]
        try:
            kind, pid, file = fields[0], int(fields[3]), fields[4]
        except (IndexError, ValueError):
            continue
        if pid <= 0:  # an open-file-description lock has no owning process
            continue
        if waiter:
            waiting.append((pid, (kind, file)))
        else:
            holders.setdefault((kind, file), set()).add(pid)
    waits: dict[int, set[int]] = {}
    for pid, lock in waiting:
        waits.setdefault(pid, set()).update(holders.get(lock, set()) - {pid})
    return {pid: frozenset(found) for pid, found in waits.items()}
