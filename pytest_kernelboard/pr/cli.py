"""`kernelboard pr ...`: the pull-request pipeline, one subcommand per workflow step."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from pathlib import Path

from ..results.records import RecordError, read_run
from ..utc import parse_utc
from . import comment as comment_mod
from . import gate as gate_mod
from . import git, pipeline


def _now(text: str | None) -> dt.datetime:
    if not text:
        return dt.datetime.now(dt.UTC)
    return parse_utc(text)


def _append(path: str | None, text: str) -> None:
    if path:
        with open(path, "a") as handle:
            handle.write(text)


def _err(command: str, exc: BaseException) -> int:
    print(f"kernelboard pr {command}: {exc}", file=sys.stderr)
    return 1


def _client():
    from .github import GitHubClient

    return GitHubClient.from_env()


# ----------------------------------------------------------------------------- gate


def cmd_gate(args: argparse.Namespace) -> int:
    root = Path(args.root)
    now = _now(args.now)
    author, association = args.author, args.association
    try:
        client = None
        if args.from_github:
            client = _client()
            facts = client.pull_request(args.pr)
            author, association = facts.author, facts.association
        if not author:
            raise ValueError("--author (or --pr with --from-github) is required")
        recent = args.recent
        if args.recent_from_github:
            client = client or _client()
            recent = client.count_recent_runs(author, now, exclude_run_id=args.exclude_run_id)
        result = gate_mod.check(
            root,
            args.base,
            args.head,
            author,
            association,
            now=now,
            recent_evaluations=recent,
            max_per_hour=args.max_per_hour,
            max_bytes=args.max_bytes,
        )
    except (git.GitError, ValueError, RuntimeError) as exc:
        return _err("gate", exc)
    doc = result.to_json()
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    if args.github_output:
        gate_mod.write_outputs(result, Path(args.github_output))
    verdict = "accepted" if result.accepted else "rejected"
    print(f"gate: {verdict} ({result.submission or 'no submission'})")
    for problem in result.problems:
        print(f"  - [{problem.code}] {problem.message}")
    return 0 if result.accepted or not args.strict else 2


def _load_gate(path: str) -> gate_mod.GateResult:
    return gate_mod.GateResult.from_json(json.loads(Path(path).read_text()))


# ----------------------------------------------------------------------------- evaluate


def cmd_evaluate(args: argparse.Namespace) -> int:
    root = Path(args.root)
    out = Path(args.out)
    try:
        pipeline.stage(root, args.submission, args.sha256, Path(args.source))
        policy = "auto" if args.allow_unsandboxed else "require"
        code = pipeline.evaluate(
            root, Path(args.submission), out, mode=args.mode, sandbox_policy=policy
        )
    except (pipeline.PipelineError, OSError) as exc:
        return _err("evaluate", exc)
    finally:
        if args.source_cleanup:
            _cleanup([args.source], root)
    if not out.is_file():
        print(
            f"kernelboard pr evaluate: no results document (pytest exit code {code})",
            file=sys.stderr,
        )
        return 1
    try:
        run = read_run(out)
    except RecordError as exc:
        return _err("evaluate", exc)
    outcome = comment_mod.DeviceOutcome(run["environment"]["device"], run)
    _append(args.summary, comment_mod.render_summary([outcome]))
    print(f"evaluate: pytest exit code {code}; results in {out}")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    outcomes = []
    for path in args.runs:
        try:
            run = read_run(Path(path))
        except RecordError as exc:
            return _err("summary", exc)
        outcomes.append(comment_mod.DeviceOutcome(run["environment"]["device"], run))
    sys.stdout.write(comment_mod.render_summary(outcomes))
    return 0


# ----------------------------------------------------------------------------- publish


def cmd_context(args: argparse.Namespace) -> int:
    try:
        event = json.loads(Path(args.event).read_text())
        ctx = pipeline.context_from_event(event, args.repository)
    except (OSError, ValueError, KeyError, pipeline.PipelineError) as exc:
        return _err("context", exc)
    lines = (
        f"pr={ctx.pr}\nsha={ctx.head_sha}\nbase={ctx.base_sha}\nrun_id={ctx.run_id}\n"
        f"run_url={ctx.run_url}\ncreated_at={ctx.created_at}\n"
    )
    _append(args.github_output, lines)
    sys.stdout.write(lines)
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """Fetch the pull request's commit as data (nothing from it is checked out or run)."""
    root = Path(args.root)
    token = os.environ.get("GITHUB_TOKEN")
    auth = git.auth_config(token) if token else []
    failures: list[str] = []
    try:
        for ref in (args.sha, f"+refs/pull/{args.pr}/head:refs/kernelboard/pr-{args.pr}"):
            try:
                git.git(root, *auth, "fetch", "--no-tags", "--quiet", "origin", ref)
            except git.GitError as exc:  # the next ref may still work; keep why this one failed
                failures.append(f"{ref}: {exc}")
                continue
            if git.git(root, "cat-file", "-t", args.sha, check=False).strip() == "commit":
                print(f"fetched {args.sha}")
                return 0
        tried = "".join(f"\n  {line}" for line in failures)
        raise git.GitError(f"commit {args.sha} of pull request #{args.pr} is not reachable{tried}")
    except git.GitError as exc:
        return _err("fetch", exc)


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        gate = _load_gate(args.gate)
    except (OSError, ValueError) as exc:
        return _err("verify", exc)
    outcomes = pipeline.verify_all(gate, Path(args.runs))
    pipeline.save_outcomes(outcomes, Path(args.out))
    for o in outcomes:
        state = "ok" if o.run is not None else f"unusable: {o.problem}"
        print(f"verify: {o.device}: {state}")
    return 0


