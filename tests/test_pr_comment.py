"""Comment rendering, commit statuses, verification of run documents, the trusted context."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pytest_kernelboard.pr import comment, pipeline
from pytest_kernelboard.pr.gate import GateResult, Problem
from pytest_kernelboard.results.records import validate_run
from pytest_kernelboard.spec.task import load_task

FIXTURE = Path(__file__).parent / "fixtures" / "pr"
SHA256 = "c" * 64
HEAD = "d" * 40
TASK = load_task(FIXTURE / "repo" / "leaderboards" / "tiny" / "task.yml")


def timing(mean, lo, hi):
    return {
        "clock": "host",
        "n": 10,
        "mean_us": mean,
        "median_us": mean,
        "std_us": 0.1,
        "min_us": lo,
        "max_us": hi,
        "ci95_us": [lo, hi],
    }


def make_run(author="alice", score=10.0, status="passed", device="CPU", run_id="1", message=""):
    case_status = "passed" if status == "passed" else "failed"
    cases = [
        {
            "kind": "test",
            "index": 0,
            "id": "size=8",
            "spec": {"size": 8},
            "seed": 1,
            "status": case_status,
            "message": message,
            "duration_s": 0.1,
        },
        {
            "kind": "benchmark",
            "index": 0,
            "id": "size=64",
            "spec": {"size": 64},
            "seed": 3,
            "status": "passed",
            "message": "",
            "duration_s": 0.2,
            "timing": timing(score, score * 0.9, score * 1.1),
            "reference_timing": timing(2 * score, 1.8 * score, 2.2 * score),
            "speedup": 2.0,
        },
    ]
    run = {
        "schema": "kernelboard.run/1",
        "run_id": run_id.rjust(32, "0"),
        "created_at": "2030-01-01T00:00:00Z",
        "mode": "leaderboard",
        "environment": {"device": device, "device_kind": "cpu", "python": "3.11"},
        "evaluations": [
            {
                "leaderboard": {"name": "tiny", "ranking_by": "last", "lang": "py"},
                "submission": {
                    "path": "submissions/tiny/alice/submission.py",
                    "author": author,
                    "sha256": SHA256,
                },
                "cases": cases,
                "summary": {
                    "status": status,
                    "tests_passed": 1 if status == "passed" else 0,
                    "tests_total": 1,
                    "benchmarks_passed": 1,
                    "benchmarks_total": 1,
                    "score_us": score if status == "passed" else None,
                    "score_ci95_us": [score * 0.9, score * 1.1] if status == "passed" else None,
                    "speedup": 2.0,
                },
            }
        ],
    }
    validate_run(run)
    return run


def make_gate(accepted=True, problems=(), devices=("CPU",)):
    return GateResult(
        accepted=accepted,
        problems=list(problems),
        base="b" * 40,
        head=HEAD,
        pr_author="alice",
        maintainer=False,
        checked_at="2030-01-01T00:00:00Z",
        leaderboard="tiny",
        author="alice",
        submission="submissions/tiny/alice/submission.py",
        sha256=SHA256,
        lang="py",
        devices=list(devices),
    )


def test_accepted_comment_has_table_score_rank_and_gap():
    records = [
        ("r1", make_run("bob", 5.0, run_id="2")),
        ("r2", make_run("carol", 20.0, run_id="3")),
    ]
    outcome = comment.DeviceOutcome("CPU", make_run("alice", 10.0))
    body = comment.render_comment(make_gate(), [outcome], tasks={"tiny": TASK}, records=records)
    assert body.startswith(comment.MARKER)
    assert "Accepted" in body
    assert "### CPU — ✅ passed (1/1 tests, 1/1 benchmarks)" in body
    assert "| test size=8 | ✅ passed |" in body
    assert "10 µs [9 µs, 11 µs]" in body  # time with its interval
    assert "| 20 µs [18 µs, 22 µs] | 2.00× |" in body  # reference and speedup
    assert "**Score** (last of the benchmark cases): 10 µs [9 µs, 11 µs]" in body
    assert "**Rank it would take:** 2 of 3" in body
    assert "gap to first: +5 µs (+100.0%)" in body


def test_first_place():
    body = comment.render_comment(
        make_gate(),
        [comment.DeviceOutcome("CPU", make_run(score=1.0))],
        tasks={"tiny": TASK},
        records=[],
    )
    assert "**Rank it would take:** 1 of 1 · first place" in body


def test_failure_shows_reason_and_first_mismatches():
    run = make_run(status="failed", message="3 mismatches; first: [0] 0.0 != 1.5\nline 2")
    body = comment.render_comment(
        make_gate(), [comment.DeviceOutcome("CPU", run)], tasks={"tiny": TASK}, records=[]
    )
    assert "Not accepted" in body
    assert "**Failures** (1):" in body
    assert "~~~text\n3 mismatches; first: [0] 0.0 != 1.5\nline 2\n~~~" in body
    assert "not ranked" in body
    assert comment.verdict(make_gate(), [comment.DeviceOutcome("CPU", run)]) == "failed"


def test_untrusted_strings_are_inert():
    run = make_run(
        status="failed", message="~~~\n@everyone <img src=x> [a](http://evil)\n" + "x\n" * 50
    )
    run["evaluations"][0]["cases"][0]["id"] = "@maintainer | <script>` [link](http://e)"
    body = comment.render_comment(make_gate(), [comment.DeviceOutcome("CPU", run)])
    table_line = next(line for line in body.splitlines() if "script" in line)
    assert "@" not in table_line and "<script>" not in table_line and "](http" not in table_line
    assert table_line.count("|") == 7  # the id did not add a column
    block = body.split("~~~text\n", 1)[1].split("\n~~~", 1)[0]
    assert "~~~" not in block  # the fence cannot be closed from inside
    assert "more lines" in block


def test_gate_rejection_lists_problems_without_device_sections():
    gate = make_gate(accepted=False, problems=[Problem("author", "filed under `bob`")])
    body = comment.render_comment(gate, [])
    assert "Not evaluated" in body and "- filed under `bob`" in body
    assert "###" not in body


def test_missing_device_is_incomplete():
    gate = make_gate(devices=("CPU", "H100"))
    outcomes = [
        comment.DeviceOutcome("CPU", make_run()),
        comment.DeviceOutcome("H100", None, "no results document"),
    ]
    assert comment.verdict(gate, outcomes) == "incomplete"
    body = comment.render_comment(gate, outcomes)
    assert "### H100 — ⚠️ no result" in body


def test_commit_status():
    assert comment.commit_status(comment.DeviceOutcome("CPU", make_run())) == (
        "success",
        "passed: 1/1 tests, score 10 µs",
    )
    assert (
        comment.commit_status(comment.DeviceOutcome("CPU", make_run(status="failed")))[0]
        == "failure"
    )
    assert comment.commit_status(comment.DeviceOutcome("CPU", None, "gone"))[0] == "error"
    rejected = make_gate(accepted=False)
    assert comment.commit_status(comment.DeviceOutcome("CPU", None), rejected) == (
        "failure",
        "rejected at the gate",
    )


def test_summary_has_the_same_table():
    text = comment.render_summary([comment.DeviceOutcome("CPU", make_run())])
    assert comment.MARKER not in text and "| test size=8 | ✅ passed |" in text


# ------------------------------------------------------------------ verification


def write(tmp_path, run, label="cpu"):
    path = tmp_path / f"kb-run-{label}" / "run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(run))
    return tmp_path


def test_verify_accepts_a_matching_run(tmp_path):
    outcomes = pipeline.verify_all(make_gate(), write(tmp_path, make_run()))
    assert [o.problem for o in outcomes] == [None] and outcomes[0].passed


@pytest.mark.parametrize(
    "tamper, expected",
    [
        (lambda r: r["evaluations"][0]["submission"].update(author="mallory"), "author"),
        (lambda r: r["evaluations"][0]["submission"].update(sha256="e" * 64), "sha256"),
        (lambda r: r["evaluations"][0]["leaderboard"].update(name="other"), "leaderboard"),
        (lambda r: r.update(mode="test"), "mode"),
        (lambda r: r["environment"].update(device="H100"), "device"),
        (lambda r: r["evaluations"].append(copy.deepcopy(r["evaluations"][0])), "one evaluation"),
        (lambda r: r.pop("run_id"), "invalid results document"),
    ],
)
def test_verify_rejects_tampered_runs(tmp_path, tamper, expected):
    run = make_run()
    tamper(run)
    outcome = pipeline.verify_all(make_gate(), write(tmp_path, run))[0]
    assert outcome.run is None and expected in outcome.problem


def test_verify_drops_claimed_provenance(tmp_path):
    run = make_run()
    run["provenance"] = {"pull_request": 999}
    outcome = pipeline.verify_all(make_gate(), write(tmp_path, run))[0]
    assert "provenance" not in outcome.run


def test_verify_reports_missing_device(tmp_path):
    outcome = pipeline.verify_all(make_gate(), tmp_path)[0]
    assert outcome.run is None and "no results document" in outcome.problem


# ------------------------------------------------------------------ trusted context


def event(**run):
    base = {
        "id": 42,
        "event": "pull_request_target",
        "path": ".github/workflows/evaluate.yml",
        "display_title": f"kernelboard #7 @ {HEAD}",
        "head_sha": "b" * 40,
        "repository": {"full_name": "octo/board"},
        "head_repository": {"full_name": "octo/board"},
        "html_url": "https://example.invalid/runs/42",
        "run_started_at": "2030-01-01T00:00:00Z",
        "conclusion": "success",
    }
    base.update(run)
    return {"workflow_run": base}


def test_context_from_event():
    ctx = pipeline.context_from_event(event(), "octo/board")
    assert (ctx.pr, ctx.head_sha, ctx.base_sha, ctx.run_id) == (7, HEAD, "b" * 40, 42)


@pytest.mark.parametrize(
    "change",
    [
        {"event": "pull_request"},  # a fork's own workflow named "evaluate"
        {"path": ".github/workflows/other.yml"},
        {"head_repository": {"full_name": "mallory/board"}},
        {"repository": {"full_name": "mallory/board"}},
        {"display_title": "kernelboard #7 @ abc; rm -rf /"},
        {"display_title": f"kernelboard #7 @ {HEAD}\nextra=1"},
    ],
)
def test_context_refuses_untrusted_runs(change):
    with pytest.raises(pipeline.PipelineError):
        pipeline.context_from_event(event(**change), "octo/board")


def test_stage_checks_bytes_and_path(tmp_path):
    source, root = tmp_path / "pr", tmp_path / "root"
    rel = "submissions/tiny/alice/submission.py"
    (source / rel).parent.mkdir(parents=True)
    (source / rel).write_text("x = 1\n")
    import hashlib

    digest = hashlib.sha256(b"x = 1\n").hexdigest()
    assert pipeline.stage(root, rel, digest, source).read_text() == "x = 1\n"
    with pytest.raises(pipeline.PipelineError, match="differs"):
        pipeline.stage(root, rel, "0" * 64, source)
    with pytest.raises(pipeline.PipelineError, match="not a submission path"):
        pipeline.stage(root, "submissions/../../etc/passwd", digest, source)


# -- what the numbers are: the statistic that ranks, its interval, ties -----------------------


def ranked(median: float, lo: float, hi: float, mean: float) -> dict:
    """A timing as the harness writes it now: the mean beside the median that ranks."""
    return {
        **timing(mean, 0.9 * mean, 1.1 * mean),
        "median_us": median,
        "statistic": "median",
        "rank_us": median,
        "rank_ci95_us": [lo, hi],
    }


def run_with_benchmark(sub: dict, ref: dict, **summary) -> dict:
    run = make_run()
    case = run["evaluations"][0]["cases"][1]
    case["timing"], case["reference_timing"] = sub, ref
    case["speedup"] = ref["rank_us"] / sub["rank_us"]
    run["evaluations"][0]["summary"].update(summary)
    validate_run(run)
    return run


def benchmark_row(body: str) -> str:
    (row,) = [line for line in body.splitlines() if line.startswith("| benchmark")]
    return row


def test_speedup_and_times_come_from_the_median_that_ranks():
    """468.7 µs against a 440.6 µs reference is 0.94×, not '1.00×'."""
    sub = ranked(468.7, 466.0, 471.0, mean=480.0)
    ref = ranked(440.6, 438.0, 443.0, mean=452.0)
    run = run_with_benchmark(sub, ref, score_us=468.7, score_ci95_us=[466.0, 471.0])
    body = comment.render_comment(make_gate(), [comment.DeviceOutcome("CPU", run)])
    row = benchmark_row(body)
    assert "| 468.7 µs [466 µs, 471 µs] | 440.6 µs [438 µs, 443 µs] | 0.94× |" in row
    assert "480" not in row and "452" not in row  # the means do not rank
    assert "Times are medians (the statistic that ranks) with their 95% intervals" in body
    assert "means" not in body


def test_a_case_within_noise_of_the_reference_reads_as_a_tie():
    # different means, medians 0.5% apart with overlapping intervals: no order to claim
    sub = ranked(442.8, 440.0, 446.0, mean=468.7)
    ref = ranked(440.6, 437.0, 444.0, mean=440.6)
    run = run_with_benchmark(sub, ref, tied_with_reference=True, speedup=440.6 / 442.8)
    body = comment.render_comment(make_gate(), [comment.DeviceOutcome("CPU", run)])
    assert "| 1.00× (tie) |" in benchmark_row(body)
    assert "**speedup over the reference:** 1.00× (tie)" in body
    assert "(tie) = the two intervals overlap or differ by less than 2%" in body


def test_records_older_than_the_median_say_they_show_means():
    body = comment.render_comment(make_gate(), [comment.DeviceOutcome("CPU", make_run())])
    assert "Times are means (the statistic that ranks)" in body


def test_reference_score_is_shown_beside_the_score():
    run = make_run(score=10.0)
    run["evaluations"][0]["summary"]["reference_score_us"] = 20.0
    body = comment.render_comment(make_gate(), [comment.DeviceOutcome("CPU", run)])
    assert (
        "10 µs [9 µs, 11 µs] · **reference:** 20 µs · **speedup over the reference:** 2.00×" in body
    )
