"""The adaptive loop that ranks: CaseTimer.measure, driven by a fake clock and a fake worker.

No GPU and no process: the fake worker's `time` replies carry scripted device times and move
the fake clock on by the call plus a judge/worker round trip, so every stopping behaviour is
the production loop's own (warm-up, the prior call's seed, the median's interval, min_samples,
min_time, the budget, max_samples, non-finite samples, verification).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from pytest_kernelboard.judge.measure import (
    HOST_WAIT,
    CaseTimer,
    Measurement,
    TimingPlan,
    VerificationFailure,
)
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.stats.stats import RunningMedian, summarize
from pytest_kernelboard.stats.stopping import (
    CONVERGED,
    MAX_SAMPLES,
    NOISE_BOUND,
    TIME_BUDGET,
    StoppingRule,
    Warmup,
)

CASE = Case(BENCHMARK, 0, {"size": 8, "seed": 1})
ONE_WARM_CALL = Warmup(min_calls=1, max_calls=1)


class FakeClock:
    """Seconds that pass only when a fake call says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeWorker:
    """Answers `time` requests as worker/timing.py does on CPU: the output and the call's times.

    Each call takes the next scripted device time and costs it plus a round trip on the clock.
    `wrong_from`: calls from this index on return a wrong output.
    """

    def __init__(
        self,
        clock: FakeClock,
        device_us: Iterator[float],
        overhead_s: float = 20e-6,
        wrong_from: int | None = None,
    ) -> None:
        self.clock = clock
        self.device_us = device_us
        self.overhead_s = overhead_s
        self.wrong_from = wrong_from
        self.calls = 0

    def request_time(
        self,
        data: int,
        flush_bytes: int,
        remaining_s: float,
        warm: bool = False,
        wake: bool = True,
    ) -> dict[str, float]:
        assert remaining_s > 0
        sample = next(self.device_us)
        self.calls += 1
        if math.isfinite(sample):
            self.clock.now += sample * 1e-6 + self.overhead_s
        wrong = self.wrong_from is not None and data >= self.wrong_from
        return {
            "output": data + (2 if wrong else 1),
            "device_us": sample,
            "wall_us": sample,
            "dispatch_us": sample,
            "call_us": sample,
        }


def generate(case: Case, call_index: int) -> int:
    return call_index  # each call its own input, as the judge's generate_input gives


def check(pristine: int, output: int) -> tuple[bool, str]:
    return (output == pristine + 1, f"{output} != {pristine} + 1")


def measure(
    device_us: Iterator[float] | Callable[[], float],
    rule: StoppingRule,
    warmup: Warmup = ONE_WARM_CALL,
    prior_call_us: float | None = None,
    clock: FakeClock | None = None,
    **worker_options,
) -> tuple[Measurement, FakeWorker, FakeClock]:
    clock = clock or FakeClock()
    if callable(device_us):
        device_us = iter(device_us, None)  # a function: called for each sample
    worker = FakeWorker(clock, device_us, **worker_options)
    timer = CaseTimer(generate, worker.request_time, check, use_cuda=False, clock=clock)
    plan = TimingPlan(rule=rule, warmup=warmup, flush_bytes=0)
    m = timer.measure(CASE, plan, timeout_s=600.0, label="fake", prior_call_us=prior_call_us)
    return m, worker, clock


def gaussian(seed: int, mean_us: float, cv: float) -> Callable[[], float]:
    rng = random.Random(seed)
    return lambda: max(rng.gauss(mean_us, cv * mean_us), 0.0)


def test_cv_5_percent_needs_a_few_hundred_samples_for_a_half_percent_median_interval():
    # The median's 95% interval spans +/- z*sqrt(n)/2 ranks; for Gaussian noise its half-width is
    # about 1.96 * 1.2533 * cv / sqrt(n), so cv = 5% and +/-0.5% need n ~= (1.96*1.25*10)^2 ~= 600.
    rule = StoppingRule(precision=0.005, min_samples=10, min_time_s=0.0)
    counts = []
    for seed in range(30):
        m, _, _ = measure(gaussian(seed, 100.0, 0.05), rule)
        assert m.stop_reason == CONVERGED
        assert RunningMedian(m.samples_us).relative_halfwidth() <= 0.005
        assert m.checked_calls == len(m.samples_us)  # every timed call's output was verified
        counts.append(len(m.samples_us))
    assert 350 <= statistics.median(counts) <= 900, sorted(counts)


