"""`kernelboard import gpumode PATH`: GPU MODE problem sets as leaderboards, files unmodified.

PATH is a folder laid out like GPU MODE's `problems/`: competition YAMLs (`name`,
`description`, `deadline`, `problems: [{directory, name, deadline, gpus}]`) beside the
problem-set folders they point into. Every problem folder is copied byte for byte under
`leaderboards/<group>/`, with the files its task.yml reaches outside the folder (`../utils.py`,
`../template.py`, ...) at the same relative place, so the copy runs as it did there. The
leaderboard name, deadline and devices from the YAML go into a `kernelboard.yml` beside the
unmodified task.yml (GPU MODE's parser rejects unknown task.yml keys).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..spec.discovery import LEADERBOARDS_DIR, find_repo_root, reload_catalog
from ..spec.sidecar import write_sidecar
from ..spec.task import SUBMISSION_MARKER, TaskError, load_task

IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class ImportFailure(Exception):
    """The source cannot be imported as asked; the message says which file or key."""


@dataclass(frozen=True)
class Problem:
    """One `problems:` entry of a competition YAML."""

    directory: Path  # absolute
    name: str
    deadline: Any
    gpus: tuple[str, ...]


@dataclass(frozen=True)
class Competition:
    path: Path
    name: str
    description: str
    deadline: Any
    problems: tuple[Problem, ...]


def read_competition(path: Path, problems_root: Path) -> Competition:
    """Parse a competition YAML; problem directories are relative to the YAML's folder (else
    to PATH)."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ImportFailure(f"{path}: cannot read: {exc.strerror}") from None
    except (yaml.YAMLError, ValueError) as exc:
        raise ImportFailure(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("problems"), list):
        raise ImportFailure(f"{path}: expected a mapping with a 'problems' list")
    problems = []
    for index, item in enumerate(raw["problems"]):
        where = f"{path}: problems[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("directory"), str):
            raise ImportFailure(f"{where}: expected a mapping with 'directory'")
        candidates = [path.parent / item["directory"], problems_root / item["directory"]]
        folder = next((c for c in candidates if (c / "task.yml").is_file()), None)
        if folder is None:
            raise ImportFailure(f"{where}: no task.yml in directory {item['directory']!r}")
        gpus = item.get("gpus") or []
        if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
            raise ImportFailure(f"{where}: 'gpus' must be a list of device names, got {gpus!r}")
        name = item.get("name") or folder.name
        if not isinstance(name, str):
            raise ImportFailure(f"{where}: 'name' must be a string, got {name!r}")
        problems.append(
            Problem(
                folder.resolve(), name, item.get("deadline") or raw.get("deadline"), tuple(gpus)
            )
        )
    return Competition(
        path=path,
        name=str(raw.get("name") or path.stem),
        description=str(raw.get("description") or ""),
        deadline=raw.get("deadline"),
        problems=tuple(problems),
    )


def referenced_files(folder: Path) -> list[Path]:
    """Files task.yml names outside its own folder (shared utils, eval, templates)."""
    raw = yaml.safe_load((folder / "task.yml").read_text()) or {}
    sources = [f.get("source") for f in raw.get("files") or [] if isinstance(f, dict)]
    sources += list((raw.get("templates") or {}).values())
    config = raw.get("config") or {}
    sources += [s for s in config.get("sources") or [] if isinstance(s, str)]
    found = []
    for source in sources:
        if not isinstance(source, str) or source == SUBMISSION_MARKER:
            continue
        path = (folder / source).resolve()
        if path.is_file() and not path.is_relative_to(folder):
            found.append(path)
    return found


@dataclass(frozen=True)
class Placement:
    """Where one problem and its shared files go, relative to leaderboards/<group>/."""

    problem: Problem
    folder: Path  # the problem's folder, relative
    shared: tuple[tuple[Path, Path], ...]  # (source, relative destination)


def place(problem: Problem) -> Placement:
    """Keep the problem and its shared files in the same relative positions: the problem-set
    folder (its parent) becomes the group, or a higher common folder when a file climbs
    further (`../../other_set/utils.py`)."""
    shared = referenced_files(problem.directory)
    anchor = problem.directory.parent
    for path in shared:
        while not path.is_relative_to(anchor):
            anchor = anchor.parent
    return Placement(
        problem,
        problem.directory.relative_to(anchor),
        tuple((path, path.relative_to(anchor)) for path in shared),
    )


