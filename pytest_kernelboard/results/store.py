"""The results store: append-only records under results/, one file per evaluation.

    results/<leaderboard>/<device>/<YYYYMMDDTHHMMSSZ>-<author>-<run_id>-<index>.json
    results/_code/<sha256>.<ext>        the submitted code, content-addressed

Each record is a complete run document (schema kernelboard.run/1) holding exactly one
evaluation. A run that timed the reference holds the reference's evaluation too
(`submission.is_reference`); it is filed as `<stamp>-reference-<run_id>-<index>.json`, a
reference run that later runs reuse for their speedups (reference_runs.py). Names embed the run id, so two pull requests merged at the same time never
touch the same file, and files are created with mode 'x': nothing is ever rewritten or
deleted. Rankings are derived from the records (see rankings.py).

Commands: `kernelboard results add RUN.json [--pr N --commit SHA --repository O/N --url U]`
and `kernelboard results list [LEADERBOARD]`.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import rankings
from ..errors import KernelboardError
from ..names import slug
from ..spec.discovery import Catalog, find_repo_root, load_catalog
from ..spec.task import TaskError
from ..utc import parse_utc
from .records import RecordError, read_run, validate_run
from .result_model import Run

RESULTS_DIR = "results"
CODE_DIR = "_code"


class StoreError(KernelboardError, ValueError):
    """A run cannot be filed; the message says why. Nothing was written."""


def stamp(created_at: str) -> str:
    """'2025-06-01T12:00:03Z' -> '20250601T120003Z' (UTC, seconds)."""
    return parse_utc(created_at).strftime("%Y%m%dT%H%M%SZ")


def record_relpath(run: dict[str, Any], index: int) -> Path:
    """Where evaluation `index` of `run` is filed, relative to the repository root."""
    evaluation = run["evaluations"][index]
    name = "-".join(
        [
            stamp(run["created_at"]),
            slug(evaluation["submission"]["author"]),
            run["run_id"],
            str(index),
        ]
    )
    return (
        Path(RESULTS_DIR)
        / slug(evaluation["leaderboard"]["name"])
        / slug(run["environment"]["device"])
        / f"{name}.json"
    )


def split_run(run: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """One run document per evaluation: (index in the original run, document)."""
    parts = []
    for index, evaluation in enumerate(run["evaluations"]):
        doc = {k: v for k, v in run.items() if k != "evaluations"}
        doc = copy.deepcopy(doc)
        doc["evaluations"] = [copy.deepcopy(evaluation)]
        doc["evaluation_index"] = index
        parts.append((index, doc))
    return parts


def _negative_times(value: Any, path: str = "$") -> list[str]:
    """Paths of negative numbers under keys that hold times (…_us, …_s)."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}"
            if str(key).endswith(("_us", "_s")):
                numbers = item if isinstance(item, list) else [item]
                if any(
                    isinstance(n, int | float) and not isinstance(n, bool) and n < 0
                    for n in numbers
                ):
                    found.append(sub)
            found.extend(_negative_times(item, sub))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(_negative_times(item, f"{path}[{i}]"))
    return found


def check_run(run: dict[str, Any], catalog: Catalog) -> None:
    """Raise StoreError unless the run may be filed: schema, finite and non-negative times,
    a known leaderboard, and a device that leaderboard lists."""
    try:
        validate_run(run)
    except RecordError as exc:
        raise StoreError(f"not a valid results document: {exc}") from None
    negative = _negative_times(run)
    if negative:
        raise StoreError(f"{negative[0]}: a time cannot be negative")
    if not run["evaluations"]:
        raise StoreError("the run holds no evaluations; nothing to file")
    device = run["environment"]["device"]
    for i, evaluation in enumerate(run["evaluations"]):
        name = evaluation["leaderboard"]["name"]
        if name in catalog.errors:
            raise StoreError(
                f"$.evaluations[{i}]: leaderboard {name!r} does not load: {catalog.errors[name]}"
            )
        if name not in catalog.tasks:
            known = ", ".join(sorted(catalog.tasks)) or "none"
            raise StoreError(f"$.evaluations[{i}]: unknown leaderboard {name!r} (known: {known})")
        task = catalog.tasks[name]
        if device not in task.gpus:
            listed = ", ".join(task.gpus) or "none"
            raise StoreError(
                f"device {device!r} is not listed by leaderboard {name!r} (its gpus: {listed})"
            )