def test_lower_noise_stops_at_min_samples():
    rule = StoppingRule(precision=0.005, min_samples=10, min_time_s=0.0)
    m, _, _ = measure(gaussian(1, 100.0, 0.002), rule)
    assert (m.stop_reason, len(m.samples_us)) == (CONVERGED, 10)  # +/-0.1% at min_samples


def test_a_slow_tail_neither_moves_the_median_nor_delays_the_stop():
    """Host jitter shows up as a few very slow samples: the mean and its interval follow them,
    the median and its interval do not."""
    rng = random.Random(7)
    clean = [rng.gauss(10.0, 0.02) for _ in range(200)]
    tailed = [x * (6.0 if i % 10 == 3 else 1.0) for i, x in enumerate(clean)]  # 10% at 6x
    rule = StoppingRule(precision=0.005, min_samples=20, min_time_s=0.0)
    m, _, _ = measure(iter([10.0, *tailed]), rule)
    assert m.stop_reason == CONVERGED and len(m.samples_us) <= 40
    assert m.samples_us == tailed[: len(m.samples_us)]
    record = m.to_record()
    assert record["rank_us"] == pytest.approx(statistics.median(clean), rel=0.01)
    assert record["mean_us"] > 1.3 * statistics.mean(clean)
    assert summarize(m.samples_us).rse > 0.005  # a rule on the mean would still be waiting


def test_slow_calls_stop_on_the_time_budget():
    calls = iter(range(10_000))
    # Each call takes 0.5 s; far too noisy to converge.
    rule = StoppingRule(precision=0.001, min_samples=2, min_time_s=0.0, budget_s=2.0)
    m, _, _ = measure(lambda: 100.0 if next(calls) % 2 else 300.0, rule, overhead_s=0.5)
    assert (m.stop_reason, len(m.samples_us)) == (TIME_BUDGET, 4)  # 4 calls of 0.5 s each
    assert m.elapsed_s == pytest.approx(2.5, abs=2e-3)  # and the warm call before them


def host_bound(seed: int) -> Callable[[], float]:
    """A call whose host work takes a random 0-2 ms: the median is known to about
    +/-1.96/sqrt(n), so +/-0.5% would take some 150 000 calls."""
    rng = random.Random(seed)
    return lambda: rng.uniform(0.0, 2000.0)


@pytest.mark.parametrize("seed", range(5))
def test_a_host_bound_case_stops_on_its_noise_not_its_budget(seed):
    rule = StoppingRule(precision=0.005, budget_s=10.0)
    m, _, _ = measure(host_bound(seed), rule, overhead_s=0.5e-3)
    assert m.stop_reason == NOISE_BOUND
    # The projection minimum (0.2 s, 50 calls) and little more: not the 10 s budget.
    assert len(m.samples_us) >= 50 and m.elapsed_s < 0.5
    record = m.to_record()
    assert record["stop_reason"] == NOISE_BOUND
    assert record["precision_projected_s"] > rule.budget_s
    lo, hi = record["rank_ci95_us"]
    assert (hi - lo) / 2 > rule.precision * record["rank_us"]  # the wider interval it reached


@pytest.mark.parametrize("seed", range(5))
def test_noise_the_budget_can_beat_still_converges(seed):
    """cv 10% needs ~2400 calls (2.4 s here) for +/-0.5%: within a 10 s budget it converges as
    before; under a 1 s budget it stops on its noise instead of running the budget out."""
    m, _, _ = measure(gaussian(seed, 100.0, 0.10), StoppingRule(budget_s=10.0), overhead_s=1e-3)
    assert m.stop_reason == CONVERGED and 1.0 < m.elapsed_s < 10.0
    m, _, _ = measure(gaussian(seed, 100.0, 0.10), StoppingRule(budget_s=1.0), overhead_s=1e-3)
    assert m.stop_reason == NOISE_BOUND and m.elapsed_s < 1.0
    assert "precision_projected_s" in m.to_record()


