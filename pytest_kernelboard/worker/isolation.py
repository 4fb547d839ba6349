"""What a worker forked from the zygote does to stand apart, as bwrap does for a fresh worker.

A forked worker starts inside the zygote's sandbox (worker/zygote.py), which already gives the
filesystem view: system folders and the Python installation read-only, the GPU's device nodes,
/dev/shm, the compile caches. What separates one worker from its siblings is done here, with
the kernel's own calls: new user, mount, PID, network, IPC and UTS namespaces; a fresh tmpfs
over the temporary folders (the other workers' folders lie there), with only this worker's
own folders bound back; a /proc of its own PID namespace; and, before any submission is
imported, no capabilities and no way to gain privileges (PR_SET_NO_NEW_PRIVS).
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Iterable
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
_CAPABILITY_VERSION_3 = 0x20080522
HOSTNAME = b"kernelboard-worker"

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    """A namespace, mount or capability call the kernel refused."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise IsolationError(errno, f"{what}: {os.strerror(errno)}")


def unshare_namespaces(host_network: bool = False) -> None:
    """New namespaces for this process (the PID one for its next child), mapping our user and
    group to themselves: inside, we are who we were, with capabilities over the new ones.
    host_network keeps the network (the ranks of a multi-GPU case meet on loopback)."""
    uid, gid = os.getuid(), os.getgid()
    flags = NAMESPACES & ~CLONE_NEWNET if host_network else NAMESPACES
    _check(_libc.unshare(flags), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")


def die_with_parent() -> None:
    """SIGKILL when the parent goes (bwrap's --die-with-parent); gone already: exit now."""
    parent = os.getppid()
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if os.getppid() != parent:
        os._exit(1)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    result = _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data) if data else None)
    _check(result, f"mount {target}")


def private_folders(
    covered: Iterable[Path],
    binds: Iterable[tuple[Path, bool]],
    homes: Iterable[Path],
    scratch_bytes: int,
) -> None:
    """A fresh tmpfs over each covered folder (the judge's temporary folders, where the other
    workers' folders are), then each of `binds` (path, read_only) bound back at its own path
    from below the covers, and a tmpfs home for each worker of the namespace (one; or every
    rank of a multi-GPU case). Needs a mount namespace of our own."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing of ours propagates out
    kept = [(os.open(path, os.O_PATH | os.O_DIRECTORY), path, ro) for path, ro in binds]
    for folder in covered:
        mount("tmpfs", str(folder), "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_bytes}")
    for fd, path, read_only in kept:
        path.mkdir(parents=True, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", str(path), None, MS_BIND | MS_REC)
        if read_only:
            mount(None, str(path), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        os.close(fd)
    for home in homes:
        home.mkdir(parents=True, exist_ok=True)
        mount("tmpfs", str(home), "tmpfs", MS_NOSUID | MS_NODEV, f"size={scratch_bytes}")


def own_proc() -> None:
    """A /proc that shows this PID namespace alone, over the one the zygote sees."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def bring_up_loopback() -> None:
    """Loopback up in a network namespace of our own (it starts down): the ranks of one
    multi-GPU case meet there, and nothing else is reachable."""
    import fcntl
    import socket
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(probe, siocgifflags, request))[1]
        fcntl.ioctl(probe, siocsifflags, struct.pack("16sH14x", b"lo", flags | iff_up))


def set_hostname() -> None:
    _check(_libc.sethostname(HOSTNAME, len(HOSTNAME)), "sethostname")


def set_up_namespace(
    covered: Iterable[Path],
    binds: Iterable[tuple[Path, bool]],
    homes: Iterable[Path],
    scratch_bytes: int,
) -> None:
    """What PID 1 of a worker's namespace makes before the worker starts: its folders (see
    private_folders), its own /proc and its hostname."""
    private_folders(covered, binds, homes, scratch_bytes)
    own_proc()
    set_hostname()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def not_dumpable() -> None:
    """No process of our user may open this one's descriptors through /proc or trace it: the
    init of a multi-GPU case keeps a pipe to its relay beside the ranks it reaps."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(DUMPABLE)")


def drop_privileges() -> None:
    """No capabilities, none to regain (bounding set emptied), no privileges through exec:
    bwrap's --cap-drop ALL. After this the mounts above cannot be undone."""
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for capability in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)  # unknown ones fail; none is kept
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")


def exit_code(status: int) -> int:
    """A child's wait status as an exit code, a signal death as 128 + signal (bwrap's way)."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.waitstatus_to_exitcode(status) & 0xFF
