import math

import pytest

from pytest_kernelboard.stats.scoring import (
    fast_p_key,
    fast_p_raw,
    rank_us,
    score,
    score_interval,
    speedup,
)
from pytest_kernelboard.stats.stats import student_t_critical, summarize

MEANS = [10.0, 40.0, 160.0]


def test_score_by_hand():
    assert score(MEANS, "last") == 160.0
    assert score(MEANS, "mean") == pytest.approx(70.0)
    assert score(MEANS, "geom") == pytest.approx(40.0)  # (10 * 40 * 160) ** (1/3) = 64000 ** (1/3)
    assert score([5.0], "geom") == pytest.approx(5.0)


def test_score_rejects_unknown_ranking_and_empty_input():
    with pytest.raises(ValueError):
        score(MEANS, "median")
    with pytest.raises(ValueError):
        score([], "mean")
    with pytest.raises(ValueError):
        score([1.0, 0.0], "geom")


def _cases():
    return [
        summarize([9.0, 10.0, 11.0]),
        summarize([38.0, 40.0, 42.0, 40.0]),
        summarize([150.0, 170.0]),
    ]


Z95 = 1.959963984540054


def test_cases_rank_by_their_median():
    cases = _cases()
    assert [rank_us(c) for c in cases] == [c.median_us for c in cases]
    record = cases[0].to_dict(clock="cuda_event")
    assert rank_us(record) == record["median_us"] == record["rank_us"]
    old = {k: v for k, v in record.items() if not k.startswith("rank")}
    assert rank_us(old) == old["mean_us"]  # records from before rank_us rank by their mean


def test_score_interval_last_is_that_cases_median_interval():
    cases = _cases()
    assert score_interval(cases, "last") == cases[-1].median_ci95_us


def test_score_interval_mean_by_hand():
    cases = _cases()
    se = [(c.median_ci95_us[1] - c.median_ci95_us[0]) / (2 * Z95) for c in cases]
    var = [s * s for s in se]
    # Welch-Satterthwaite: (sum v)^2 / sum(v^2 / (n - 1))
    df = sum(var) ** 2 / sum(v * v / (c.n - 1) for v, c in zip(var, cases, strict=True))
    half = student_t_critical(df) * math.sqrt(sum(var)) / 3
    center = sum(c.median_us for c in cases) / 3
    assert score_interval(cases, "mean") == pytest.approx((center - half, center + half))
    lo, hi = score_interval(cases, "mean")
    assert lo < score([c.median_us for c in cases], "mean") < hi


def test_score_interval_geom_is_multiplicative():
    cases = _cases()
    medians = [c.median_us for c in cases]
    g = score(medians, "geom")
    lo, hi = score_interval(cases, "geom")
    assert lo < g < hi
    assert g / lo == pytest.approx(hi / g)  # symmetric on the log scale
    # Each case's standard error on log times, read from its interval on log times.
    rel = [math.log(c.median_ci95_us[1] / c.median_ci95_us[0]) / (2 * Z95) for c in cases]
    var = [r * r for r in rel]
    df = sum(var) ** 2 / sum(v * v / (c.n - 1) for v, c in zip(var, cases, strict=True))
    half = student_t_critical(df) * math.sqrt(sum(var)) / 3
    assert hi == pytest.approx(g * math.exp(half))


def test_a_case_widened_by_a_wide_spread_between_two_workers_keeps_a_finite_interval():
    """Two workers' spread widens a case's interval on log times, by t(1) = 12.7 times it:
    on a loaded CPU one reached 8,000 times its time. Read on log times it stays a finite
    interval; read as (hi - lo) / m it made exp() overflow and ended the judge."""
    wide = {"n": 10, "rank_us": 30.0, "rank_ci95_us": [30.0 / 8000, 30.0 * 8000]}
    narrow = {"n": 10, "rank_us": 40.0, "rank_ci95_us": [39.0, 41.0]}
    lo, hi = score_interval([wide, narrow], "geom")
    g = score([30.0, 40.0], "geom")
    assert 0 < lo < g < hi < math.inf
    assert g / lo == pytest.approx(hi / g)


def test_score_interval_accepts_record_dicts_and_handles_zero_spread():
    cases = [summarize([5.0, 5.0, 5.0]).to_dict(clock="cuda_event"), summarize([7.0]).to_dict()]
    assert score_interval(cases, "mean") == pytest.approx((6.0, 6.0))
    assert score_interval(cases, "geom") == pytest.approx((math.sqrt(35.0),) * 2)


def test_speedup():
    assert speedup(100.0, 25.0) == 4.0
    assert speedup(10.0, 20.0) == 0.5
    with pytest.raises(ValueError):
        speedup(10.0, 0.0)


def test_raw_fast_p_hand_computed_table():
    #        case:   0      1      2      3      4      5
    correct = [True, True, True, False, True, True]
    speedups = [0.4, 1.0, 1.6, 3.0, 2.5, None]  # case 3 is fast but wrong; case 5 is untimed
    # p=0   : correct                          -> 0,1,2,4,5 = 5/6
    # p=0.5 : correct and > 0.5               -> 1,2,4     = 3/6
    # p=1   : > 1 (1.0 is not faster)         -> 2,4       = 2/6
    # p=1.5 : > 1.5                           -> 2,4       = 2/6
    # p=2   : > 2                             -> 4         = 1/6
    assert fast_p_raw(correct, speedups) == pytest.approx(
        {"fast_0": 5 / 6, "fast_0.5": 3 / 6, "fast_1": 2 / 6, "fast_1.5": 2 / 6, "fast_2": 1 / 6}
    )


def test_raw_fast_p_custom_thresholds_and_validation():
    assert fast_p_raw([False, False], [2.0, 3.0], thresholds=(0, 1)) == {
        "fast_0": 0.0,
        "fast_1": 0.0,
    }
    assert fast_p_raw([True], [3.0], thresholds=(2.5,)) == {"fast_2.5": 1.0}
    assert fast_p_key(1.0) == "fast_1"
    with pytest.raises(ValueError):
        fast_p_raw([True], [1.0, 2.0])
    with pytest.raises(ValueError):
        fast_p_raw([], [])


def test_scores_tie_when_their_intervals_overlap_or_they_are_within_the_run_to_run_tolerance():
    from pytest_kernelboard.stats.scoring import TIE_TOLERANCE, tied

    # Tight, disjoint intervals 1% apart: one run's samples cannot see the between-run spread.
    assert tied(101.0, (100.8, 101.2), 100.0, (99.8, 100.2))
    # Disjoint and further apart than the tolerance: ordered.
    far = 100.0 * (1 + 2 * TIE_TOLERANCE)
    assert not tied(far, (far - 0.1, far + 0.1), 100.0, (99.9, 100.1))
    # Wide, overlapping intervals: tied however far the point estimates are.
    assert tied(110.0, (95.0, 125.0), 100.0, (90.0, 105.0))