def test_max_samples_stop():
    rule = StoppingRule(precision=1e-6, min_samples=10, max_samples=50, min_time_s=0.0)
    m, _, _ = measure(gaussian(3, 100.0, 0.5), rule, overhead_s=0.0)
    assert (m.stop_reason, len(m.samples_us)) == (MAX_SAMPLES, 50)


def test_min_time_holds_back_convergence():
    rule = StoppingRule(min_samples=3, min_time_s=1.0)
    m, _, _ = measure(lambda: 42.0, rule, overhead_s=0.125)
    assert (m.stop_reason, len(m.samples_us)) == (CONVERGED, 8)


def test_warm_up_is_discarded_and_the_budget_starts_after_it():
    script = iter([2_000_000.0, 120.0, 100.0, 101.0] + [50.0] * 100)
    rule = StoppingRule(min_samples=5, min_time_s=0.0, budget_s=1.0)
    m, _, _ = measure(script, rule, warmup=Warmup(), overhead_s=0.0)
    # The 2 s compile call would have blown the 1 s budget had it counted.
    assert (m.stop_reason, m.samples_us) == (CONVERGED, [50.0] * 5)
    assert m.warmup_calls == 4


def test_the_correctness_calls_duration_seeds_the_warm_up():
    rule = StoppingRule(min_samples=5, min_time_s=0.0)
    # The correctness call took as long as the next call: warm after one call, not two.
    m, worker, _ = measure(iter([101.0] + [50.0] * 10), rule, warmup=Warmup(), prior_call_us=100.0)
    assert (m.warmup_calls, m.samples_us) == (1, [50.0] * 5)
    assert worker.calls == 6
    # A correctness call that compiled disagrees with the next one and is ignored.
    script = iter([120.0, 100.0, 101.0] + [50.0] * 10)
    m, _, _ = measure(script, rule, warmup=Warmup(), prior_call_us=3_000_000.0)
    assert (m.warmup_calls, m.samples_us) == (3, [50.0] * 5)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_samples_are_rejected(bad):
    with pytest.raises(ValueError, match="timed call 2 measured"):
        measure(iter([100.0, bad, 100.0]), StoppingRule())


def test_a_wrong_output_while_timed_fails_the_case():
    with pytest.raises(VerificationFailure, match="timed call 4 returned a wrong output"):
        measure(lambda: 100.0, StoppingRule(min_samples=10), wrong_from=4)


class UnseenWorker(FakeWorker):
    """Replies whose judge's view saw work outside the timed interval in `flagged` calls."""

    def __init__(self, clock: FakeClock, device_us: Iterator[float], flagged: set[int]) -> None:
        super().__init__(clock, device_us)
        self.flagged = flagged

    def request_time(self, data: int, *args: Any, **kwargs: Any) -> dict:
        reply = super().request_time(data, *args, **kwargs)
        if self.calls in self.flagged:
            reply["outside_unseen"] = "the request took 7000 us but the worker accounts for 20 us"
        return reply


def unseen_measure(flagged: set[int]) -> Measurement:
    clock = FakeClock()
    worker = UnseenWorker(clock, iter(lambda: 10.0, None), flagged)
    timer = CaseTimer(generate, worker.request_time, check, use_cuda=False, clock=clock)
    rule = StoppingRule(precision=0.005, min_samples=20, min_time_s=0.0, max_samples=20)
    plan = TimingPlan(rule=rule, warmup=ONE_WARM_CALL, flush_bytes=0)
    return timer.measure(CASE, plan, timeout_s=600.0, label="fake")


def test_a_few_calls_the_busy_judge_saw_late_do_not_fail_the_case():
    m = unseen_measure(flagged={3, 9, 15})  # a descheduled judge wakes late now and then
    assert len(m.samples_us) == 20


def test_work_outside_the_interval_in_most_calls_fails_the_case():
    with pytest.raises(VerificationFailure, match=r"judge's clock in 1[0-9] of 20 calls"):
        unseen_measure(flagged=set(range(2, 30, 1)) - {5, 6, 7, 8})


class BusyHostWorker(FakeWorker):
    """Every call waited 3 ms for the host's CPUs (what the judge's clock check took off)."""

    def request_time(self, *args: Any, **kwargs: Any) -> dict:
        return {**super().request_time(*args, **kwargs), HOST_WAIT: 3000.0}


