"""Find leaderboards in the repository and map a submission file to its leaderboard."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from .sidecar import SIDECAR_NAME
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
    """task.yml files of leaderboards, at any depth of groups: <name>/, <group>/.../<name>/."""
    found = []
    for path in sorted(leaderboards_dir.rglob("task.yml")):
        inner = path.relative_to(leaderboards_dir).parts[:-1]
        if "solutions" in inner or any(part.startswith(".") for part in inner):
            continue
        found.append(path)
    return found


@dataclass(frozen=True)
class Catalog:
    """Every leaderboard of a repository, by unique name.

    A folder that does not load (bad YAML, a missing file, a name used twice) is kept in
    `errors` under the name it claims, and in `broken` by its task.yml: it fails its own
    submissions and self-check with that message, and nothing else.
    """

    root: Path
    tasks: dict[str, TaskSpec]
    errors: dict[str, TaskError] = field(default_factory=dict)
    broken: dict[Path, TaskError] = field(default_factory=dict)

    def get(self, name: str) -> TaskSpec:
        if name in self.errors:
            raise self.errors[name]
        try:
            return self.tasks[name]
        except KeyError:
            known = ", ".join(sorted(self.tasks)) or "none"
            raise KeyError(f"unknown leaderboard {name!r} (known: {known})") from None


def load_catalog(root: Path) -> Catalog:
    """Load every task.yml under root/leaderboards; a broken one fails only its own name."""
    return _load_catalog_cached(root.resolve())


def reload_catalog(root: Path) -> Catalog:
    """load_catalog after the leaderboards changed on disk (an import, a scaffold)."""
    _load_catalog_cached.cache_clear()
    return load_catalog(root)


@cache
def _load_catalog_cached(root: Path) -> Catalog:
    claims: dict[str, list[TaskSpec | TaskError]] = {}
    for path in task_files(root / LEADERBOARDS_DIR):
        try:
            task: TaskSpec | TaskError = load_task(path)
            name = task.name
        except TaskError as exc:
            task, name = exc, claimed_name(path)
        claims.setdefault(name, []).append(task)
    tasks: dict[str, TaskSpec] = {}
    errors: dict[str, TaskError] = {}
    broken: dict[Path, TaskError] = {}
    for name, found in claims.items():
        if len(found) > 1:
            paths = sorted(str(item.path) for item in found)
            error = TaskError(
                paths[-1],
                f"leaderboard name {name!r} is already used by {', '.join(paths[:-1])}; "
                "names must be unique across groups",
            )
            errors[name] = error
            broken.update((Path(p), error) for p in paths)
        elif isinstance(found[0], TaskError):
            errors[name] = broken[found[0].path] = found[0]
        else:
            tasks[name] = found[0]
    return Catalog(root, tasks, errors, broken)


def claimed_name(task_yml: Path) -> str:
    """The name a folder that does not load would have: its sidecar's or task.yml's, else the
    folder's, read leniently (this is only for pointing its own submissions at its error)."""
    for candidate in (task_yml.parent / SIDECAR_NAME, task_yml):
        try:
            raw = yaml.safe_load(candidate.read_text())
        except (OSError, ValueError, yaml.YAMLError):
            continue
        if isinstance(raw, dict) and isinstance(raw.get("name"), str) and raw["name"]:
            return raw["name"]
    return task_yml.parent.name


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
