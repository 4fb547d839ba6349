"""How a `lang: cu` stage is built: the spec the judge writes into the stage folder and the
worker reads before it builds (worker/builds.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

BUILD_SPEC = "kb_build.json"  # written by the judge into a `lang: cu` stage folder


def write_build_spec(stage_dir: Path, task: Any) -> None:
    """Judge side: tell the worker how to build this `lang: cu` stage (task.yml's config)."""
    config = task.config or {}
    defines = config.get("defines") or {}
    include_dirs, unavailable = _stage_include_dirs(stage_dir, task)
    spec = {
        "submission": task.submission_name,
        "sources": [str(s) for s in config.get("sources") or [task.submission_name]],
        "include_dirs": include_dirs,
        "defines": {str(k): ("" if v is None else str(v)) for k, v in defines.items()},
        "compile_flags": [str(f) for f in config.get("compile_flags") or []],
    }
    if unavailable:
        spec["unavailable"] = unavailable
    (stage_dir / BUILD_SPEC).write_text(json.dumps(spec, indent=1))


def _stage_include_dirs(stage_dir: Path, task: Any) -> tuple[list[str], str | None]:
    """Judge side: copy task.yml's header folders (spec/task.py's IncludeDir) into the stage,
    the only files the sandboxed worker reads beside the system's, so the build's hash covers
    them too. (Their staged paths, and why one is missing on this runner, if one is.)"""
    staged: list[str] = []
    for include in getattr(task, "include_dirs", ()):
        try:
            folder = include.locate(task.path)
        except ValueError as exc:  # the TaskError naming task.yml, the key and what is missing
            return staged, str(exc)
        target = include.staged_as()
        shutil.copytree(folder, stage_dir / target, dirs_exist_ok=True, ignore=_NOT_HEADERS)
        staged.append(target)
    return staged, None


_NOT_HEADERS = shutil.ignore_patterns("__pycache__", "*.pyc", ".git")


def read_build_spec(stage_dir: Path) -> dict[str, Any] | None:
    """Worker side: the spec of a `lang: cu` stage, None for any other stage."""
    path = stage_dir / BUILD_SPEC
    return json.loads(path.read_text()) if path.is_file() else None
