"""Lay out the files of one evaluation side by side, as task.yml's `files` names them.

Every folder staged here is remembered and removed by `remove_staged()`, which the plugin
calls at the end of the pytest session (and, as a fallback, at interpreter exit).
"""

from __future__ import annotations

import atexit
import shutil
from pathlib import Path

from ..spec.task import TaskSpec
from ..supervisor import scratch

_STAGED: list[Path] = []


def stage(task: TaskSpec, submission: Path | None, prefix: str = "kb-stage-") -> Path:
    """Copy every file task.yml lists into a fresh folder; the submission under its import name.

    With submission=None the submission slot stays empty (the judge's copy of the
    reference never sits beside participant code).
    """
    folder = scratch.make_folder(prefix)
    _STAGED.append(folder)
    for entry in task.files:
        if entry.is_submission:
            if submission is not None:
                shutil.copyfile(submission, folder / entry.name)
            continue
        shutil.copyfile(task.source_path(entry), folder / entry.name)
    return folder


def staged_folders() -> list[Path]:
    """The folders staged by this process and not yet removed."""
    return list(_STAGED)


def remove_staged() -> list[Path]:
    """Remove every folder this process staged (workers using them must be closed first)."""
    removed = []
    while _STAGED:
        folder = _STAGED.pop()
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


atexit.register(remove_staged)


def module_name(file_name: str) -> str:
    """'submission.py' -> 'submission'."""
    return Path(file_name).stem
