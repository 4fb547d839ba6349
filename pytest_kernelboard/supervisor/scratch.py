"""The judge's temporary folders, and the sweep of those a killed judge left behind.

A judge removes its folders (workers' homes, staged submissions, socket folders, a batch's
scratch) when it is done with them and at its exit. A judge killed outright (SIGKILL, the
kernel's out-of-memory killer, a cancelled CI job, a Ray actor torn down) does neither, and a
runner's /tmp fills with them: a few dozen a killed run, thousands a week on a busy host.

So every process that makes one keeps a lease: a file in the host's lease folder, locked with
flock(2) for as long as the process lives, naming its folders one a line. The kernel releases
the lock when the process dies, however it dies. The first folder a process makes first sweeps:
it takes the lock of every lease no live process holds and removes the folders it names. A
forked child makes a lease of its own; while it lives, the inherited lock keeps its parent's.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import warnings
from pathlib import Path

LEASE_SUFFIX = ".lease"
DRAFT_PREFIX = ".draft-"  # a lease being made: locked a moment after it exists
# A lease is swept once its process is gone and it has not changed for this long: a process
# that just exited may still have helpers finishing in its folders (a torch shared-memory
# manager removes its own socket folder a moment after the judge exits), and a draft is
# locked a moment after it exists.
GRACE_S = 60.0
# A long-lived process's lease (a reward server's: a few folders a candidate) is rewritten with
# only the folders still there once it names this many.
COMPACT_AFTER = 2000
# What a lease may name: a folder that tempfile.mkdtemp made (prefix and random letters).
_FOLDER_NAME = re.compile(r"[A-Za-z0-9_.-]+")

_lock = threading.Lock()
_lease: _Lease | _NoLease | None = None


class _Lease:
    """This process's lease: its locked file and how many lines it holds."""

    def __init__(self, folder: Path) -> None:
        # Locked before it is given its name, so no sweep ever sees it unlocked.
        self.fd, drafted = tempfile.mkstemp(prefix=DRAFT_PREFIX, dir=folder)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        self.path = (
            folder / f"{os.getpid()}-{Path(drafted).name[len(DRAFT_PREFIX) :]}{LEASE_SUFFIX}"
        )
        os.rename(drafted, self.path)
        self.pid = os.getpid()
        self.lines = 0
        self.compact_at = COMPACT_AFTER
        atexit.register(self.release)

    def add(self, folder: Path) -> None:
        os.write(self.fd, f"{folder}\n".encode())
        self.lines += 1
        if self.lines >= self.compact_at:
            self._compact()
            self.compact_at = max(COMPACT_AFTER, 2 * self.lines)

    def release(self) -> None:
        """At a normal exit: the lease goes where its folders have; else it names those left
        (helpers may still be finishing in them) for a later sweep."""
        if os.getpid() != self.pid:  # a forked child's exit: its parent's lease stays
            return
        self._compact()
        if not self.lines:
            self.path.unlink(missing_ok=True)

    def _compact(self) -> None:
        kept = [p for p in _named(self.fd) if os.path.isdir(p)]
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.write(self.fd, "".join(f"{p}\n" for p in kept).encode())
        self.lines = len(kept)


class UnsafeLeases(RuntimeError):
    """The lease folder is not this user's alone: its leases could name anyone's folders."""


class _NoLease:
    """Where the lease folder is refused: folders are made as before, swept by nobody."""

    def __init__(self) -> None:
        self.pid = os.getpid()

    def add(self, folder: Path) -> None:
        pass


def leases_folder() -> Path:
    """The host's lease folder for this user: under /tmp (where shm_manager puts its sockets),
    else under the temporary folder. Another user could make it first in a shared /tmp, and a
    lease put there would have this user's processes remove what it names: a folder that is
    not this user's own, or that others may write to, is refused."""
    folder = Path(short_root()) / f"kb-leases-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    status = folder.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o022:
        raise UnsafeLeases(f"{folder} is not a folder of this user's alone")
    return folder


def short_root() -> str:
    """/tmp where there is one, else the temporary folder: a short path, which a Unix socket's
    address (108 bytes) needs and a deep temporary folder (pytest's, say) would overflow."""
    return "/tmp" if os.path.isdir("/tmp") else tempfile.gettempdir()


def make_folder(prefix: str, dir: str | Path | None = None) -> Path:
    """tempfile.mkdtemp(prefix, dir), named in this process's lease."""
    global _lease
    with _lock:
        if _lease is None or _lease.pid != os.getpid():
            try:
                sweep_abandoned()
                _lease = _Lease(leases_folder())
            except UnsafeLeases as exc:  # the folders are made, just never swept
                warnings.warn(f"kernelboard: temporary folders are not leased: {exc}", stacklevel=2)
                _lease = _NoLease()
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=dir))
        _lease.add(folder)
    return folder


def sweep_abandoned() -> int:
    """Remove the folders of every lease whose process is gone; how many folders went."""
    removed = 0
    now = time.time()
    for lease in leases_folder().iterdir():
        try:
            if now - lease.stat().st_mtime < GRACE_S:
                continue
        except OSError:  # swept by another process meanwhile
            continue
        try:
            fd = os.open(lease, os.O_RDWR)
        except OSError:  # swept by another process meanwhile
            continue
        try:
            if os.fstat(fd).st_uid != os.getuid():  # not written by this user's processes
                os.close(fd)
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # its process lives
            os.close(fd)
            continue
        try:
            for path in _named(fd):
                if _removable(path):
                    shutil.rmtree(path, ignore_errors=True)
                    removed += 1
            lease.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return removed


def _named(fd: int) -> list[str]:
    os.lseek(fd, 0, os.SEEK_SET)
    with os.fdopen(os.dup(fd), "rb") as lines:
        return [line.decode(errors="replace").strip() for line in lines if line.strip()]


def _removable(path: str) -> bool:
    """Only what make_folder could have made: an absolute path to a folder of this user's, not
    a link, named as mkdtemp names."""
    folder = Path(path)
    if not folder.is_absolute() or len(folder.parts) < 3 or folder.is_symlink():
        return False
    if not _FOLDER_NAME.fullmatch(folder.name) or ".." in folder.parts:
        return False
    try:
        return folder.is_dir() and folder.stat().st_uid == os.getuid()
    except OSError:
        return False
