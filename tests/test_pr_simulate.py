"""`kernelboard pr simulate`: the whole flow, replayed locally in a temporary git repository.

Evaluation runs the real plugin (pytest in leaderboard mode) on the CPU; filing uses
`kernelboard results add`; the site is built with `kernelboard site build`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest

from pytest_kernelboard.pr import cli as pr_cli
from pytest_kernelboard.pr.simulate import DEFAULT_FIXTURE, PullRequest, simulate
from pytest_kernelboard.presentation import fmt_speedup, fmt_us

SUBMISSIONS = DEFAULT_FIXTURE / "submissions"
NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], check=True, capture_output=True, text=True
    ).stdout


def commits_on_main(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "main"))


def results_files(root: Path) -> list[str]:
    return sorted(git(root, "ls-files", "results").split())


def one(tmp_path, **kwargs):
    kwargs.setdefault("submission", SUBMISSIONS / "correct.py")
    root, (report,) = simulate([PullRequest(**kwargs)], workdir=tmp_path, now=NOW)
    return root, report


def test_accepted_submission_is_evaluated_commented_recorded_and_published(tmp_path):
    root, report = one(tmp_path)
    assert report.gate["accepted"], report.gate["problems"]
    assert report.evaluated == ["CPU"], report.problems
    assert report.verdict == "accepted", report.comment
    assert "✅ **Accepted.**" in report.comment
    assert "### CPU — ✅ passed" in report.comment
    assert "**Rank it would take:** 1 of 1" in report.comment
    assert report.recorded and all(p.startswith("results/") for p in report.recorded)
    assert report.results_commit == git(root, "rev-parse", "main").strip()
    assert commits_on_main(root) == 2
    tracked = results_files(root)
    assert any(p.endswith(".json") for p in tracked)
    record = json.loads(
        (root / next(p for p in tracked if p.endswith(".json") and "_code" not in p)).read_text()
    )
    assert record["provenance"]["pull_request"] == 1
    assert record["provenance"]["commit"] == report.head
    # the comment shows the medians that rank and their ratio, as the record has them
    (case,) = [c for c in record["evaluations"][0]["cases"] if c["kind"] == "benchmark"]
    median, reference = case["timing"]["rank_us"], case["reference_timing"]["rank_us"]
    row = next(line for line in report.comment.splitlines() if line.startswith("| benchmark"))
    assert f"| {fmt_us(median)} [" in row and f"| {fmt_us(reference)} [" in row
    assert fmt_speedup(reference / median) in row
    assert "Times are medians (the statistic that ranks) with their 95% intervals" in report.comment
    assert report.site_error is None and report.site and Path(report.site).is_dir()
    # the staged submission did not end up on main
    assert not (root / "submissions" / "tiny" / "alice").exists()
    assert "submissions/tiny/alice" not in git(root, "ls-files")


def test_wrong_submission_fails_and_nothing_is_committed(tmp_path):
    root, report = one(tmp_path, submission=SUBMISSIONS / "wrong.py")
    assert report.evaluated == ["CPU"], report.problems
    assert report.verdict == "failed", report.comment
    assert "❌ **Not accepted.**" in report.comment
    assert "**Failures**" in report.comment
    assert "~~~text" in report.comment  # the reason, fenced
    assert report.recorded == [] and report.results_commit is None
    assert commits_on_main(root) == 1
    assert results_files(root) == []


def test_workflow_edit_is_rejected_before_any_evaluation(tmp_path):
    root, report = one(tmp_path, also_touch=[".github/workflows/ci.yml"])
    assert not report.gate["accepted"]
    assert [p["code"] for p in report.gate["problems"]] == ["outside_submissions"]
    assert report.evaluated == []
    assert "🚫 **Not evaluated.**" in report.comment
    assert ".github/workflows/ci.yml" in report.comment
    assert commits_on_main(root) == 1


def test_author_mismatch_is_rejected(tmp_path):
    root, report = one(tmp_path, author="alice", folder_author="bob")
    assert [p["code"] for p in report.gate["problems"]] == ["author"]
    assert report.evaluated == [] and report.verdict == "rejected"
    assert "opened by `alice`" in report.comment
    assert commits_on_main(root) == 1


def test_submission_after_the_deadline_is_rejected(tmp_path):
    root, report = one(tmp_path, leaderboard="closed")
    assert [p["code"] for p in report.gate["problems"]] == ["deadline"]
    assert report.evaluated == [] and "closed on 2001-01-01T12:00:00Z" in report.comment
    assert commits_on_main(root) == 1


@pytest.mark.runs_long
def test_two_pull_requests_published_one_after_the_other_keep_both_runs(tmp_path):
    pulls = [
        PullRequest(submission=SUBMISSIONS / "correct.py", author="alice", number=1),
        PullRequest(submission=SUBMISSIONS / "correct.py", author="bob", number=2),
    ]
    root, reports = simulate(pulls, workdir=tmp_path, now=NOW)
    assert [r.verdict for r in reports] == ["accepted", "accepted"], [r.problems for r in reports]
    assert commits_on_main(root) == 3
    records = [p for p in results_files(root) if p.endswith(".json") and "/_code/" not in p]
    # The first run timed the reference and filed it as a reference run; the second reused it.
    assert len(records) == 3
    runs = {p: json.loads((root / p).read_text()) for p in records}
    authors = sorted(run["evaluations"][0]["submission"]["author"] for run in runs.values())
    assert authors == ["alice", "bob", "reference"]
    (reference,) = [
        p for p, run in runs.items() if run["evaluations"][0]["submission"]["is_reference"]
    ]
    (bob,) = [
        run for run in runs.values() if run["evaluations"][0]["submission"]["author"] == "bob"
    ]
    timed = [c for c in bob["evaluations"][0]["cases"] if c.get("reference_timing")]
    assert timed and all(c["reference_run"]["source"] == "store" for c in timed)
    assert all(c["reference_run"]["file"] == reference for c in timed)
    assert "of 2" in reports[1].comment  # ranked against the first pull request's run


def test_rate_limit_across_pull_requests(tmp_path):
    pulls = [
        PullRequest(
            submission=SUBMISSIONS / "correct.py", author="alice", folder_author="bob", number=n
        )
        for n in range(1, 6)
    ]
    _, reports = simulate(pulls, workdir=tmp_path, now=NOW)
    assert [p["code"] for p in reports[4].gate["problems"]] == ["author", "rate_limit"]


def test_command_line(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    pr_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "pr",
            "simulate",
            "--also-touch",
            ".github/workflows/ci.yml",
            "--workdir",
            str(tmp_path),
            "--json",
        ]
    )
    assert args.func(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "rejected" and report["evaluated"] == []


@pytest.mark.parametrize("name", ["correct.py", "wrong.py"])
def test_fixture_submissions_exist(name):
    assert (SUBMISSIONS / name).is_file()
