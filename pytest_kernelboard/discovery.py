"""Find leaderboards in the repository and map a submission file to its leaderboard."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from .task import TaskError, TaskSpec, load_task

LEADERBOARDS_DIR = "leaderboards"
SUBMISSIONS_DIR = "submissions"
SUBMISSION_SUFFIXES = (".py", ".cu")
POPCORN_RE = re.compile(r"^\s*#!POPCORN\s+(leaderboard|gpu|gpus)\s+(\S+)", re.IGNORECASE)


def find_repo_root(start: Path) -> Path | None:
    """The nearest folder at or above `start` that holds a leaderboards/ folder."""
    start = start.resolve()
    for folder in [start, *start.parents]:
        if (folder / LEADERBOARDS_DIR).is_dir():
            return folder
    return None


def task_files(leaderboards_dir: Path) -> list[Path]:
    """task.yml files of leaderboards: <name>/task.yml or <group>/<name>/task.yml."""
    found = sorted(leaderboards_dir.glob("*/task.yml")) + sorted(
        leaderboards_dir.glob("*/*/task.yml")
    )
    return [p for p in found if "solutions" not in p.parts]


@dataclass(frozen=True)
class Catalog:
    """Every leaderboard of a repository, by unique name."""

    root: Path
    tasks: dict[str, TaskSpec]

    def get(self, name: str) -> TaskSpec:
        try:
            return self.tasks[name]
        except KeyError:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise KeyError(f"unknown leaderboard {name!r} (known: {known})") from None


def load_catalog(root: Path) -> Catalog:
    """Load every task.yml under root/leaderboards; names must be unique."""
    return _load_catalog_cached(root.resolve())


@cache
def _load_catalog_cached(root: Path) -> Catalog:
    tasks: dict[str, TaskSpec] = {}
    for path in task_files(root / LEADERBOARDS_DIR):
        task = load_task(path)
        if task.name in tasks:
            raise TaskError(
                path, f"leaderboard name {task.name!r} is already used by {tasks[task.name].path}"
            )
        tasks[task.name] = task
    return Catalog(root, tasks)


def popcorn_headers(source: str) -> dict[str, str]:
    """`#!POPCORN leaderboard <name>` / `#!POPCORN gpu <GPU>` lines at the top of a file."""
    headers: dict[str, str] = {}
    for line in source.splitlines()[:10]:
        match = POPCORN_RE.match(line)
        if match:
            headers[match.group(1).lower()] = match.group(2)
    return headers


@dataclass(frozen=True)
class SubmissionRef:
    """Where a submission lives and whose it is."""

    path: Path
    leaderboard: str
    author: str

    @property
    def display(self) -> str:
        """Path relative to the leaderboard's submissions folder, e.g. 'alice/submission.py'."""
        parts = self.path.parts
        if SUBMISSIONS_DIR in parts:
            idx = len(parts) - 1 - parts[::-1].index(SUBMISSIONS_DIR)
            return "/".join(parts[idx + 2 :])
        return self.path.name


def identify_submission(path: Path, override: str | None = None) -> SubmissionRef | None:
    """Leaderboard and author of a submission file, or None when nothing names a leaderboard.

    Precedence: --kb-leaderboard, then the path submissions/<leaderboard>/<author>/...,
    then a `#!POPCORN leaderboard <name>` header.
    """
    path = path.resolve()
    parts = path.parts
    leaderboard = author = None
    if SUBMISSIONS_DIR in parts:
        idx = len(parts) - 1 - parts[::-1].index(SUBMISSIONS_DIR)
        rest = parts[idx + 1 :]
        if len(rest) >= 3:
            leaderboard, author = rest[0], rest[1]
    if leaderboard is None:
        try:
            headers = popcorn_headers(path.read_text(errors="replace"))
        except OSError:
            headers = {}
        leaderboard = headers.get("leaderboard")
    leaderboard = override or leaderboard
    if leaderboard is None:
        return None
    return SubmissionRef(path, leaderboard, author or path.parent.name)