def _existing_duplicate(root: Path, run: dict[str, Any], index: int) -> Path | None:
    """A filed record of the same evaluation: same run id and index, or the same author's
    same submission (sha256) on the same leaderboard and device created at the same second
    (two authors may submit the same code: two entries). Reference runs
    (reference_runs.py) of two runs may share code and second; only the run id tells them apart."""
    target = root / record_relpath(run, index)
    folder = target.parent
    if not folder.is_dir():
        return None
    for path in folder.glob(f"*-{run['run_id']}-{index}.json"):
        return path
    if run["evaluations"][index]["submission"].get("is_reference"):
        return None
    submission = run["evaluations"][index]["submission"]
    sha, author = submission["sha256"], submission["author"]
    for path in folder.glob(f"{stamp(run['created_at'])}-*.json"):
        try:
            other = Run.from_json(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        if any(
            e.submission.sha256 == sha
            and e.submission.author == author
            and not e.submission.is_reference
            for e in other.evaluations
        ):
            return path
    return None


def _find_code(root: Path, evaluation: dict[str, Any]) -> Path | None:
    """The submitted file, if it is still here with the recorded content."""
    submission = evaluation["submission"]
    for candidate in (Path(submission["path"]), root / submission["path"]):
        try:
            if (
                candidate.is_file()
                and hashlib.sha256(candidate.read_bytes()).hexdigest() == submission["sha256"]
            ):
                return candidate
        except OSError:
            continue
    return None


def code_relpath(sha256: str, suffix: str) -> Path:
    return Path(RESULTS_DIR) / CODE_DIR / f"{sha256}{suffix or '.txt'}"


@dataclass(frozen=True)
class Filed:
    record: Path  # relative to root
    code: Path | None  # relative to root; None when the code file was not found


def add_run(
    root: Path,
    run: dict[str, Any],
    provenance: dict[str, Any] | None = None,
    catalog: Catalog | None = None,
    dry_run: bool = False,
) -> list[Filed]:
    """Validate `run` and file one record per evaluation. All or nothing: any problem raises
    StoreError before a file is written; an existing file is never touched."""
    root = Path(root)
    if provenance:
        run = dict(run)
        run["provenance"] = {**(run.get("provenance") or {}), **provenance}
    try:
        catalog = catalog or load_catalog(root)
    except TaskError as exc:
        raise StoreError(f"cannot load the leaderboards: {exc}") from None
    check_run(run, catalog)
    planned: list[tuple[Path, dict[str, Any]]] = []
    seen: set[tuple[str, str, bool]] = set()
    for index, doc in split_run(run):
        evaluation = doc["evaluations"][0]
        duplicate = _existing_duplicate(root, run, index)
        if duplicate is not None:
            raise StoreError(
                f"duplicate: evaluation {index} of run {run['run_id']} "
                f"({evaluation['submission']['author']} on {evaluation['leaderboard']['name']}) "
                f"is already filed as {duplicate.relative_to(root).as_posix()}"
            )
        key = (
            evaluation["submission"]["sha256"],
            evaluation["submission"]["author"],
            evaluation["leaderboard"]["name"],
            bool(evaluation["submission"].get("is_reference")),
        )
        if key in seen:
            raise StoreError(
                f"duplicate: evaluation {index} repeats an earlier evaluation of the run"
            )
        seen.add(key)
        planned.append((record_relpath(run, index), doc))
    if dry_run:
        return [Filed(rel, None) for rel, _ in planned]

    filed: list[Filed] = []
    for rel, doc in planned:
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
        try:
            with open(target, "x") as handle:
                handle.write(text)
        except FileExistsError:
            raise StoreError(f"{rel.as_posix()} already exists; it was not touched") from None
        evaluation = doc["evaluations"][0]
        code_rel = None
        source = _find_code(root, evaluation)
        if source is not None:
            code_rel = code_relpath(evaluation["submission"]["sha256"], source.suffix)
            code_path = root / code_rel
            code_path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with open(code_path, "xb") as handle:  # content-addressed: same name, same bytes
                    handle.write(source.read_bytes())
            except FileExistsError:
                pass
        filed.append(Filed(rel, code_rel))
    return filed


def iter_records(root: Path) -> Iterator[Path]:
    """Every record file of the store, in a stable order."""
    base = Path(root) / RESULTS_DIR
    if not base.is_dir():
        return
    for board in sorted(base.iterdir()):
        if board.name == CODE_DIR or not board.is_dir():
            continue
        for device in sorted(board.iterdir()):
            if device.is_dir():
                yield from sorted(device.glob("*.json"))


def load_records(
    root: Path, on_error: Callable[[Path, Exception], None] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(store-relative path, record) for every readable record; unreadable ones are reported
    to on_error and skipped."""
    records = []
    for path in iter_records(Path(root)):
        try:
            doc = json.loads(path.read_text())
            Run.from_json(doc)  # the model's shape, or on_error names what is wrong
            records.append((path.relative_to(root).as_posix(), doc))
        except (OSError, ValueError) as exc:
            if on_error is not None:
                on_error(path, exc)
    return records


def code_index(root: Path) -> dict[str, Path]:
    """sha256 -> stored code file, for every file under results/_code (one directory scan)."""
    folder = Path(root) / RESULTS_DIR / CODE_DIR
    if not folder.is_dir():
        return {}
    index: dict[str, Path] = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            sha = entry.name.split(".", 1)[0]
            if len(sha) == 64 and entry.is_file():
                index.setdefault(sha, Path(entry.path))
    return index


# ---------------------------------------------------------------- command line


def _root(args: argparse.Namespace) -> Path:
    if args.root:
        return Path(args.root)
    root = find_repo_root(Path.cwd())
    if root is None:
        raise StoreError("no leaderboards/ folder here or above; pass --root")
    return root


def cmd_add(args: argparse.Namespace) -> int:
    try:
        root = _root(args)
        try:
            run = read_run(Path(args.run))
        except RecordError as exc:
            raise StoreError(str(exc)) from None
        provenance = {
            key: value
            for key, value in (
                ("pull_request", args.pr),
                ("commit", args.commit),
                ("repository", args.repository),
                ("url", args.url),
            )
            if value is not None
        }
        filed = add_run(root, run, provenance, dry_run=args.check)
    except StoreError as exc:
        print(f"kernelboard results add: {args.run}: rejected: {exc}", file=sys.stderr)
        print("nothing was filed.", file=sys.stderr)
        return 1
    verb = "would file" if args.check else "filed"
    for item in filed:
        extra = f" (code: {item.code.as_posix()})" if item.code else ""
        print(f"{verb} {item.record.as_posix()}{extra}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    try:
        root = _root(args)
        catalog = load_catalog(root)
    except (StoreError, TaskError) as exc:
        print(f"kernelboard results list: {exc}", file=sys.stderr)
        return 1
    records = load_records(
        root, lambda path, exc: print(f"warning: skipping {path}: {exc}", file=sys.stderr)
    )
    names = [args.leaderboard] if args.leaderboard else sorted(catalog.tasks)
    for name in names:
        try:
            task = catalog.get(name)
        except (KeyError, TaskError) as exc:
            print(f"kernelboard results list: {exc.args[0]}", file=sys.stderr)
            return 1
        for device in task.gpus:
            ranking = rankings.rank_entries(records, task, device)
            print(f"{name} on {device}: {len(ranking)} ranked")
            for entry in ranking:
                c = entry.candidate
                tie = "  (tied within noise)" if entry.tied_with_above else ""
                print(
                    f"  {entry.rank:>3}. {c.author:<24} {c.score_us:>12.3f} us  {c.created_at}{tie}"
                )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("results", help="file and list ranked results")
    sub = parser.add_subparsers(dest="results_command", required=True, metavar="ACTION")

    add = sub.add_parser("add", help="validate a run document and file it under results/")
    add.add_argument("run", help="results document written by pytest (RUN.json)")
    add.add_argument("--root", help="repository root (default: found from the current folder)")
    add.add_argument("--pr", type=int, help="pull request number")
    add.add_argument("--commit", help="commit the run evaluated")
    add.add_argument("--repository", help="owner/name of the repository")
    add.add_argument("--url", help="link to the pull request")
    add.add_argument("--check", action="store_true", help="validate only; write nothing")
    add.set_defaults(func=cmd_add)

    lst = sub.add_parser("list", help="print the rankings derived from results/")
    lst.add_argument("leaderboard", nargs="?", help="only this leaderboard")
    lst.add_argument("--root", help="repository root (default: found from the current folder)")
    lst.set_defaults(func=cmd_list)
