"""fast_p and "faster" ignore noise: a candidate or a case counts as faster than p x only when
its speedup interval (the one that decides `tied`) lies above p. KernelBench's raw fast_p stays
available under its own name, with its old numbers."""

from __future__ import annotations

import io
import random
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_kernelboard.batch.cli import BatchProgress, summary_line
from pytest_kernelboard.batch.records import (
    batch_fast_p,
    batch_fast_p_raw,
    candidate_record,
    faster,
    record_schema,
)
from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.pr.comment import fast_p_lines
from pytest_kernelboard.results.result_model import Summary
from pytest_kernelboard.results.summary import case_fast_p, evaluation_summary
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case
from pytest_kernelboard.stats.scoring import (
    TIE_TOLERANCE,
    fast_p,
    fast_p_raw,
    faster_than,
    speedup_interval,
    tied,
)

TASK = SimpleNamespace(ranking_by="geom")


def timing(median: float, half: float) -> dict[str, Any]:
    """A stored timing whose median ranks, with its 95% interval."""
    return {
        "clock": "host",
        "n": 50,
        "mean_us": median,
        "median_us": median,
        "std_us": half,
        "min_us": median - half,
        "max_us": median + half,
        "ci95_us": [median - half, median + half],
        "statistic": "median",
        "rank_us": median,
        "rank_ci95_us": [median - half, median + half],
    }


# Four copies of the reference on a small CPU board: each read 1.8x - 4.1x faster than the
# reference, and each is tied with it (its interval and the reference's overlap widely).
REFERENCE_US, REFERENCE_HALF = 100.0, 60.0
COPIES_US = (55.0, 40.0, 30.0, 24.4)  # raw speedups 1.82, 2.5, 3.33, 4.1
COPY_HALF = 30.0


def copy_cases(score_us: float) -> list[dict[str, Any]]:
    """One copy's case records as stored: a test case and one timed benchmark case."""
    return [
        {"kind": TEST, "index": 0, "id": "t", "spec": {}, "status": "passed", "message": ""},
        {
            "kind": BENCHMARK,
            "index": 0,
            "id": "b",
            "spec": {"size": 8},
            "status": "passed",
            "message": "",
            "timing": timing(score_us, COPY_HALF),
            "reference_timing": timing(REFERENCE_US, REFERENCE_HALF),
            "speedup": REFERENCE_US / score_us,
        },
    ]


def copy_record(index: int, score_us: float) -> dict[str, Any]:
    """A candidate's record, as `kernelboard judge --mode benchmark` writes it."""
    cases = copy_cases(score_us)
    summary = evaluation_summary(cases, TASK, "benchmark").to_json()
    outcomes = [
        (
            Case(c["kind"], c["index"], c["spec"]),
            CaseOutcome(
                status=c["status"],
                timing=c.get("timing"),
                reference_timing=c.get("reference_timing"),
                speedup=c.get("speedup"),
            ),
        )
        for c in cases
    ]
    return candidate_record(f"copy{index}", "board", "benchmark", outcomes, summary, 1.0).to_json()


@pytest.fixture(scope="module")
def copies() -> list[dict[str, Any]]:
    return [copy_record(i, us) for i, us in enumerate(COPIES_US)]


def test_four_tied_copies_with_raw_speedups_above_one_count_none_as_faster(copies):
    assert all(r["correct"] and r["tied"] for r in copies)
    assert min(r["speedup"] for r in copies) > 1.8 and max(r["speedup"] for r in copies) > 4
    # the noise-aware rule: none of them is faster than 1x (nor than any p >= 1)
    assert batch_fast_p(copies) == {"0": 1.0, "1": 0.0, "1.5": 0.0, "2": 0.0}
    assert [faster(r, 1.0) for r in copies] == [False] * 4
    assert all(r["fast_p"] == {"0": True, "1": False, "1.5": False, "2": False} for r in copies)
    for r in copies:
        lo, hi = r["speedup_ci95"]
        assert lo <= 1 <= hi  # tied is exactly "the interval holds 1"
    # KernelBench's raw definition still reports its old number: every copy "faster" than 1.5x
    assert batch_fast_p_raw(copies) == {"0": 1.0, "1": 1.0, "1.5": 1.0, "2": 0.75}
    assert all(r["fast_p_raw"]["1.5"] for r in copies)


def test_the_judges_progress_and_summary_count_no_tie_as_faster(copies):
    stream = io.StringIO()
    progress = BatchProgress(len(copies), stream)
    for record in copies:
        progress.record(record)
    assert progress.faster == 0
    assert (
        stream.getvalue().splitlines()[-1].startswith("[4/4] copy3: passed; 4 correct, 0 faster;")
    )
    line = summary_line(copies)
    assert line.startswith(
        "4 candidates judged; fast_0 1.00, fast_1 0.00, fast_1.5 0.00, fast_2 0.00"
    )
    assert "raw fast_p (KernelBench's definition): fast_0 1.00, fast_1 1.00, fast_1.5 1.00" in line


def test_a_summary_counts_cases_faster_only_beyond_noise():
    # Three shapes at 1.00 - 1.04x within noise and one clearly slower: the entry reads 0.97x,
    # KernelBench's fast_1 says 75%, the noise-aware one 0%.
    def case(index: int, ours: float, half: float) -> dict[str, Any]:
        return {
            "kind": BENCHMARK,
            "index": index,
            "status": "passed",
            "timing": timing(ours, half),
            "reference_timing": timing(100.0, 1.0),
            "speedup": 100.0 / ours,
        }

    cases = [case(0, 99.0, 2.0), case(1, 97.0, 3.0), case(2, 98.0, 3.0), case(3, 120.0, 1.0)]
    noise_aware, raw = case_fast_p(cases)
    assert raw["1"] == 0.75 and noise_aware["1"] == 0.0
    summary = evaluation_summary(cases, TASK, "benchmark")
    assert summary.fast_p == noise_aware and summary.fast_p_raw == raw
    assert summary.speedup < 1 and summary.tied_with_reference is False
    lo, hi = summary.speedup_ci95
    assert lo < summary.speedup < hi < 1  # slower beyond noise


