"""The spread of a case's time between worker processes, and the intervals that hold it."""

from __future__ import annotations

import math
import statistics

import pytest

from pytest_kernelboard.batch.records import case_feedback
from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.stats.between_workers import one_worker, spread, widened
from pytest_kernelboard.stats.scoring import tied
from pytest_kernelboard.stats.stats import student_t_critical


def timing(rank: float, low: float, high: float, **extra) -> dict:
    return {"clock": "cuda_event", "n": 50, "rank_us": rank, "rank_ci95_us": [low, high], **extra}


def test_the_spread_is_the_sd_of_log_times_and_needs_two_positive_times():
    times = [130.0, 162.0, 147.0, 206.0, 188.0]
    assert spread(times) == pytest.approx(statistics.stdev(math.log(t) for t in times))
    assert spread([100.0, 100.0]) == 0.0
    assert spread([100.0]) is None  # one worker says nothing about the next
    assert spread([100.0, 0.0]) is None  # below the clock's grain: no log


def test_widening_adds_the_between_worker_term_in_quadrature_on_log_times():
    within = timing(100.0, 97.0, 104.0)
    out = widened(within, 0.10, workers=5)
    between = student_t_critical(4) * 0.10  # 0.278 in log units
    assert out["rank_ci95_us"] == pytest.approx(
        [
            100 * math.exp(-math.hypot(math.log(100 / 97), between)),
            100 * math.exp(math.hypot(math.log(104 / 100), between)),
        ]
    )
    assert out["rank_ci95_within_us"] == [97.0, 104.0]  # the samples' own interval is kept
    assert out["between_workers_rsd"] == 0.10
    assert within["rank_ci95_us"] == [97.0, 104.0]  # the measured record is left alone
    # The median of five workers moves less than one worker's time.
    of_five = widened(within, 0.10, workers=5, median_of=5)
    assert math.log(of_five["rank_ci95_us"][1] / 100) == pytest.approx(
        math.hypot(math.log(1.04), between * math.sqrt(math.pi / 2) / math.sqrt(5))
    )
    # However wide the spread, the interval stays above zero: it was measured on log times.
    assert 0 < widened(timing(1.0, 0.5, 1.5), 5.0, workers=5)["rank_ci95_us"][0] < 0.01


def test_a_much_slower_submission_is_not_tied_by_a_noisy_reference():
    """On a loaded 2-core CPU machine a 1.7 ms reference's five workers spread by up to about
    30%; a submission that spends 20 ms a call must stay slower. On log times it does up to a
    spread of about 65%, where a linear widening took its interval to zero from about 31%."""
    reference = {"rank_us": 1_700.0, "between_workers_rsd": 0.5, "rank_us_by_worker": [1_700.0] * 5}
    reference_interval = widened(timing(1_700.0, 1_650.0, 1_750.0), 0.5, workers=5, median_of=5)[
        "rank_ci95_us"
    ]
    slow = one_worker(timing(20_000.0, 19_900.0, 20_100.0), reference)
    assert slow["rank_ci95_us"][0] > 4_000
    assert not tied(20_000.0, slow["rank_ci95_us"], 1_700.0, reference_interval)


def test_identical_code_in_two_workers_ties_once_the_spread_is_known():
    """Observed in one H200 batch: the same host-bound code read 130 and 206 µs in two workers,
    each interval about ±5%. Alone the intervals order them; with the spread five reference
    workers measured (about 12%), they tie, as the same code must."""
    fast, slow = timing(130.0, 125.8, 137.9), timing(206.0, 203.7, 214.0)
    assert not tied(130.0, fast["rank_ci95_us"], 206.0, slow["rank_ci95_us"])
    reference = {"rank_us": 150.0, "between_workers_rsd": 0.12, "rank_us_by_worker": [150.0] * 5}
    a, b = one_worker(fast, reference), one_worker(slow, reference)
    assert tied(130.0, a["rank_ci95_us"], 206.0, b["rank_ci95_us"])
    # A real 3x speedup still stands out.
    c = one_worker(timing(45.0, 44.0, 46.0), reference)
    assert not tied(45.0, c["rank_ci95_us"], 206.0, b["rank_ci95_us"])


def test_a_reference_timed_in_one_worker_changes_nothing():
    mine = timing(100.0, 97.0, 104.0)
    assert one_worker(mine, {"rank_us": 90.0}) is mine
    assert one_worker(mine, {"between_workers_rsd": 0.1, "rank_us_by_worker": [90.0]}) is mine


def test_a_batch_record_shows_the_spread_and_the_widened_interval():
    case = Case(kind=BENCHMARK, index=0, spec={"size": 8})
    wide = widened(timing(100.0, 97.0, 104.0, host_bound_calls=50), 0.10, workers=5)
    feedback = case_feedback(case, CaseOutcome("passed", timing=wide, speedup=1.0))
    assert feedback.between_workers_rsd == 0.10
    assert feedback.ci95_us == tuple(wide["rank_ci95_us"])
    assert feedback.ci95_within_us == (97.0, 104.0)
    plain = case_feedback(case, CaseOutcome("passed", timing=timing(100.0, 97.0, 104.0)))
    assert plain.ci95_us == plain.ci95_within_us == (97.0, 104.0)
