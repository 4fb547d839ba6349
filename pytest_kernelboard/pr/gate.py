"""The gate: decide from git data alone whether a pull request may be evaluated.

Nothing from the pull request is executed here. The leaderboards (their deadlines, languages
and devices) are read from the trusted checkout of the base branch; the pull request only
contributes the list of paths it changes and the bytes of its submission file.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema

from ..judge.devices import device_label, split_device_label
from ..spec.discovery import SUBMISSIONS_DIR, load_catalog
from ..spec.task import TaskError
from ..utc import format_utc
from . import git

# author_association values (from the pull_request event) of people who may merge.
MAINTAINER_ASSOCIATIONS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
LANG_SUFFIXES = {"py": (".py",), "cu": (".cu",)}
DEFAULT_MAX_BYTES = 256 * 1024
DEFAULT_MAX_PER_HOUR = 4
# GitHub environments the evaluation job runs in (docs/security.md): the first has no
# protection rule, the second requires a maintainer's review before any GPU runs.
ENV_TRUSTED = "kernelboard-maintainer"
ENV_APPROVAL = "kernelboard-external"
# Top-level folders a submission pull request must not touch, and what they hold.
PROTECTED = {
    ".github": "the workflows",
    ".ci": "the CI scripts",
    "pytest_kernelboard": "the harness",
    "leaderboards": "the leaderboards",
    "results": "the results",
    "site_generator": "the site",
    "docs": "the documentation",
    "tests": "the tests",
}
LOGIN_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    path: str | None = None


@dataclass
class GateResult:
    accepted: bool
    problems: list[Problem]
    base: str
    head: str
    pr_author: str
    maintainer: bool
    checked_at: str
    leaderboard: str | None = None
    author: str | None = None
    submission: str | None = None  # repository-relative path
    sha256: str | None = None
    lang: str | None = None
    devices: list[str] = field(default_factory=list)
    recent_evaluations: int = 0
    max_per_hour: int = DEFAULT_MAX_PER_HOUR

    @property
    def environment(self) -> str:
        return ENV_TRUSTED if self.maintainer else ENV_APPROVAL

    @property
    def matrix(self) -> dict[str, list[dict[str, str]]]:
        return {
            "include": [
                {"device": d, "label": runner_label(d), "runs_on": list(runner_labels(d))}
                for d in self.devices
            ]
        }

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["schema"] = GATE_SCHEMA_ID
        doc["environment"] = self.environment
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> GateResult:
        validate_gate(doc)
        data = {k: v for k, v in doc.items() if k not in ("schema", "environment")}
        data["problems"] = [Problem(**p) for p in data["problems"]]
        return cls(**data)


GATE_SCHEMA_ID = "kernelboard.gate/1"
_opt_str = {"type": ["string", "null"]}
GATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema", "accepted", "problems", "base", "head", "pr_author", "maintainer"],
    "additionalProperties": False,
    "properties": {
        "schema": {"const": GATE_SCHEMA_ID},
        "accepted": {"type": "boolean"},
        "problems": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["code", "message"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string", "pattern": "^[a-z_]+$"},
                    "message": {"type": "string", "maxLength": 2000},
                    "path": _opt_str,
                },
            },
        },
        "base": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
        "head": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
        "pr_author": {"type": "string"},
        "maintainer": {"type": "boolean"},
        "checked_at": {"type": "string"},
        "leaderboard": _opt_str,
        "author": _opt_str,
        "submission": _opt_str,
        "sha256": {"type": ["string", "null"], "pattern": "^[0-9a-f]{64}$"},
        "lang": _opt_str,
        "devices": {"type": "array", "items": {"type": "string"}},
        "recent_evaluations": {"type": "integer", "minimum": 0},
        "max_per_hour": {"type": "integer", "minimum": 0},
        "environment": {"type": "string"},
    },
}


def validate_gate(doc: Any) -> None:
    jsonschema.validate(doc, GATE_SCHEMA)


def runner_label(device: str) -> str:
    """Runner label of a device: 'H100' -> 'h100', 'RTX 4090' -> 'rtx-4090'."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-") or "unknown"


