"""The stopping rule, warm-up and per-case budget on their own; the loop that asks them is
measure.CaseTimer.measure, tested in test_measure_loop.py with a fake clock and worker."""

import math
import random

import pytest

from pytest_kernelboard.stats.stats import RunningMedian
from pytest_kernelboard.stats.stopping import (
    CONVERGED,
    MAX_SAMPLES,
    NOISE_BOUND,
    TIME_BUDGET,
    StoppingRule,
    Warmup,
    budget_for_case,
)


def test_reason_accepts_plain_samples():
    rule = StoppingRule(precision=0.01, min_samples=3, max_samples=5, min_time_s=0.0, budget_s=1.0)
    assert rule.reason([10.0, 10.0], 0.0) is None  # fewer than min_samples
    assert rule.reason([10.0, 10.0, 10.0], 0.0) == CONVERGED
    assert rule.reason([1.0, 50.0, 3.0], 0.1) is None
    assert rule.reason([1.0, 50.0, 3.0], 1.0) == TIME_BUDGET
    assert rule.reason([1.0, 50.0, 3.0, 70.0, 2.0], 0.1) == MAX_SAMPLES
    # One sample carries no spread, whatever min_samples says.
    assert StoppingRule(min_samples=1, min_time_s=0.0).reason([5.0], 0.0) is None


def test_stopping_rule_validates():
    for kwargs in (
        {"precision": 0},
        {"min_samples": 0},
        {"min_samples": 20, "max_samples": 10},
        {"budget_s": 0},
        {"projection_min_samples": 1},
        {"projection_min_time_s": -1.0},
    ):
        with pytest.raises(ValueError):
            StoppingRule(**kwargs)


def host_bound(n: int, seed: int = 0) -> list[float]:
    """Calls that spend a random 0-2 ms on the host: a median of 1 ms known to ~+/-1.96/sqrt(n)."""
    rng = random.Random(seed)
    return [rng.uniform(0.0, 2000.0) for _ in range(n)]


def test_projected_s_is_the_time_the_precision_needs_at_the_rate_so_far():
    rule = StoppingRule(precision=0.005)
    samples = [90.0, 95.0, 100.0, 105.0, 110.0] * 20
    halfwidth = RunningMedian(samples).relative_halfwidth()
    assert halfwidth == pytest.approx(0.025)  # ranks 40 and 60 of 100: 100 and 105
    # +/-2.5% to +/-0.5%: 25 times the samples, so 25 times the time spent so far.
    assert rule.projected_s(samples, 0.4) == pytest.approx(0.4 * 25)
    assert rule.projected_s([5.0], 1.0) == math.inf  # one sample: no spread yet


def test_noise_bound_stops_once_the_precision_is_out_of_reach_within_the_budget():
    rule = StoppingRule(precision=0.005, budget_s=10.0)
    samples = host_bound(200)
    assert rule.projected_s(samples, 0.3) > 10 * rule.budget_s
    assert rule.reason(samples, 0.3) == NOISE_BOUND
    # Not before the spread is known: enough samples, and enough time.
    assert rule.reason(samples[:49], 0.3) is None
    assert rule.reason(samples, 0.19) is None
    assert StoppingRule(min_time_s=1.0).reason(samples, 0.5) is None
    # At the budget itself the budget is what stopped it.
    assert rule.reason(samples, 10.0) == TIME_BUDGET


def test_a_median_of_zero_is_left_to_the_budget():
    """A relative width means nothing around 0 (host clocks can clamp calls to 0 us): such a
    case runs to its budget, as before, rather than stop on a median of 0."""
    rule = StoppingRule(precision=0.005, budget_s=10.0)
    samples = [0.0] * 60 + [3.0] * 40
    assert rule.projected_s(samples, 0.5) == math.inf
    assert rule.reason(samples, 0.5) is None
    assert rule.reason(samples, 10.0) == TIME_BUDGET


def test_a_precision_within_reach_keeps_the_case_measuring():
    """The projection compares with the whole budget: a case that gets there in time goes on
    to converge, exactly as before; only one that cannot stops early."""
    samples = [90.0, 95.0, 100.0, 105.0, 110.0] * 20  # +/-2.5%: 25x the time for +/-0.5%
    assert StoppingRule(precision=0.005, budget_s=10.0).reason(samples, 0.25) is None  # 6.25 s
    assert StoppingRule(precision=0.005, budget_s=5.0).reason(samples, 0.25) == NOISE_BOUND
    # Converged wins over everything, whatever the projection says.
    assert StoppingRule(precision=0.05, budget_s=0.1).reason(samples, 5.0) == CONVERGED


def test_warmup_ends_when_two_calls_agree():
    w = Warmup(min_calls=2, tolerance=0.10)
    assert not w.done([5000.0], 0.0)
    assert not w.done([5000.0, 120.0], 0.0)
    assert not w.done([5000.0, 120.0, 100.0], 0.0)  # 20% apart
    assert w.reason([5000.0, 120.0, 100.0, 105.0], 0.0) == "stable"


def test_noisy_but_steady_calls_are_warm_without_two_agreeing():
    # +-15% noise: no two consecutive calls agree within 10%, yet nothing is compiling.
    noisy = [9000.0, 100.0, 130.0, 95.0]
    assert not Warmup().done(noisy[:3], 0.0)  # the compile call is still among the last three
    assert Warmup().reason(noisy, 0.0) == "steady"
    assert Warmup().reason([9000.0, 100.0, 300.0, 95.0], 0.0) is None  # 3x apart: not yet


def test_warmup_is_bounded():
    flapping = [100.0, 200.0] * 10
    assert Warmup(max_calls=6).reason(flapping[:6], 0.0) == "max_calls"
    assert Warmup(max_time_s=1.0).reason(flapping[:3], 1.5) == "max_time"
    assert Warmup(min_calls=5).reason([100.0, 100.0, 100.0], 0.0) is None
    assert Warmup(min_time_s=1.0).reason([100.0, 100.0], 0.5) is None


def test_budget_for_case_formula():
    # (60 * 0.7 - 10) / (4 cases * 2 timed runs) = 4 s
    assert budget_for_case(60, 4) == pytest.approx(4.0)
    assert budget_for_case(180, 5) == 10.0  # (126 - 10) / 10 = 11.6, capped
    assert budget_for_case(10, 10) == 0.1  # timeout too short: floor
    assert (
        budget_for_case(
            100, 1, fixed_overhead_s=0, headroom=0.5, timed_runs_per_case=1, max_budget_s=99
        )
        == 50.0
    )


@pytest.mark.parametrize(("timeout_s", "n_cases"), [(60, 4), (120, 3), (300, 10), (900, 50)])
def test_budget_for_case_leaves_the_headroom(timeout_s, n_cases):
    budget = budget_for_case(timeout_s, n_cases)
    spent = 10.0 + budget * n_cases * 2
    assert spent <= timeout_s * 0.7 + 1e-9


def test_budget_for_case_validates():
    with pytest.raises(ValueError):
        budget_for_case(60, 0)
    with pytest.raises(ValueError):
        budget_for_case(60, 3, headroom=1.0)
