"""How CPU tensors' shared-memory files are kept track of, on the judge's side.

Two registries: torch's own torch_shm_manager, for the judge's process alone, its socket in a
folder no worker is given; and the judge's shm_registry.py process, which every worker talks to
(the handles the judge sends name it, and the judge reads the workers' replies through it), its
socket in a folder made before torch is imported, so that a sandboxed worker can be given it at
its start. torch's manager ends on the first client that misbehaves, and torch never starts a
second: no untrusted process may reach it. Both folders go when the judge exits."""

from __future__ import annotations

import atexit
import functools
import os
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import scratch


def share_through_files() -> None:
    """Tensors cross to the worker as shared-memory files (CPU) or CUDA IPC handles.

    The default strategy passes descriptors through a side channel that needs a shared
    multiprocessing key; our worker is not a multiprocessing child, so it cannot use it.
    """
    import torch.multiprocessing

    torch.multiprocessing.set_sharing_strategy("file_system")


@functools.cache
def _socket_folder(prefix: str) -> Path:
    folder = scratch.make_folder(prefix, dir=scratch.short_root())
    atexit.register(_remove_socket_folder, folder, os.getpid())
    return folder


# At the judge's exit: wait (at most 60 s) for the manager to remove its own socket folder,
# then remove the judge's. A shell, detached: the manager exits only after the judge has.
_REMOVE_WHEN_EMPTY = 'while [ -n "$(ls -A "$1")" ]; do sleep 0.05; done; rmdir "$1"'


def _remove_socket_folder(folder: Path, owner: int) -> None:
    """At the judge's exit, its socket folders go too: one left per judge run would pile up on
    a runner. A manager outlives the judge by a moment and removes its socket (torch's, the
    folder it made inside this one) when the judge's connection closes; torch's, its folder
    removed before that, aborts ("terminate called ... No such file or directory"). So an empty
    folder goes now and one still in use goes after it. A process forked from the judge leaves
    it to the judge."""
    if os.getpid() != owner:
        return
    try:
        folder.rmdir()
    except FileNotFoundError:
        return
    except OSError:  # the manager's folder is still inside
        subprocess.Popen(
            ["timeout", "60", "sh", "-c", _REMOVE_WHEN_EMPTY, "sh", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def shm_manager_home() -> Path:
    """The folder of the judge's registry socket (shm_registry.py), made before torch is
    imported so that a sandboxed worker can be given it at its start and the judge's torch
    import can overlap the worker's start-up. Made again if something cleaned it away before
    the registry started."""
    folder = _socket_folder("kb-shm-")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shm_manager_folders() -> list[Path]:
    """The judge's shared-memory folders a sandboxed worker must reach: the registry's."""
    return [shm_manager_home()]


_registries: dict[int, tuple[subprocess.Popen, str]] = {}  # by judge pid
_registry_lock = threading.Lock()


def registry_socket() -> str:
    """The socket of this judge's shared-memory registry, started on first use: every CPU
    tensor handle the judge sends names it, and every one a worker sends back is mapped
    through it. It exits when the judge does."""
    with _registry_lock:
        known = _registries.get(os.getpid())
        if known is not None and known[0].poll() is None:
            return known[1]
        # Named by the judge's pid: a judge forked from another (a nested pytest) shares its
        # home. One killed from outside is followed by one at a path of its own, since torch
        # keeps its broken connection to the old one by path.
        name = f"registry-{os.getpid()}" + (f"-{time.monotonic_ns()}" if known else "")
        path = str(shm_manager_home() / f"{name}.sock")
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(Path(__file__).with_name("shm_registry.py")), path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a ^C to the judge's group is the judge's to handle
        )
        ready = select.select([process.stdout], [], [], 30.0)[0]
        line = process.stdout.readline() if ready else b""  # type: ignore[union-attr]
        if line != b"ready\n":
            process.kill()
            raise RuntimeError(f"the shared-memory registry did not start (it said {line!r})")
        _registries[os.getpid()] = (process, path)
        _connect_judge(path)
        return path


def _connect_judge(path: str) -> None:
    """The judge's own connection to its registry, made now, before any worker can reach it:
    torch keeps one connection per registry for the process's life, and a judge that had to
    connect while a worker flooded the registry would wait with the GIL held.

    torch registers a process's new shared files with any manager it is connected to (the
    first of an unordered map), so the judge connects to none but its own two: torch's manager,
    started first in its private folder, and the registry."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    shm_manager_dir()
    own = torch.UntypedStorage(1)
    _, handle, size = own._share_filename_cpu_()  # `own` keeps the file while it is mapped again
    torch.UntypedStorage._new_shared_filename_cpu(path.encode(), handle, size)


@functools.cache
def shm_manager_dir() -> Path | None:
    """The folder of the judge's own torch_shm_manager socket: a folder of the judge's that no
    worker is given. Sharing one tiny tensor starts the manager (once per process, with
    $TMPDIR pointing there); its socket path is in the handle."""
    from multiprocessing.reduction import ForkingPickler

    import torch

    share_through_files()
    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(_socket_folder("kb-judge-shm-"))
    try:
        handle = bytes(ForkingPickler.dumps(torch.zeros(1)))
    finally:
        if previous is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = previous
    found = re.search(rb"(/[^\x00]*?/torch-shm-dir-[A-Za-z0-9_]+)/manager\.sock", handle)
    return Path(found.group(1).decode()) if found else None
