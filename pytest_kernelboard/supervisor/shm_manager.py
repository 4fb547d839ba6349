"""The judge's torch_shm_manager, which every worker's CPU tensors go through: its socket's
folder, made before torch is imported so that a sandboxed worker can be given it at its start,
and removed when the judge exits."""

from __future__ import annotations

import atexit
import functools
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def share_through_files() -> None:
    """Tensors cross to the worker as shared-memory files (CPU) or CUDA IPC handles.

    The default strategy passes descriptors through a side channel that needs a shared
    multiprocessing key; our worker is not a multiprocessing child, so it cannot use it.
    """
    import torch.multiprocessing

    torch.multiprocessing.set_sharing_strategy("file_system")


@functools.cache
def _shm_manager_folder() -> Path:
    # A short path: the manager's socket path must fit a Unix socket address (108 bytes),
    # which a deep temporary folder (pytest's, say) would overflow.
    short = "/tmp" if os.path.isdir("/tmp") else None
    folder = Path(tempfile.mkdtemp(prefix="kb-shm-", dir=short))
    atexit.register(_remove_shm_manager_folder, folder, os.getpid())
    return folder


# At the judge's exit: wait (at most 60 s) for the manager to remove its own socket folder,
# then remove the judge's. A shell, detached: the manager exits only after the judge has.
_REMOVE_WHEN_EMPTY = 'while [ -n "$(ls -A "$1")" ]; do sleep 0.05; done; rmdir "$1"'


def _remove_shm_manager_folder(folder: Path, owner: int) -> None:
    """At the judge's exit, its manager folder goes too: one left per judge run would pile up
    on a runner. The manager outlives the judge by a moment and removes the socket folder it
    made inside this one when the judge's connection closes; removed before that, its exit
    aborts ("terminate called ... No such file or directory"). So an empty folder goes now and
    one the manager still uses goes after it. A process forked from the judge leaves it to the
    judge."""
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
    """A folder of the judge's own for its torch_shm_manager socket, made before torch is
    imported. The manager puts its socket under $TMPDIR, so a sandboxed worker can be given
    this folder at its start and the judge's torch import can overlap the worker's start-up.
    Made again if something cleaned it away before the manager started."""
    folder = _shm_manager_folder()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shm_manager_folders() -> list[Path]:
    """The judge's shared-memory manager folders a sandboxed worker must reach: the home made
    before torch, and, once torch is imported, the folder of a manager already running
    elsewhere (no import to save then)."""
    folders = [shm_manager_home()]
    if "torch" in sys.modules:
        share_through_files()
        manager = shm_manager_dir()
        if manager is not None and not manager.is_relative_to(shm_manager_home()):
            folders.append(manager)
    return folders


@functools.cache
def shm_manager_dir() -> Path | None:
    """The folder of the judge's torch_shm_manager socket, which a sandboxed worker must reach
    to map the judge's tensors. Sharing one tiny tensor starts the manager (once per process,
    with $TMPDIR pointing into shm_manager_home()); its socket path is in the handle."""
    from multiprocessing.reduction import ForkingPickler

    import torch

    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(shm_manager_home())
    try:
        handle = bytes(ForkingPickler.dumps(torch.zeros(1)))
    finally:
        if previous is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = previous
    found = re.search(rb"(/[^\x00]*?/torch-shm-dir-[A-Za-z0-9_]+)/manager\.sock", handle)
    return Path(found.group(1).decode()) if found else None
