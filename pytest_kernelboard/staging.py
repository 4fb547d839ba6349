"""Lay out the files of one evaluation side by side, as task.yml's `files` names them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from .task import TaskSpec


def stage(task: TaskSpec, submission: Path | None, prefix: str = "kb-stage-") -> Path:
    """Copy every file task.yml lists into a fresh folder; the submission under its import name.

    With submission=None the submission slot stays empty (the judge's copy of the
    reference never sits beside participant code).
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    for entry in task.files:
        if entry.is_submission:
            if submission is not None:
                shutil.copyfile(submission, folder / entry.name)
            continue
        shutil.copyfile(task.source_path(entry), folder / entry.name)
    return folder


def module_name(file_name: str) -> str:
    """'submission.py' -> 'submission'."""
    return Path(file_name).stem