def test_a_case_clearly_faster_counts_for_the_ps_its_interval_clears():
    cases = [
        {
            "kind": BENCHMARK,
            "index": 0,
            "status": "passed",
            "timing": timing(40.0, 0.4),
            "reference_timing": timing(100.0, 1.0),
            "speedup": 2.5,
        }
    ]
    noise_aware, raw = case_fast_p(cases)
    # interval [99 / 40.4, ...] = [2.45, ...]: above 2, as the raw 2.5 is
    assert noise_aware == raw == {"0": 1.0, "0.5": 1.0, "1": 1.0, "1.5": 1.0, "2": 1.0}
    # a wrong case never counts, however fast
    wrong = [dict(cases[0], status="failed")]
    assert case_fast_p(wrong)[0]["2"] == 0.0


def test_the_speedup_interval_holds_one_exactly_when_tied():
    rng = random.Random(36)
    for _ in range(5000):
        score = rng.uniform(1, 200)
        reference = score * rng.choice([rng.uniform(0.5, 2.0), rng.uniform(0.97, 1.03)])
        half, ref_half = score * rng.uniform(0, 0.1), reference * rng.uniform(0, 0.1)
        interval = (score - half * rng.random(), score + half * rng.random())
        ref_interval = (reference - ref_half * rng.random(), reference + ref_half * rng.random())
        lo, hi = speedup_interval(score, interval, reference, ref_interval)
        assert lo <= reference / score <= hi
        assert (lo <= 1 <= hi) == tied(score, interval, reference, ref_interval)
        assert faster_than((lo, hi), 1.0) == (
            not tied(score, interval, reference, ref_interval) and reference > score
        )


def test_without_intervals_only_the_run_to_run_tolerance_applies():
    lo, hi = speedup_interval(100.0, None, 101.0, None)
    assert lo == pytest.approx(1.01 * (1 - TIE_TOLERANCE)) and lo < 1  # 1% faster: a tie
    assert speedup_interval(50.0, (0.0, 100.0), 100.0, (90.0, 110.0))[1] == float("inf")


def test_fast_p_and_raw_fast_p_side_by_side():
    correct = [True, True, True, False]
    speedups = [1.2, 2.5, 0.8, 3.0]
    intervals = [(0.9, 1.5), (2.2, 2.8), (0.7, 0.9), (2.9, 3.1)]
    assert fast_p_raw(correct, speedups, (0, 1, 2)) == {
        "fast_0": 0.75,
        "fast_1": 0.5,
        "fast_2": 0.25,
    }
    assert fast_p(correct, intervals, (0, 1, 2)) == {"fast_0": 0.75, "fast_1": 0.25, "fast_2": 0.25}
    with pytest.raises(ValueError):
        fast_p([True], [])


def test_old_records_stay_readable_and_are_read_by_the_same_rule():
    # A record written before speedup_ci95 and fast_p_raw: its speedup, the run-to-run
    # tolerance around it, and its tie decide.
    old_tied = {"mode": "benchmark", "correct": True, "speedup": 1.3, "tied": True}
    old_clear = {"mode": "benchmark", "correct": True, "speedup": 1.3, "tied": False}
    old_close = {"mode": "benchmark", "correct": True, "speedup": 1.01, "tied": False}
    assert not faster(old_tied) and faster(old_clear) and not faster(old_close)
    assert batch_fast_p([old_tied, old_clear]) == {"0": 1.0, "1": 0.5, "1.5": 0.0, "2": 0.0}
    # new keys are optional in both schemas: an old record still validates
    schema = record_schema()
    assert "speedup_ci95" not in schema["required"] and "fast_p_raw" not in schema["required"]
    old_summary = {"status": "passed", "tests_passed": 1, "tests_total": 1, "fast_p": {"1": 0.5}}
    summary = Summary.from_json(old_summary)
    assert summary.to_json() == old_summary


def test_the_pr_comment_shows_fast_p_beyond_noise_beside_the_raw_one():
    evaluation = {"cases": copy_cases(COPIES_US[0])}
    (line, _) = fast_p_lines(evaluation)
    assert "faster than p× the reference beyond noise): fast_0.5 0% · fast_1 0% ·" in line
    assert (
        "raw fast_p (KernelBench's definition, noise counted as wins): fast_0.5 100% · fast_1 100%"
        in line
    )
    assert fast_p_lines({"cases": [copy_cases(10.0)[0]]}) == []  # nothing timed


def test_the_judge_says_when_its_first_record_came_and_its_pace_after_it(copies):
    """A batch's rate from its start hides how fast it judges once started (what a server's
    warm judges keep): the judge says both. Records at 7.7, 8.1, 8.5 and 9.1 s after the start:
    the three after the first in 1.4 s."""
    times = iter([0.0, 7.7, 8.1, 8.5, 9.1])
    progress = BatchProgress(len(copies), io.StringIO(), clock=lambda: next(times))
    assert progress.pace_line() is None
    for record in copies:
        progress.record(record)
    assert progress.pace_line() == (
        "4 records in 9.1 s: the first after 7.7 s, the 3 after it at 7714 an hour"
    )
    together = BatchProgress(2, io.StringIO(), clock=iter([0.0, 3.0, 3.0]).__next__)
    for record in copies[:2]:
        together.record(record)
    assert (
        together.pace_line() == "2 records in 3.0 s: the first after 3.0 s, the 1 after it at once"
    )