def test_a_cases_record_says_how_long_its_calls_waited_for_the_host():
    clock = FakeClock()
    worker = BusyHostWorker(clock, iter(lambda: 10.0, None))
    timer = CaseTimer(generate, worker.request_time, check, use_cuda=False, clock=clock)
    rule = StoppingRule(precision=0.005, min_samples=20, min_time_s=0.0, max_samples=20)
    plan = TimingPlan(rule=rule, warmup=ONE_WARM_CALL, flush_bytes=0)
    m = timer.measure(CASE, plan, timeout_s=600.0, label="fake")
    assert m.details["host_wait_ms"] == pytest.approx(20 * 3.0)  # the timed calls', not warm-up's
    quiet = CaseTimer(
        generate,
        FakeWorker(clock, iter(lambda: 10.0, None)).request_time,
        check,
        use_cuda=False,
        clock=clock,
    ).measure(CASE, plan, 600.0, "fake")
    assert "host_wait_ms" not in quiet.details


def test_the_event_pairs_cost_comes_off_blocked_calls_and_is_recorded_once():
    blocked = {"device_us": 11.3, "blocked": True, "call_us": 5.0}
    assert CaseTimer.sample_us(blocked, 1.3) == pytest.approx(10.0)
    assert CaseTimer.sample_us({**blocked, "blocked": False}, 1.3) == 11.3  # sees host gaps
    clock = FakeClock()
    worker = FakeWorker(clock, iter([10.0] * 50))
    timer = CaseTimer(generate, worker.request_time, check, use_cuda=False, clock=clock)
    plan = TimingPlan(rule=StoppingRule(min_samples=5), warmup=ONE_WARM_CALL, flush_bytes=0)
    calibration = {"wall_gap_us": 4.0, "preroll_us": 30.0, "empty_device_us": 1.3}
    record = timer.measure(CASE, plan, 600.0, "fake", calibration).to_record()
    assert record["event_overhead_us"] == 1.3
    assert "empty_call_us" not in record  # one value, one name


class WarmRecordingWorker(FakeWorker):
    """A fake GPU worker that records each call's `warm` and warms once a copy is kept."""

    def __init__(self, clock: FakeClock, device_us: Iterator[float]) -> None:
        super().__init__(clock, device_us)
        self.warm_requests: list[bool] = []
        self.wakes: list[bool] = []
        self.kept = False
        self.keeps = True  # whether a warm request keeps a copy for the next call

    def request_time(
        self,
        data: int,
        flush_bytes: int,
        remaining_s: float,
        warm: bool = False,
        wake: bool = True,
    ) -> dict:
        self.warm_requests.append(warm)
        self.wakes.append(wake)
        reply = {**super().request_time(data, flush_bytes, remaining_s, warm), "blocked": True}
        reply["warmed"] = warm and self.kept
        self.kept = warm and self.keeps
        return reply


def warm_timer(
    monkeypatch, call_us: float, samples: int, peak: float | None = None
) -> tuple[WarmRecordingWorker, CaseTimer, TimingPlan]:
    """A GPU CaseTimer over a WarmRecordingWorker whose calls take `call_us`, and a plan of
    one warm-up call and `samples` timed ones; no NVML, `peak` bytes/s of bandwidth."""
    from pytest_kernelboard.judge import measure as measure_module

    monkeypatch.setattr(measure_module.devices, "gpu_state", lambda: None)
    monkeypatch.setattr(measure_module.devices, "peak_bandwidth_bytes_per_s", lambda: peak)
    clock = FakeClock()
    worker = WarmRecordingWorker(clock, iter(lambda: call_us, None))
    timer = CaseTimer(generate, worker.request_time, check, use_cuda=True, clock=clock)
    plan = TimingPlan(
        rule=StoppingRule(min_samples=samples, max_samples=samples),
        warmup=ONE_WARM_CALL,
        flush_bytes=0,
    )
    return worker, timer, plan


