"""`kernelboard pr simulate`: the whole pull-request flow, locally, on this machine's device.

A temporary git repository is made from a fixture (branch main); each simulated pull request
is a branch adding one submission. Then, as on GitHub: gate -> evaluation (the real pytest
plugin, through a subprocess) -> verification -> comment body -> `kernelboard results add`
and a commit on main -> `kernelboard site build`. Nothing talks to GitHub.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judge.devices import device_name
from ..utc import parse_utc
from . import comment as comment_mod
from . import gate as gate_mod
from . import git, pipeline

DEFAULT_FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "pr"


@dataclass
class PullRequest:
    submission: Path  # the file to submit
    leaderboard: str = "tiny"
    author: str = "alice"  # who opens the pull request
    folder_author: str | None = None  # submissions/<leaderboard>/<this>/ (default: author)
    association: str = "CONTRIBUTOR"
    also_touch: list[str] = field(default_factory=list)  # other paths the PR edits
    number: int = 1
    filename: str = "submission.py"


@dataclass
class Report:
    pr: int
    head: str
    gate: dict[str, Any]
    evaluated: list[str]  # devices evaluated
    verdict: str
    comment: str
    recorded: list[str]
    results_commit: str | None
    site: str | None
    site_error: str | None
    problems: list[str]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _commit(root: Path, message: str) -> str:
    git.git(root, "add", "-A")
    git.git(
        root,
        "-c",
        "user.name=simulator",
        "-c",
        "user.email=simulator@example.invalid",
        "commit",
        "--quiet",
        "--allow-empty",
        "-m",
        message,
    )
    return git.resolve(root, "HEAD")


def make_repository(fixture: Path, workdir: Path) -> Path:
    """main = the fixture's repo/ folder, committed."""
    root = workdir / "repo"
    shutil.copytree(Path(fixture) / "repo", root)
    git.git(root, "init", "--quiet", "-b", "main")
    _commit(root, "leaderboards")
    return root


def open_pull_request(root: Path, pr: PullRequest) -> str:
    """A branch pr-<n> from main that adds the submission (and whatever else it touches)."""
    branch = f"pr-{pr.number}"
    git.git(root, "checkout", "--quiet", "-b", branch, "main")
    try:
        folder = root / "submissions" / pr.leaderboard / (pr.folder_author or pr.author)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pr.submission, folder / pr.filename)
        for extra in pr.also_touch:
            path = root / extra
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as handle:
                handle.write("\n# changed by the pull request\n")
        return _commit(root, f"submission for {pr.leaderboard} by {pr.author}")
    finally:
        git.git(root, "checkout", "--quiet", "main")


def export_tree(root: Path, rev: str, path: str, dest: Path) -> None:
    """What actions/checkout of the PR head gives the evaluation job (just the one file here)."""
    target = dest / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(git.read_blob(root, rev, path))


def run_pull_request(
    root: Path,
    pr: PullRequest,
    *,
    now: dt.datetime,
    ledger: list[tuple[str, dt.datetime]],
    workdir: Path,
    mode: str = "leaderboard",
    site_out: Path | None = None,
) -> Report:
    head = open_pull_request(root, pr)
    recent = sum(
        1 for who, when in ledger if who == pr.author and now - when < dt.timedelta(hours=1)
    )
    ledger.append((pr.author, now))
    gate = gate_mod.check(
        root, "main", head, pr.author, pr.association, now=now, recent_evaluations=recent
    )
    problems: list[str] = []
    evaluated: list[str] = []
    runs_dir = workdir / f"runs-pr{pr.number}"
    if gate.accepted:
        local = device_name()
        for device in gate.devices:
            if device != local:
                problems.append(f"{device}: no runner for it here (this machine is {local})")
                continue
            source = workdir / f"pr{pr.number}-head"
            export_tree(root, head, gate.submission, source)
            staged = pipeline.stage(root, gate.submission, gate.sha256, source)
            out = runs_dir / f"kb-run-{gate_mod.runner_label(device)}" / "run.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            try:
                log = out.with_name("pytest.log")
                # A local rehearsal: the sandbox where it runs, else a warning (not a refusal).
                code = pipeline.evaluate(
                    root, Path(gate.submission), out, mode=mode, log=log, sandbox_policy="auto"
                )
            finally:
                staged.unlink(missing_ok=True)
                for parent in (staged.parent, staged.parent.parent):
                    if parent.is_dir() and not any(parent.iterdir()):
                        parent.rmdir()
                shutil.rmtree(source, ignore_errors=True)
            evaluated.append(device)
            if not out.is_file():
                tail = log.read_text(errors="replace")[-1500:]
                problems.append(
                    f"{device}: pytest exited {code} without a results document:\n{tail}"
                )
    outcomes = pipeline.verify_all(gate, runs_dir)
    if mode != "leaderboard":  # test mode: verify_run refuses it; keep the documents anyway
        outcomes = _test_mode_outcomes(gate, runs_dir, outcomes)
    tasks, records, rank_problem = None, None, None
    try:
        tasks, records = pipeline.rank_inputs(root, gate.leaderboard)
    except pipeline.RankInputError as exc:  # the comment says so in its rank line
        rank_problem = str(exc)
        problems.append(rank_problem)
    verdict = comment_mod.verdict(gate, outcomes)
    body = comment_mod.render_comment(
        gate, outcomes, tasks=tasks, records=records, rank_problem=rank_problem
    )
    recorded: list[str] = []
    results_commit = site = site_error = None
    if verdict == "accepted":
        recorded = pipeline.record(
            root,
            outcomes,
            pr=pr.number,
            commit=head,
            repository="local/simulation",
            url=f"https://example.invalid/pull/{pr.number}",
        )
        results_commit = git.resolve(root, "HEAD")
        out = site_out or (workdir / "site")
        proc = pipeline.kernelboard("site", "build", "--out", str(out), cwd=root)
        if proc.returncode == 0:
            site = str(out)
        else:
            site_error = (proc.stderr or proc.stdout).strip()[-2000:]
    return Report(
        pr=pr.number,
        head=head,
        gate=gate.to_json(),
        evaluated=evaluated,
        verdict=verdict,
        comment=body,
        recorded=recorded,
        results_commit=results_commit,
        site=site,
        site_error=site_error,
        problems=problems,
    )


