"""The stages between the gate and the comment: stage + evaluate, trusted context, verify,
record. Each is a plain function; `cli.py` exposes them, `simulate.py` chains them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import KernelboardError
from ..results import store
from ..results.records import RecordError, read_run
from . import git
from .comment import DeviceOutcome
from .gate import LOGIN_RE, SAFE_NAME_RE, GateResult, runner_label

MAX_RUN_BYTES = 8 * 1024 * 1024
RUN_NAME_RE = re.compile(r"^kernelboard #(?P<pr>[0-9]{1,9}) @ (?P<sha>[0-9a-f]{40})$")
EVALUATE_PATH = ".github/workflows/evaluate.yml"


class RankInputError(KernelboardError):
    """What a pull request's rank line needs (the leaderboards, the stored records) cannot be
    read; the message names the file."""


def rank_inputs(
    root: Path, leaderboard: str | None = None
) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """The leaderboards and every stored record, for the rank line; RankInputError naming
    the pull request's leaderboard's load error, or each unreadable record (a rank computed
    without a record that could not be read would be wrong without saying so)."""
    from ..spec.discovery import load_catalog
    from ..spec.task import TaskError

    try:
        catalog = load_catalog(Path(root))
    except TaskError as exc:
        raise RankInputError(f"the leaderboards do not load: {exc}") from None
    if leaderboard is not None and leaderboard in catalog.errors:
        raise RankInputError(
            f"leaderboard {leaderboard!r} does not load: {catalog.errors[leaderboard]}"
        )
    tasks = catalog.tasks
    unreadable: list[str] = []
    records = store.load_records(
        Path(root), lambda path, exc: unreadable.append(f"{path}: {type(exc).__name__}: {exc}")
    )
    if unreadable:
        raise RankInputError("unreadable result records: " + "; ".join(unreadable))
    return tasks, records


class PipelineError(KernelboardError, RuntimeError):
    """A pipeline step refused or failed; the message says which and why."""


# ----------------------------------------------------------------------------- evaluate


def check_submission_path(path: str) -> PurePosixPath:
    """The shape the gate accepted: submissions/<leaderboard>/<author>/<file>, nothing odd."""
    p = PurePosixPath(path)
    if (
        len(p.parts) != 4
        or p.parts[0] != "submissions"
        or not SAFE_NAME_RE.match(p.parts[1])
        or not LOGIN_RE.match(p.parts[2])
        or not SAFE_NAME_RE.match(p.parts[3])
    ):
        raise PipelineError(f"not a submission path: {path!r}")
    return p


def stage(root: Path, submission: str, sha256: str, source: Path) -> Path:
    """Copy the gated submission file from the pull request's tree `source` into the trusted
    checkout `root`, after checking its bytes are the ones the gate saw."""
    rel = check_submission_path(submission)
    src = Path(source) / rel
    if src.is_symlink() or not src.is_file():
        raise PipelineError(f"{submission}: not a regular file in the pull request's tree")
    data = src.read_bytes()
    if hashlib.sha256(data).hexdigest() != sha256:
        raise PipelineError(f"{submission}: content differs from what the gate checked")
    target = Path(root) / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def evaluate(
    root: Path,
    submission: Path,
    out: Path,
    mode: str = "leaderboard",
    timeout: float | None = None,
    log: Path | None = None,
    sandbox_policy: str = "require",
) -> int:
    """Run the plugin on one submission; returns pytest's exit code (the document is at `out`).
    pytest's output goes to `log` when given, else to this process's stdout.

    sandbox_policy: the worker sandbox's KERNELBOARD_SANDBOX for the run; `require` (a runner
    judges untrusted code) refuses to start when bubblewrap cannot run, before any judging."""
    from ..supervisor import sandbox

    env = {**os.environ, sandbox.POLICY_VARIABLE: sandbox_policy}
    if sandbox_policy == "require":
        reason = sandbox.probe()
        if reason is not None:
            raise PipelineError(
                f"refusing to evaluate without the worker sandbox: {reason} "
                "(pass --allow-unsandboxed to evaluate anyway, only on a throwaway machine)"
            )
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(submission),
        "--kb-mode",
        mode,
        "--kb-results",
        str(Path(out).resolve()),
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    if log is None:
        return subprocess.run(cmd, cwd=root, timeout=timeout, env=env).returncode
    with open(log, "w") as handle:
        return subprocess.run(
            cmd, cwd=root, timeout=timeout, env=env, stdout=handle, stderr=subprocess.STDOUT
        ).returncode


# ----------------------------------------------------------------------------- context


@dataclass(frozen=True)
class RunContext:
    """What the privileged publication trusts, all taken from the workflow_run event."""

    pr: int
    head_sha: str
    base_sha: str
    run_id: int
    run_url: str
    created_at: str
    conclusion: str | None


def context_from_event(event: dict[str, Any], repository: str) -> RunContext:
    """Read a workflow_run event of evaluate.yml. The pull request and commit come from the
    run's name, which evaluate.yml (from the default branch) sets from its own trusted
    event; the run must be a pull_request_target run of that file in this repository."""
    run = event.get("workflow_run") or {}
    if run.get("event") != "pull_request_target":
        raise PipelineError(f"not a pull_request_target run (event {run.get('event')!r})")
    if run.get("path") != EVALUATE_PATH:
        raise PipelineError(f"not a run of {EVALUATE_PATH} (path {run.get('path')!r})")
    if (run.get("repository") or {}).get("full_name") != repository:
        raise PipelineError("the run belongs to another repository")
    if (run.get("head_repository") or {}).get("full_name") != repository:
        raise PipelineError("the run's workflow did not come from this repository")
    match = RUN_NAME_RE.match(run.get("display_title") or "")
    if not match:
        raise PipelineError(f"unexpected run name {run.get('display_title')!r}")
    base = run.get("head_sha") or ""
    if not re.fullmatch(r"[0-9a-f]{40}", base):
        raise PipelineError("the run has no base commit")
    return RunContext(
        pr=int(match["pr"]),
        head_sha=match["sha"],
        base_sha=base,
        run_id=int(run["id"]),
        run_url=str(run.get("html_url") or ""),
        created_at=str(run.get("run_started_at") or run.get("created_at") or ""),
        conclusion=run.get("conclusion"),
    )


# ----------------------------------------------------------------------------- verify


def find_run_file(runs_dir: Path, device: str) -> Path | None:
    """runs/kb-run-<label>/run.json (download-artifact) or runs/run-<label>.json."""
    label = runner_label(device)
    for candidate in (
        Path(runs_dir) / f"kb-run-{label}" / "run.json",
        Path(runs_dir) / f"run-{label}.json",
    ):
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def verify_run(path: Path, gate: GateResult, device: str) -> dict[str, Any]:
    """Schema validation plus agreement with the trusted gate; raises PipelineError."""
    if path.stat().st_size > MAX_RUN_BYTES:
        raise PipelineError(f"the results document is larger than {MAX_RUN_BYTES} bytes")
    try:
        run = read_run(path)
    except RecordError as exc:
        raise PipelineError(f"invalid results document: {exc}") from None
    if run["mode"] != "leaderboard":
        raise PipelineError(f"the run is in {run['mode']!r} mode, not 'leaderboard'")
    if run["environment"]["device"] != device:
        raise PipelineError(f"the run is from device {run['environment']['device']!r}")
    # One evaluation of the submission, then at most one reference run the judge measured
    # because results/ held none for this device and versions (reference_runs.py).
    extra = run["evaluations"][1:]
    if not run["evaluations"] or len(extra) > 1:
        raise PipelineError(f"expected one evaluation, found {len(run['evaluations'])}")
    for other in extra:
        if not other["submission"].get("is_reference") or (
            other["leaderboard"]["name"] != gate.leaderboard
        ):
            raise PipelineError(
                "expected one evaluation (and at most the leaderboard's reference run), "
                f"found {len(run['evaluations'])}"
            )
    ev = run["evaluations"][0]
    expected = {
        "leaderboard": (ev["leaderboard"]["name"], gate.leaderboard),
        "author": (ev["submission"]["author"], gate.author),
        "sha256": (ev["submission"]["sha256"], gate.sha256),
    }
    for name, (found, want) in expected.items():
        if found != want:
            raise PipelineError(f"the evaluation's {name} does not match the pull request")
    if ev["submission"].get("is_reference"):
        raise PipelineError("the evaluation is marked as the reference implementation")
    run.pop("provenance", None)  # only publication says where a run came from
    return run


def verify_all(gate: GateResult, runs_dir: Path) -> list[DeviceOutcome]:
    if not gate.accepted:
        return []
    outcomes = []
    for device in gate.devices:
        path = find_run_file(runs_dir, device)
        if path is None:
            problem = "no results document (the evaluation did not run or did not finish)"
            outcomes.append(DeviceOutcome(device, None, problem))
            continue
        try:
            outcomes.append(DeviceOutcome(device, verify_run(path, gate, device)))
        except (PipelineError, OSError) as exc:
            outcomes.append(DeviceOutcome(device, None, str(exc)))
    return outcomes


def save_outcomes(outcomes: list[DeviceOutcome], out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = []
    for o in outcomes:
        entry = {"device": o.device, "problem": o.problem, "run": None}
        if o.run is not None:
            name = f"run-{runner_label(o.device)}.json"
            (out_dir / name).write_text(json.dumps(o.run, indent=1, allow_nan=False) + "\n")
            entry["run"] = name
        index.append(entry)
    (out_dir / "outcomes.json").write_text(json.dumps(index, indent=1) + "\n")


def load_outcomes(out_dir: Path) -> list[DeviceOutcome]:
    """The outcomes save_outcomes wrote; PipelineError naming the file and entry when the
    index is not what it wrote."""
    out_dir = Path(out_dir)
    path = out_dir / "outcomes.json"
    try:
        index = json.loads(path.read_text())
    except ValueError as exc:
        raise PipelineError(f"{path} is not JSON: {exc}") from None
    if not isinstance(index, list):
        raise PipelineError(f"{path} must be a list of device outcomes")
    outcomes = []
    for number, entry in enumerate(index):
        if not isinstance(entry, dict) or not isinstance(entry.get("device"), str):
            raise PipelineError(f"{path}: entry {number} has no 'device' name")
        run = read_run(out_dir / entry["run"]) if entry.get("run") else None
        outcomes.append(DeviceOutcome(entry["device"], run, entry.get("problem")))
    return outcomes


# ----------------------------------------------------------------------------- record


def kernelboard(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run another kernelboard command the way a workflow step would."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_kernelboard.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def record(
    root: Path,
    outcomes: list[DeviceOutcome],
    *,
    pr: int,
    commit: str,
    repository: str | None = None,
    url: str | None = None,
) -> list[str]:
    """File every run through the store (`kernelboard results add`'s own function), then
    commit results/ (not pushed). A device without a run is refused, not skipped."""
    root = Path(root)
    missing = [o.device for o in outcomes if o.run is None]
    if missing:
        raise PipelineError(f"no verified run to record for {', '.join(missing)}")
    provenance: dict[str, Any] = {"pull_request": pr, "commit": commit}
    if repository:
        provenance["repository"] = repository
    if url:
        provenance["url"] = url
    filed: list[str] = []
    for outcome in outcomes:
        try:
            done = store.add_run(root, outcome.run, provenance)
        except store.StoreError as exc:
            raise PipelineError(
                f"kernelboard results add failed for {outcome.device}: {exc}"
            ) from None
        filed += [item.record.as_posix() for item in done]
    git.git(root, "add", "--", "results")
    git.git(
        root,
        "-c",
        "user.name=kernelboard",
        "-c",
        "user.email=kernelboard@users.noreply.github.com",
        "commit",
        "--quiet",
        "-m",
        f"results: pull request #{pr} at {commit[:12]}",
    )
    return filed


def push(root: Path, branch: str, token: str | None = None, host: str = "github.com") -> None:
    """Push the results commit; the token travels in one command's config, never on disk.
    A concurrent publication may have pushed first: rebase (results files are unique) and retry."""
    auth = git.auth_config(token, host) if token else []
    for _attempt in range(5):
        proc = subprocess.run(
            ["git", "-C", str(root), *auth, "push", "origin", f"HEAD:refs/heads/{branch}"],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            return
        subprocess.run(
            ["git", "-C", str(root), *auth, "pull", "--rebase", "origin", branch],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "GIT_COMMITTER_NAME": "kernelboard",
                "GIT_COMMITTER_EMAIL": "kernelboard@users.noreply.github.com",
            },
        )
    raise PipelineError(f"could not push the results to {branch}: {proc.stderr.strip()}")


def cleanup(paths: list[Path], root: Path) -> list[str]:
    """Remove leftovers inside the workspace (never outside it)."""
    root = Path(root).resolve()
    removed = []
    for path in paths:
        target = (root / path).resolve()
        if target == root or root not in target.parents:
            continue
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target, ignore_errors=True)
            removed.append(str(path))
        elif target.exists() or target.is_symlink():
            target.unlink()
            removed.append(str(path))
    return removed
