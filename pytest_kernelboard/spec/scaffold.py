"""`kernelboard new`: create a leaderboard folder that passes its own self-check.

    kernelboard new <name> [--group G] [--root DIR]

creates ``leaderboards/<name>/`` (or ``leaderboards/<G>/<name>/``) at the repository root,
whichever folder inside the repository it runs from (`repository_root`), holding task.yml,
task.py, reference.py, README.md, template.py, solutions/correct/submission.py and
solutions/wrong/submission.py: a small working problem (element-wise ReLU) to replace with
your own. The reference passes its own check, the correct solution passes every test case
and the wrong one fails at least one.

Shared helpers: every leaderboard lists ``{"name": "utils.py", "source": "../utils.py"}``,
i.e. the utils.py of the folder that holds it. At the top level that is
``leaderboards/utils.py``; inside a group it is ``leaderboards/<G>/utils.py``, so a group
folder is self-contained (as GPU MODE's problem sets are). When that file does not exist
yet it is created: a group copies ``leaderboards/utils.py`` when there is one, otherwise the
copy packaged with kernelboard is used. An existing utils.py is never overwritten.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from ..errors import KernelboardError
from .discovery import LEADERBOARDS_DIR, find_repo_root, task_files

NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
UTILS_NAME = "utils.py"
UTILS_SOURCE = "../utils.py"

# template file (package data) -> path inside the new leaderboard folder
TEMPLATE_FILES = {
    "task.yml": "task.yml",
    "task.py.tmpl": "task.py",
    "reference.py.tmpl": "reference.py",
    "README.md": "README.md",
    "template.py.tmpl": "template.py",
    "submission_correct.py.tmpl": "solutions/correct/submission.py",
    "submission_wrong.py.tmpl": "solutions/wrong/submission.py",
}
UTILS_TEMPLATE = "utils.py.tmpl"


class ScaffoldError(KernelboardError, ValueError):
    """The leaderboard cannot be created; the message says why."""


@dataclass
class Scaffolded:
    """What `create_leaderboard` made."""

    folder: Path
    files: list[Path] = field(default_factory=list)
    utils_created: Path | None = None


def template_text(name: str) -> str:
    return (resources.files(__package__) / "scaffold_template" / name).read_text(encoding="utf-8")


def check_slug(value: str, what: str) -> str:
    if not NAME_RE.fullmatch(value):
        raise ScaffoldError(
            f"{what} {value!r} is not a valid name: use lowercase letters, digits, '_' or '-', "
            "starting with a letter (at most 64 characters)"
        )
    return value


def render(text: str, name: str) -> str:
    """A template's text for the leaderboard `name`."""
    return text.replace("__NAME__", name).replace("__UTILS_SOURCE__", UTILS_SOURCE)


def repository_root(start: Path) -> Path:
    """The repository `start` is in: the nearest folder at or above it holding leaderboards/,
    else (a repository without leaderboards yet) the nearest holding .git, else `start`."""
    start = start.resolve()
    found = find_repo_root(start)
    if found is not None:
        return found
    for folder in [start, *start.parents]:
        if (folder / ".git").exists():
            return folder
    return start


def _check_not_nested(root: Path) -> None:
    """Refuse a root inside another repository's leaderboards/ (a leaderboards/leaderboards/)."""
    outer = find_repo_root(root.resolve().parent)
    if outer is not None and root.resolve().is_relative_to(outer / LEADERBOARDS_DIR):
        raise ScaffoldError(
            f"{root} is inside {outer / LEADERBOARDS_DIR}; the repository root is {outer} "
            "(leave out --root to use it)"
        )


def create_leaderboard(root: Path | str, name: str, group: str | None = None) -> Scaffolded:
    """Create leaderboards/[group/]name under `root`; refuse when it exists or a name is bad."""
    check_slug(name, "leaderboard name")
    if group is not None:
        check_slug(group, "group name")
    _check_not_nested(Path(root))
    leaderboards = Path(root) / LEADERBOARDS_DIR
    parent = leaderboards / group if group else leaderboards
    folder = parent / name
    if folder.exists():
        raise ScaffoldError(f"{folder} already exists; choose another name or remove it first")
    if group is not None and (leaderboards / group / "task.yml").exists():
        raise ScaffoldError(f"{leaderboards / group} is a leaderboard, not a group folder")
    if leaderboards.is_dir():
        for existing in task_files(leaderboards):
            if existing.parent.name == name:
                raise ScaffoldError(
                    f"a leaderboard named {name!r} already exists at {existing.parent}; "
                    "leaderboard names must be unique across groups"
                )

    result = Scaffolded(folder)
    folder.mkdir(parents=True)
    for template, relative in TEMPLATE_FILES.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(template_text(template), name), encoding="utf-8")
        result.files.append(target)

    utils = parent / UTILS_NAME
    if not utils.exists():
        top_level = leaderboards / UTILS_NAME
        if group is not None and top_level.is_file():
            shutil.copyfile(top_level, utils)
        else:
            utils.write_text(template_text(UTILS_TEMPLATE), encoding="utf-8")
        result.utils_created = utils
    return result


def _run_new(args: argparse.Namespace) -> int:
    root = Path(args.root) if args.root else repository_root(Path.cwd())
    try:
        made = create_leaderboard(root, args.name, args.group)
    except (ScaffoldError, OSError) as exc:
        print(f"kernelboard new: error: {exc}", file=sys.stderr)
        return 1
    shown = made.folder.relative_to(root) if made.folder.is_relative_to(root) else made.folder
    where = "" if root.resolve() == Path.cwd().resolve() else f" in {root}"
    print(f"created {shown}/{where}")
    for path in made.files:
        print(f"  {path.relative_to(made.folder)}")
    if made.utils_created is not None:
        utils = made.utils_created
        utils = utils.relative_to(root) if utils.is_relative_to(root) else utils
        print(f"created {utils} (shared helpers, referenced as {UTILS_SOURCE})")
    print(
        "next: replace the example problem in task.yml, reference.py, task.py, template.py,\n"
        f"README.md and the solutions, and check it with `pytest {os.path.relpath(made.folder)}`;"
        f"\nparticipants then submit submissions/{args.name}/<author>/submission.py"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `new` subcommand to the kernelboard CLI."""
    parser = subparsers.add_parser(
        "new",
        help="create a new leaderboard folder from a working template",
        description="Create leaderboards/[GROUP/]NAME with a task.yml, reference, template, "
        "README and a correct and a wrong solution that pass the self-check.",
    )
    parser.add_argument(
        "name", help="leaderboard name (folder name): lowercase, digits, '_' or '-'"
    )
    parser.add_argument("--group", default=None, help="create it inside leaderboards/<GROUP>/")
    parser.add_argument(
        "--root",
        default=None,
        help="repository root holding leaderboards/ (default: the repository of the current "
        "folder, from any folder inside it)",
    )
    parser.set_defaults(func=_run_new)