@pytest.mark.parametrize(
    ("call_us", "warmed"),
    [(50.0, True), (5000.0, False)],
    ids=["short calls: warm host path", "long calls: none"],
)
def test_short_calls_are_timed_with_a_warm_host_path_after_the_first(monkeypatch, call_us, warmed):
    worker, timer, plan = warm_timer(monkeypatch, call_us, 10)
    m = timer.measure(CASE, plan, timeout_s=600.0, label="fake")
    # The case's first call has nothing to go on; each later one follows the last call's time.
    assert worker.warm_requests == [False] + [warmed] * (len(worker.warm_requests) - 1)
    # The first warm request only keeps a copy: the calls after it are the warmed ones.
    assert m.warm_calls == (len(worker.warm_requests) - 2 if warmed else 0)
    assert m.to_record()["warm_calls"] == m.warm_calls
    assert worker.wakes == [True] * len(worker.warm_requests)  # the plan's default


def test_a_plan_without_wake_asks_no_call_for_one(monkeypatch):
    worker, timer, plan = warm_timer(monkeypatch, 50.0, 6)
    timer.measure(CASE, replace(plan, wake=False), timeout_s=600.0, label="fake")
    assert worker.wakes and not any(worker.wakes)


@pytest.mark.parametrize(
    ("call_us", "ends_warm"), [(50.0, True), (5000.0, False)], ids=["short", "long"]
)
def test_a_loop_says_whether_it_ended_warm(monkeypatch, call_us, ends_warm):
    worker, timer, plan = warm_timer(monkeypatch, call_us, 3)
    assert timer.measure(CASE, plan, timeout_s=600.0, label="fake").ends_warm is ends_warm


def test_a_loop_whose_calls_were_never_warmed_did_not_end_warm(monkeypatch):
    """Short calls asked to be warm that the worker could not warm (it kept no input: a
    frugal case's) leave a later turn its warm-up call."""

    worker, timer, plan = warm_timer(monkeypatch, 50.0, 3)
    worker.keeps = False
    m = timer.measure(CASE, plan, timeout_s=600.0, label="fake")
    assert worker.warm_requests[-1] and m.warm_calls == 0
    assert not m.ends_warm


def test_a_warm_start_makes_no_warm_up_call_and_warms_its_first_call(monkeypatch):
    """A later turn whose worker kept an input from its last turn (TimingPlan.warm_start): its
    first request already asks for the untimed warm call, no warm-up call comes before, and no
    floor is computed from a warm-up it did not make."""
    worker, timer, plan = warm_timer(monkeypatch, 50.0, 3, peak=3e12)
    worker.kept = True  # the input its last turn kept
    m = timer.measure(CASE, replace(plan, warm_start=True), timeout_s=600.0, label="fake")
    assert worker.warm_requests == [True, True, True]
    assert (m.warmup_calls, len(m.samples_us), m.warm_calls) == (0, 3, 3)
    assert m.checked_calls == 3 and m.floor_us is None
    cold = timer.measure(CASE, plan, timeout_s=600.0, label="fake")
    assert cold.warmup_calls == 1 and cold.floor_us is not None


def test_large_inputs_are_never_warmed():
    timer = CaseTimer(
        generate, FakeWorker(FakeClock(), iter([])).request_time, check, use_cuda=True
    )
    from pytest_kernelboard.judge.measure import WARM_MAX_BYTES

    assert timer.warm_next(10.0, (WARM_MAX_BYTES // 2, WARM_MAX_BYTES // 2))
    assert not timer.warm_next(10.0, (WARM_MAX_BYTES, 1))
    cpu_timer = CaseTimer(generate, FakeWorker(FakeClock(), iter([])).request_time, check, False)
    assert not cpu_timer.warm_next(10.0, (0, 0))  # a host clock times the whole request


def test_a_call_synchronised_inside_is_charged_its_host_time_like_a_blocked_one():
    host_bound = {"device_us": 80.0, "call_us": 200.0, "wall_us": 210.0}
    assert CaseTimer.sample_us({**host_bound, "blocked": True}) == 170.0
    assert CaseTimer.sample_us({**host_bound, "synced": True}) == 170.0
    # Behind a pre-roll (no Triton), the interval already holds the host's gaps.
    assert CaseTimer.sample_us(host_bound) == 80.0
    device_bound = {"device_us": 500.0, "call_us": 520.0, "synced": True}
    assert CaseTimer.sample_us(device_bound, event_overhead_us=1.0) == 499.0