def _test_mode_outcomes(gate, runs_dir, outcomes):
    from ..results.records import read_run

    fixed = []
    for outcome in outcomes:
        path = pipeline.find_run_file(runs_dir, outcome.device)
        if outcome.run is None and path is not None:
            outcome = comment_mod.DeviceOutcome(outcome.device, read_run(path))
        fixed.append(outcome)
    return fixed


def simulate(
    pulls: list[PullRequest],
    *,
    fixture: Path = DEFAULT_FIXTURE,
    workdir: Path | None = None,
    now: dt.datetime | None = None,
    mode: str = "leaderboard",
) -> tuple[Path, list[Report]]:
    """Replay pull requests one after the other on one repository; returns (repo, reports)."""
    workdir = Path(workdir or tempfile.mkdtemp(prefix="kb-simulate-"))
    workdir.mkdir(parents=True, exist_ok=True)
    root = make_repository(Path(fixture), workdir)
    now = now or dt.datetime.now(dt.UTC)
    ledger: list[tuple[str, dt.datetime]] = []
    reports = []
    for index, pr in enumerate(pulls):
        reports.append(
            run_pull_request(
                root,
                pr,
                now=now + dt.timedelta(minutes=index),
                ledger=ledger,
                workdir=workdir,
                mode=mode,
            )
        )
    return root, reports


def main(args: argparse.Namespace) -> int:
    fixture = Path(args.fixture) if args.fixture else DEFAULT_FIXTURE
    submission = (
        Path(args.submission) if args.submission else fixture / "submissions" / "correct.py"
    )
    now = None
    if args.now:
        now = parse_utc(args.now)
    pr = PullRequest(
        submission=submission,
        leaderboard=args.leaderboard,
        author=args.author,
        folder_author=args.folder_author,
        association=args.association,
        also_touch=list(args.also_touch),
        number=args.pr,
    )
    root, reports = simulate(
        [pr],
        fixture=fixture,
        workdir=Path(args.workdir) if args.workdir else None,
        now=now,
        mode=args.mode,
    )
    report = reports[0]
    if args.json:
        print(json.dumps({"repository": str(root), **report.to_json()}, indent=1))
    else:
        print(f"repository: {root}")
        print(f"gate: {'accepted' if report.gate['accepted'] else 'rejected'}")
        print(f"evaluated on: {', '.join(report.evaluated) or 'nothing'}")
        print(f"verdict: {report.verdict}")
        for line in report.problems:
            print(f"note: {line}")
        print("---- comment ----")
        print(report.comment)
        if report.recorded:
            print("recorded: " + ", ".join(report.recorded))
        if report.site:
            print(f"site: {report.site}")
        if report.site_error:
            print(f"site build failed: {report.site_error}", file=sys.stderr)
    return (
        0 if report.verdict in ("accepted", "rejected", "failed") and not report.site_error else 1
    )