RUNNER_POOL_LABEL = "kernelboard"


def runner_labels(device: str) -> tuple[str, str, str]:
    """The labels a job for `device` asks for: ('self-hosted', 'kernelboard', 'h100')."""
    return ("self-hosted", RUNNER_POOL_LABEL, runner_label(device))


def _show(text: str, limit: int = 120) -> str:
    """A path from the pull request, made inert for markdown: inline code without backticks,
    line breaks, angle brackets or '@', and truncated."""
    clean = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    for bad in "`<>@":
        clean = clean.replace(bad, "?")
    if len(clean) > limit:
        clean = clean[: limit - 1] + "…"
    return f"`{clean}`"


def _iso(now: dt.datetime) -> str:
    return format_utc(now)


def check(
    root: Path,
    base: str,
    head: str,
    pr_author: str,
    association: str = "NONE",
    *,
    now: dt.datetime | None = None,
    recent_evaluations: int = 0,
    max_per_hour: int = DEFAULT_MAX_PER_HOUR,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> GateResult:
    """Apply every rule; all problems are reported, not just the first."""
    root = Path(root)
    now = now or dt.datetime.now(dt.UTC)
    base_sha, head_sha = git.resolve(root, base), git.resolve(root, head)
    maintainer = association.upper() in MAINTAINER_ASSOCIATIONS
    result = GateResult(
        accepted=False,
        problems=[],
        base=base_sha,
        head=head_sha,
        pr_author=pr_author,
        maintainer=maintainer,
        checked_at=_iso(now),
        recent_evaluations=recent_evaluations,
        max_per_hour=max_per_hour,
    )
    problems = result.problems

    def problem(code: str, message: str, path: str | None = None) -> None:
        problems.append(Problem(code, message, path))

    changed = git.changes(root, base_sha, head_sha)
    if not changed:
        problem("empty", "This pull request changes no files; add one submission file.")

    candidates = []
    for change in changed:
        parts = PurePosixPath(change.path).parts
        if parts[0] != SUBMISSIONS_DIR:
            what = PROTECTED.get(parts[0], "files outside submissions/")
            problem(
                "outside_submissions",
                f"{_show(change.path)} is outside `submissions/` ({what}). A submission pull request "
                "may only add files under `submissions/<leaderboard>/<author>/`; changes to "
                "anything else go in a separate pull request for the maintainers.",
                change.path,
            )
            continue
        if len(parts) != 4:
            problem(
                "layout",
                f"{_show(change.path)}: a submission lives exactly at "
                "`submissions/<leaderboard>/<author>/<file>`.",
                change.path,
            )
            continue
        if change.status == "D":
            problem(
                "deletion",
                f"{_show(change.path)} is deleted; submission pull requests only add or update files.",
                change.path,
            )
            continue
        if change.mode not in ("100644", "100755"):
            problem(
                "file_kind",
                f"{_show(change.path)} is not a regular file (symlinks and submodules are refused).",
                change.path,
            )
            continue
        candidates.append(change)

    if len(candidates) > 1:
        listed = ", ".join(_show(c.path) for c in candidates)
        problem(
            "several_files",
            f"This pull request adds {len(candidates)} files ({listed}); open one pull request "
            "per submission, with exactly one file.",
        )
    if len(candidates) == 1 and not [p for p in problems if p.code == "outside_submissions"]:
        _check_submission(root, result, candidates[0], problem, now, max_bytes)

    if not maintainer and max_per_hour > 0 and recent_evaluations >= max_per_hour:
        problem(
            "rate_limit",
            f"`{pr_author}` already had {recent_evaluations} evaluations in the last hour; the "
            f"limit is {max_per_hour} per hour. Push again later (or ask a maintainer to re-run).",
        )
    result.accepted = not problems and result.submission is not None
    return result


def _check_submission(root, result, change, problem, now, max_bytes) -> None:
    _, leaderboard, author, filename = PurePosixPath(change.path).parts
    result.leaderboard, result.author, result.submission = leaderboard, author, change.path
    if not LOGIN_RE.match(author) or not SAFE_NAME_RE.match(filename):
        problem(
            "names",
            f"{_show(change.path)}: the author folder must be a GitHub login and the file name may "
            "only use letters, digits, '.', '_' and '-'.",
            change.path,
        )
    if author.lower() != result.pr_author.lower() and not result.maintainer:
        problem(
            "author",
            f"The submission is filed under {_show(author)} but the pull request was opened by "
            f"`{result.pr_author}`; put it under {_show(f'submissions/{leaderboard}/{result.pr_author}/')} "
            "(only maintainers may submit for someone else).",
            change.path,
        )
    try:
        catalog = load_catalog(Path(root))
    except TaskError as exc:
        problem("catalog", f"The leaderboards of the base branch do not load: {exc}")
        return
    if leaderboard in catalog.errors:
        problem("catalog", f"The leaderboard does not load: {catalog.errors[leaderboard]}")
        return
    task = catalog.tasks.get(leaderboard)
    if task is None:
        known = ", ".join(f"`{n}`" for n in sorted(catalog.tasks)) or "none"
        problem(
            "unknown_leaderboard",
            f"There is no leaderboard {_show(leaderboard)} (known: {known}).",
            change.path,
        )
        return
    result.lang = task.lang
    result.devices = list(task.gpus)
    if task.multi_gpu:
        result.devices = multi_gpu_devices(task, problem)
    if task.is_closed(now):
        problem(
            "deadline",
            f"Leaderboard `{leaderboard}` closed on {_iso(task.deadline)}; it accepts no "
            "more submissions.",
            change.path,
        )
    suffixes = LANG_SUFFIXES.get(task.lang, ())
    if PurePosixPath(filename).suffix not in suffixes:
        problem(
            "file_type",
            f"{_show(filename)}: leaderboard `{leaderboard}` takes `{task.lang}` submissions "
            f"(file ending in {' or '.join(suffixes)}).",
            change.path,
        )
    if not task.gpus:
        problem(
            "no_devices",
            f"Leaderboard `{leaderboard}` lists no devices (`gpus` in its task.yml), so there "
            "is nowhere to evaluate it.",
        )
    if change.size > max_bytes:
        problem(
            "size",
            f"{_show(filename)} is {change.size} bytes; the limit is {max_bytes} bytes.",
            change.path,
        )
        return
    data = git.read_blob(root, result.head, change.path)
    result.sha256 = hashlib.sha256(data).hexdigest()
    try:
        data.decode("utf-8")
        binary = b"\0" in data
    except UnicodeDecodeError:
        binary = True
    if binary:
        problem("binary", f"{_show(filename)} is not UTF-8 text.", change.path)


def multi_gpu_devices(task, problem) -> list[str]:
    """The devices of a multi-GPU leaderboard, each carrying its GPU count ('H200x2'), so the
    job only lands on a runner that announces that many GPUs (`kernelboard runner-labels`).

    A bare name in `gpus` gets the count its cases need (the largest world_size); a listed
    count must be exactly that, since a run is labelled by the GPUs it used.
    """
    need = task.max_world_size
    routed = []
    for gpu in task.gpus:
        name, count = split_device_label(gpu)
        if count == 1:
            count = need
        if count != need:
            problem(
                "devices",
                f"Leaderboard `{task.name}` lists device `{gpu}`, but its cases run on at most "
                f"{need} GPUs (world_size); list `{device_label(need, name)}` instead.",
            )
            continue
        routed.append(device_label(count, name))
    return routed


def write_outputs(result: GateResult, path: Path) -> None:
    """Append the job outputs the workflows read ($GITHUB_OUTPUT format)."""
    with open(path, "a") as handle:
        handle.write(f"accepted={'true' if result.accepted else 'false'}\n")
        handle.write(f"environment={result.environment}\n")
        handle.write(f"matrix={json.dumps(result.matrix, separators=(',', ':'))}\n")
        # Only an accepted path has been checked against the naming rules (no newlines).
        handle.write(f"submission={result.submission if result.accepted else ''}\n")
        handle.write(f"sha256={result.sha256 if result.accepted else ''}\n")