def import_competition(
    competition: Competition, root: Path, group: str, replace: bool = False
) -> list[Path]:
    """Copy every problem (files unmodified) and write its sidecar; the task.yml paths."""
    group_dir = root / LEADERBOARDS_DIR / group
    placements = [place(problem) for problem in competition.problems]
    names = [p.name for p in competition.problems]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ImportFailure(f"{competition.path}: leaderboard name(s) used twice: {dupes}")
    for placement in placements:  # check everything before writing anything
        dest = group_dir / placement.folder
        if dest.exists() and not replace:
            raise ImportFailure(f"{dest} already exists; remove it or pass --replace")
        for source, relative in placement.shared:
            target = group_dir / relative
            if target.is_file() and target.read_bytes() != source.read_bytes() and not replace:
                raise ImportFailure(
                    f"{target} already exists with other contents than {source}; "
                    "import into another --group or pass --replace"
                )
    written = []
    for placement in placements:
        dest = group_dir / placement.folder
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(placement.problem.directory, dest, ignore=IGNORED)
        for source, relative in placement.shared:
            (group_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, group_dir / relative)
        problem = placement.problem
        write_sidecar(
            dest,
            {
                "name": problem.name,
                "deadline": str(problem.deadline) if problem.deadline else None,
                "gpus": list(problem.gpus) or None,
                "competition": competition.name,
            },
        )
        written.append(dest / "task.yml")
    return written


def competition_files(path: Path, competition: str | None) -> list[Path]:
    if competition:
        candidate = Path(competition)
        candidate = candidate if candidate.is_absolute() else (Path.cwd() / candidate)
        if not candidate.is_file():
            candidate = path / competition
        if not candidate.is_file():
            raise ImportFailure(f"competition YAML {competition!r} not found")
        return [candidate.resolve()]
    found = []
    for yml in sorted([*path.glob("*.yaml"), *path.glob("*.yml")]):
        try:
            raw = yaml.safe_load(yml.read_text())
        except (yaml.YAMLError, ValueError):
            continue
        if isinstance(raw, dict) and isinstance(raw.get("problems"), list):
            found.append(yml.resolve())
    if not found:
        raise ImportFailure(f"{path}: no competition YAML (one with a 'problems' list) found")
    return found


def cmd_import(args: argparse.Namespace) -> int:
    source = Path(args.path).resolve()
    root = Path(args.root).resolve() if args.root else find_repo_root(Path.cwd()) or Path.cwd()
    try:
        if not source.is_dir():
            raise ImportFailure(f"{source}: not a folder")
        ymls = competition_files(source, args.competition)
        if args.group and len(ymls) > 1:
            raise ImportFailure("--group applies to one competition; name it with --competition")
        imported = []
        for yml in ymls:
            competition = read_competition(yml, source)
            group = args.group or yml.stem
            imported += import_competition(competition, root, group, args.replace)
    except ImportFailure as exc:
        print(f"kernelboard import gpumode: {exc}", file=sys.stderr)
        return 1
    status = 0
    catalog = reload_catalog(root)
    for task_yml in imported:
        try:
            task = load_task(task_yml)
            catalog.get(task.name)
        except (TaskError, KeyError) as exc:
            print(f"error: {exc.args[0]}", file=sys.stderr)
            status = 1
            continue
        extras = [f"deadline {task.deadline:%Y-%m-%d %H:%M} UTC" if task.deadline else None]
        extras.append(f"gpus {', '.join(task.gpus)}" if task.gpus else None)
        where = os.path.relpath(task_yml.parent, root)
        print(
            f"imported {task.name} -> {where} ({'; '.join(e for e in extras if e) or 'no deadline'})"
        )
    if status == 0:
        print(f"check them with: pytest {os.path.relpath(root / LEADERBOARDS_DIR, Path.cwd())}")
    return status


def register(sources: argparse._SubParsersAction) -> None:
    parser = sources.add_parser(
        "gpumode",
        help="GPU MODE problem sets (competition YAML + problem folders), files unmodified",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("path", help="folder laid out like GPU MODE's problems/")
    parser.add_argument(
        "--competition",
        metavar="YAML",
        help="the competition YAML (default: every YAML in PATH with a 'problems' list)",
    )
    parser.add_argument(
        "--group", help="folder under leaderboards/ (default: the competition YAML's stem)"
    )
    parser.add_argument("--root", help="the leaderboard repository (default: the current one)")
    parser.add_argument("--replace", action="store_true", help="overwrite problems imported before")
    parser.set_defaults(func=cmd_import)
