"""Freed device memory is scrubbed in the background; a timed call waits until that is done."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_kernelboard.channel import protocol, scrubbing
from pytest_kernelboard.channel.protocol import Op
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.measure import TimingPlan
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor.pool import WorkerPool

ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"
GiB = 1 << 30


class FakeTime:
    """A clock that only the queue's own sleeps move (and the test, by hand)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def queue(rate_gib_per_ms: float = 0.2) -> tuple[scrubbing.ScrubQueue, FakeTime]:
    fake = FakeTime()
    return scrubbing.ScrubQueue(rate_gib_per_ms * GiB * 1e3, fake.clock, fake.sleep), fake


def test_a_release_is_waited_for_at_the_scrubbing_rate():
    scrubs, fake = queue()
    scrubs.released(2 * GiB)
    assert scrubs.wait() == pytest.approx(0.010)  # 2 GiB at 0.2 GiB/ms
    assert fake.slept == [pytest.approx(0.010)]
    assert scrubs.wait() == 0.0  # done: the next call does not wait again
    assert len(fake.slept) == 1


def test_releases_queue_behind_each_other_and_time_already_passed_counts():
    scrubs, fake = queue()
    scrubs.released(1 * GiB)  # 5 ms of scrubbing
    fake.now += 0.002
    scrubs.released(1 * GiB)  # queued behind the first: both done 10 ms after the first
    fake.now += 0.003
    assert scrubs.wait() == pytest.approx(0.005)


def test_a_release_after_the_queue_ran_dry_starts_from_now():
    scrubs, fake = queue()
    scrubs.released(1 * GiB)
    fake.now += 1.0  # long done
    scrubs.released(GiB // 2)
    assert scrubs.wait() == pytest.approx(0.0025)


def test_nothing_released_nothing_waited():
    scrubs, fake = queue()
    scrubs.released(0)
    scrubs.released(-5)  # a cache that grew meanwhile gave nothing back
    assert scrubs.wait() == 0.0
    assert fake.slept == []


def test_a_made_up_release_costs_at_most_the_backlog_bound():
    """The worker reports its own releases, and a submission can patch what torch tells it:
    no number it reports makes the judge wait longer than scrubbing a whole GPU takes."""
    scrubs, fake = queue()
    scrubs.released(10**18)
    scrubs.released(10**18)
    assert scrubs.wait() == pytest.approx(scrubbing.MAX_BACKLOG_S)
    assert scrubs_ms(141) / 1e3 <= scrubbing.MAX_BACKLOG_S  # a real release is never cut short


def test_the_rate_is_below_the_slowest_measured():
    # benchmarks/probes/scrub_probe.py on an H200: 4 GiB scrubbed in about 16 ms, 1 GiB in about 3.
    assert scrubs_ms(4) >= 16
    assert scrubs_ms(1) >= 3


def scrubs_ms(gib: float) -> float:
    return gib * GiB / scrubbing.SCRUB_BYTES_PER_S * 1e3


def test_the_worker_may_say_what_a_case_end_gave_back():
    assert protocol.validate(Op.WINDOW.value, {"released_bytes": 3 * GiB}) == {
        "released_bytes": 3 * GiB
    }
    assert protocol.validate(Op.WINDOW.value, {}) == {}
    with pytest.raises(protocol.ProtocolError):
        protocol.validate(Op.WINDOW.value, {"released_bytes": -1})


def test_a_timed_call_waits_for_what_was_released_before_it(tmp_path, monkeypatch):
    """The judge's timed request comes only once the scrubbing is done, and the case's timing
    says how long its calls waited; with nothing released after, later calls do not wait."""
    scrubs, fake = queue()
    monkeypatch.setattr(scrubbing, "QUEUE", scrubs)
    waits_before_time: list[int] = []
    task = load_task(ADDONE)
    path = tmp_path / "submission.py"
    path.write_text(
        textwrap.dedent(
            """
            def custom_kernel(data):
                x, out = data
                return out.copy_(x + 1)
            """
        )
    )
    judge = SubmissionJudge(
        task, LeaderboardModules(task), path, use_cuda=False, pool=WorkerPool(spares=0)
    )
    request = type(judge.worker()).request

    def noting(self, op, *args, **kwargs):
        if op == Op.TIME:
            waits_before_time.append(len(fake.slept))
        return request(self, op, *args, **kwargs)

    monkeypatch.setattr(type(judge.worker()), "request", noting)
    scrubs.released(1 * GiB)  # as a frugal case's end would: 5 ms to scrub
    plan = TimingPlan(
        rule=StoppingRule(min_samples=5, max_samples=5, min_time_s=0.0, budget_s=5.0),
        warmup=Warmup(min_calls=1, max_calls=1),
        flush_bytes=0,
    )
    try:
        outcome = judge.benchmark_case(Case(BENCHMARK, 0, task.benchmarks[0]), 60.0, plan)
    finally:
        judge.close()
    assert outcome.status == "passed", outcome.message
    assert waits_before_time and all(count == 1 for count in waits_before_time)
    assert fake.slept == [pytest.approx(0.005)]
    assert outcome.timing["scrub_wait_ms"] == pytest.approx(5.0)