def cmd_comment(args: argparse.Namespace) -> int:
    root = Path(args.root)
    try:
        gate = _load_gate(args.gate)
        outcomes = pipeline.load_outcomes(Path(args.verified)) if args.verified else []
    except (OSError, ValueError, RecordError, pipeline.PipelineError) as exc:
        return _err("comment", exc)
    # A broken catalog or record must not hide the results: the comment goes out, its rank
    # line saying what could not be read (and the log too).
    tasks, records, rank_problem = None, None, None
    try:
        tasks, records = pipeline.rank_inputs(root, gate.leaderboard)
    except pipeline.RankInputError as exc:
        rank_problem = str(exc)
        print(f"kernelboard pr: warning: no ranks in the comment: {exc}", file=sys.stderr)
    state = comment_mod.verdict(gate, outcomes)
    body = comment_mod.render_comment(
        gate,
        outcomes,
        tasks=tasks,
        records=records,
        run_url=args.run_url,
        rank_problem=rank_problem,
    )
    if args.out:
        Path(args.out).write_text(body)
    _append(args.summary, body.replace(comment_mod.MARKER + "\n", ""))
    _append(
        args.github_output,
        f"verdict={state}\naccepted={'true' if state == 'accepted' else 'false'}\n",
    )
    if args.post:
        try:
            client = _client()
            action, comment_id = client.upsert_comment(args.pr, body)
            print(f"comment {action} ({comment_id})")
            devices = [o.device for o in outcomes] or gate.devices
            by_device = {o.device: o for o in outcomes}
            for device in devices:
                outcome = by_device.get(device) or comment_mod.DeviceOutcome(
                    device, None, "no result"
                )
                status, description = comment_mod.commit_status(outcome, gate)
                client.set_status(
                    args.sha,
                    comment_mod.STATUS_CONTEXT.format(device=device),
                    status,
                    description,
                    args.run_url or None,
                )
        except Exception as exc:  # report, but the verdict output is already written
            return _err("comment", exc)
    else:
        sys.stdout.write(body)
    print(f"verdict: {state}", file=sys.stderr)
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    root = Path(args.root)
    try:
        outcomes = pipeline.load_outcomes(Path(args.verified))
        if not outcomes or not all(o.passed for o in outcomes):
            raise pipeline.PipelineError("not every device passed; nothing to record")
        filed = pipeline.record(
            root,
            outcomes,
            pr=args.pr,
            commit=args.commit,
            repository=args.repository,
            url=args.url,
        )
        if args.push:
            pipeline.push(root, args.branch, os.environ.get("GITHUB_TOKEN"))
    except (OSError, ValueError, RecordError, git.GitError, pipeline.PipelineError) as exc:
        return _err("record", exc)
    for path in filed:
        print(f"recorded {path}")
    _append(args.github_output, f"commit={git.resolve(root, 'HEAD')}\n")
    return 0


