"""How times, intervals and speedups read in the terminal (and on the site and PR comment):
plain units, no 'inf%', no interval made of one call, no bare '0.79× ... (tied)'."""

from __future__ import annotations

import math

import pytest

from pytest_kernelboard.plugin import unrun_lines
from pytest_kernelboard.presentation import (
    case_speedup,
    fmt_against_reference,
    fmt_progress,
    fmt_ranked_time,
    fmt_timed_case,
    ranked_time,
)


def timing(samples_us: list[float], stop_reason: str = "converged") -> dict:
    """A stored timing as the judge writes it (stats.Summary.to_dict's keys that matter here)."""
    ordered = sorted(samples_us)
    median = ordered[len(ordered) // 2]
    return {
        "clock": "host",
        "n": len(samples_us),
        "mean_us": sum(samples_us) / len(samples_us),
        "median_us": median,
        "ci95_us": [ordered[0], ordered[-1]],
        "statistic": "median",
        "rank_us": median,
        "rank_ci95_us": [ordered[0], ordered[-1]],
        "stop_reason": stop_reason,
    }


def test_progress_reads_in_units_and_never_inf():
    assert fmt_progress(1, 61905.07, math.inf) == "1 call, median 61.91 ms (no interval yet)"
    assert fmt_progress(4, 56162.77, 0.2613) == "4 calls, median 56.16 ms ± 26.1%"
    assert fmt_progress(3, 0.0, math.inf) == "3 calls, median 0 µs (no interval yet)"
    for n in (0, 1, 2, 50):
        for halfwidth in (0.0, 0.004, 1.5, math.inf, math.nan):
            line = fmt_progress(n, 12.5, halfwidth)
            assert "inf" not in line and "nan" not in line and "+/-" not in line, line


def test_one_call_has_no_interval_and_says_why():
    once = timing([1_159_000.0], stop_reason="time_budget")
    assert fmt_timed_case(once, budget_s=10.0, stop_reason="time_budget") == (
        "median 1.159 s (1 call in the 10 s budget: no interval)"
    )
    assert fmt_timed_case(once) == "median 1.159 s (1 call: no interval)"
    assert ranked_time(once) == (1_159_000.0, None)
    assert fmt_ranked_time(once) == "1.159 s (1 call: no interval)"
    several = timing([53_120.0, 59_980.0, 98_250.0])
    assert fmt_timed_case(several, budget_s=10.0, stop_reason="time_budget") == (
        "median 59.98 ms (95% interval 53.12 ms – 98.25 ms)"
    )
    assert fmt_ranked_time(several) == "59.98 ms [53.12 ms, 98.25 ms]"


def test_a_case_timed_once_calls_no_tie():
    case = {
        "timing": timing([1_285_000.0], "time_budget"),
        "reference_timing": timing([1_032_000.0, 1_040_000.0, 1_050_000.0]),
    }
    value, tie = case_speedup(case)
    assert value == pytest.approx(1_040_000.0 / 1_285_000.0)
    assert tie is None  # one call says nothing about the noise


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((1.38, (1.21, 1.52), False), "1.38× the reference (interval 1.21× – 1.52×)"),
        (
            (0.79, (0.55, 1.13), True),
            "0.79× the reference: a tie, within noise (the interval 0.55× – 1.13× holds 1×)",
        ),
        ((0.99, None, True), "0.99× the reference: a tie, within noise"),
        (
            (0.80, (0.80, 0.80), False, True),
            "0.80× the reference (a case was timed once: no interval)",
        ),
        (
            (0.80, (0.78, 1.02), True, True),
            "0.80× the reference: a tie, within noise (a case was timed once: no interval)",
        ),
        ((None, None, None), "— the reference"),
    ],
)
def test_speedup_against_the_reference_in_words(args, expected):
    assert fmt_against_reference(*args) == expected
    assert "(tied)" not in expected


def test_unrun_cases_get_one_line_per_reason():
    earlier = "not run: an earlier case, a.py::lb::test[size=1], timed out"
    cases = [
        {"kind": "test", "id": "size=1", "status": "failed", "message": "timeout: ..."},
        *(
            {"kind": "test", "id": f"size={n}", "status": "not_run", "message": earlier}
            for n in (2, 3, 4, 5)
        ),
        {"kind": "benchmark", "id": "size=9", "status": "skipped", "message": "needs CUDA\nmore"},
    ]
    assert unrun_lines(cases) == [
        "not run: test[size=2], test[size=3] and 2 more: an earlier case, a.py::lb::test[size=1], "
        "timed out",
        "skipped: benchmark[size=9]: needs CUDA",
    ]