def _cleanup(paths: list[str], root: Path) -> None:
    """Remove leftovers inside the workspace; say what was removed and what was not."""
    removed = pipeline.cleanup([Path(p) for p in paths], root)
    for path in removed:
        print(f"removed {path}")
    for path in paths:
        if str(Path(path)) not in removed:  # outside the workspace, or already gone: say so
            print(f"kept {path}: outside the workspace or not there", file=sys.stderr)


def cmd_cleanup(args: argparse.Namespace) -> int:
    _cleanup(args.paths, Path(args.root))
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from . import simulate

    return simulate.main(args)


# ----------------------------------------------------------------------------- parser

ROOT_HELP = "trusted checkout of the base branch (default: .)"
GATE_HELP = "the verdict `pr gate --out` wrote (gate.json)"
GITHUB_OUTPUT_HELP = "append job outputs here ($GITHUB_OUTPUT)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("pr", help="pull-request pipeline: gate, evaluate, comment")
    sub = parser.add_subparsers(dest="pr_command", required=True, metavar="STEP")

    p = sub.add_parser("gate", help="check what a pull request changes (reads git data only)")
    p.add_argument(
        "--root", default=".", help="trusted checkout of the base branch (default: %(default)s)"
    )
    p.add_argument("--base", required=True, help="base commit (or ref)")
    p.add_argument("--head", required=True, help="pull request head commit (or ref)")
    p.add_argument("--author", help="login of the pull request's author")
    p.add_argument(
        "--association",
        default="NONE",
        help="author_association from the event (default: %(default)s)",
    )
    p.add_argument("--pr", type=int, help="pull request number (with --from-github)")
    p.add_argument(
        "--from-github", action="store_true", help="read author and association from the API"
    )
    p.add_argument(
        "--recent", type=int, default=0, help="evaluations by the author in the last hour"
    )
    p.add_argument("--recent-from-github", action="store_true", help="count them with the API")
    p.add_argument("--exclude-run-id", type=int, help="the current run (not counted)")
    p.add_argument(
        "--max-per-hour",
        type=int,
        default=gate_mod.DEFAULT_MAX_PER_HOUR,
        help="evaluations one author may start per hour "
        f"(default: {gate_mod.DEFAULT_MAX_PER_HOUR})",
    )
    p.add_argument(
        "--max-bytes",
        type=int,
        default=gate_mod.DEFAULT_MAX_BYTES,
        help=f"largest submission file accepted, in bytes (default: {gate_mod.DEFAULT_MAX_BYTES})",
    )
    p.add_argument("--now", help="the time to judge deadlines at (ISO 8601; default: now)")
    p.add_argument(
        "--out", default="gate.json", help="write the gate's verdict here (default: gate.json)"
    )
    p.add_argument("--github-output", help=GITHUB_OUTPUT_HELP)
    p.add_argument("--strict", action="store_true", help="exit 2 when rejected")
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("evaluate", help="stage the gated submission and run the plugin on it")
    p.add_argument(
        "--root", default=".", help="trusted checkout, the harness (default: %(default)s)"
    )
    p.add_argument("--submission", required=True, help="path the gate accepted")
    p.add_argument("--sha256", required=True, help="its sha256 as the gate computed it")
    p.add_argument("--source", required=True, help="checkout of the pull request's head")
    p.add_argument("--source-cleanup", action="store_true", help="delete --source afterwards")
    p.add_argument(
        "--mode",
        default="leaderboard",
        choices=["leaderboard", "test"],
        help="leaderboard: tests, then timed benchmarks (default); test: correctness only",
    )
    p.add_argument(
        "--out", default="run.json", help="write the results document here (default: run.json)"
    )
    p.add_argument("--summary", help="append the device table here ($GITHUB_STEP_SUMMARY)")
    p.add_argument(
        "--allow-unsandboxed",
        action="store_true",
        help="judge even where the bubblewrap worker sandbox cannot run (default: refuse)",
    )
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("summary", help="markdown tables of results documents")
    p.add_argument("runs", nargs="+", help="results documents (RUN.json), one table each")
    p.set_defaults(func=cmd_summary)

    p = sub.add_parser("context", help="trusted pull request and commit of a workflow_run event")
    p.add_argument("--event", required=True, help="the event payload ($GITHUB_EVENT_PATH)")
    p.add_argument("--repository", required=True, help="owner/name ($GITHUB_REPOSITORY)")
    p.add_argument("--github-output", help=GITHUB_OUTPUT_HELP)
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("fetch", help="fetch a pull request's commit as data")
    p.add_argument("--root", default=".", help=ROOT_HELP)
    p.add_argument("--pr", type=int, required=True, help="pull request number")
    p.add_argument("--sha", required=True, help="the head commit to fetch (nothing is checked out)")
    p.set_defaults(func=cmd_fetch)

    p = sub.add_parser("verify", help="validate downloaded results documents against the gate")
    p.add_argument("--gate", required=True, help=GATE_HELP)
    p.add_argument("--runs", required=True, help="folder the run artifacts were downloaded to")
    p.add_argument(
        "--out", default="verified", help="folder for the verified runs (default: verified)"
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("comment", help="render (and post) the pull request comment and statuses")
    p.add_argument("--root", default=".", help=ROOT_HELP)
    p.add_argument("--gate", required=True, help=GATE_HELP)
    p.add_argument("--verified", help="output folder of `pr verify`")
    p.add_argument("--pr", type=int, help="pull request to comment on (with --post)")
    p.add_argument("--sha", help="commit to set the per-device statuses on (with --post)")
    p.add_argument("--run-url", help="link to the workflow run, shown in the comment")
    p.add_argument(
        "--post", action="store_true", help="post to GitHub (GITHUB_TOKEN, GITHUB_REPOSITORY)"
    )
    p.add_argument("--out", help="also write the body here")
    p.add_argument("--summary", help="append the body here ($GITHUB_STEP_SUMMARY)")
    p.add_argument("--github-output", help=GITHUB_OUTPUT_HELP)
    p.set_defaults(func=cmd_comment)

    p = sub.add_parser("record", help="file verified runs with `results add` and commit them")
    p.add_argument("--root", default=".", help=ROOT_HELP)
    p.add_argument("--verified", required=True, help="output folder of `pr verify`")
    p.add_argument("--pr", type=int, required=True, help="pull request number (provenance)")
    p.add_argument("--commit", required=True, help="the commit that was evaluated (provenance)")
    p.add_argument("--repository", help="owner/name of the repository (provenance)")
    p.add_argument("--url", help="link to the pull request (provenance)")
    p.add_argument("--push", action="store_true", help="push the results commit (GITHUB_TOKEN)")
    p.add_argument("--branch", default="main", help="branch to push to (default: main)")
    p.add_argument("--github-output", help=GITHUB_OUTPUT_HELP)
    p.set_defaults(func=cmd_record)

    p = sub.add_parser("cleanup", help="remove leftovers inside the workspace")
    p.add_argument(
        "--root",
        default=".",
        help="the workspace; nothing outside it is removed (default: %(default)s)",
    )
    p.add_argument("paths", nargs="+", help="files or folders to remove")
    p.set_defaults(func=cmd_cleanup)

    p = sub.add_parser("simulate", help="replay the whole flow locally in a temporary repository")
    p.add_argument(
        "--fixture", help="fixture repository to start from (default: tests/fixtures/pr)"
    )
    p.add_argument("--submission", help="file to submit (default: the fixture's correct one)")
    p.add_argument(
        "--leaderboard",
        default="tiny",
        help="leaderboard of the fixture to submit to (default: %(default)s)",
    )
    p.add_argument("--author", default="alice", help="pull request author (default: %(default)s)")
    p.add_argument("--folder-author", help="author folder (default: --author)")
    p.add_argument(
        "--association",
        default="CONTRIBUTOR",
        help="the author's author_association (default: CONTRIBUTOR; "
        f"{'/'.join(sorted(gate_mod.MAINTAINER_ASSOCIATIONS))} count as maintainers)",
    )
    p.add_argument("--also-touch", action="append", default=[], help="extra path the PR edits")
    p.add_argument("--now", help="time of the pull request (ISO 8601)")
    p.add_argument(
        "--mode",
        default="leaderboard",
        choices=["leaderboard", "test"],
        help="leaderboard: tests, then timed benchmarks (default); test: correctness only",
    )
    p.add_argument("--workdir", help="keep the temporary repository here")
    p.add_argument("--pr", type=int, default=1, help="pull request number (default: 1)")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    p.set_defaults(func=cmd_simulate)
