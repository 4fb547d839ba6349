"""A host-bound reference carried to when a candidate was timed (stats/drift.py), and a batch's
kept reference worker that measures how far the host moved (batch/judge.py)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import jsonschema
import pytest

from pytest_kernelboard.batch.candidates import Candidate
from pytest_kernelboard.batch.judge import BatchJudge, judge_many, reference_key
from pytest_kernelboard.batch.records import record_schema
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.stats.drift import carried

GOOD = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"


def host_bound_timing(rank_us: float, half: float = 0.05) -> dict:
    return {
        "clock": "cuda_event",
        "n": 50,
        "host_bound_calls": 45,
        "rank_us": rank_us,
        "rank_ci95_us": [rank_us * (1 - half), rank_us * (1 + half)],
    }


def test_the_reference_moves_as_the_kept_worker_moved_and_its_interval_widens():
    reference = {**host_bound_timing(200.0, 0.2), "rank_us_by_worker": [180.0, 200.0, 230.0]}
    then, now = host_bound_timing(190.0, 0.03), host_bound_timing(133.0, 0.04)
    moved = carried(reference, then, now)
    assert moved["drift"] == pytest.approx(0.7)
    assert moved["drift_us"] == [190.0, 133.0]
    assert moved["rank_us"] == pytest.approx(140.0)
    low, high = moved["rank_ci95_us"]
    assert low < 140.0 * 0.8 and high > 140.0 * 1.2  # the reference's own spread, and more
    extra = math.hypot(math.log(1.03 / 0.97) / 2, math.log(1.04 / 0.96) / 2)
    assert math.log(high / 140.0) == pytest.approx(math.hypot(math.log(1.2), extra))
    assert moved["rank_us_by_worker"] == [180.0, 200.0, 230.0]  # as the workers timed it
    assert reference["rank_us"] == 200.0  # the reference's own timing is left as it was


def _judge_with_kept_worker(pids: list[int | None], now: dict | Exception) -> SimpleNamespace:
    """A BatchJudge's state for _reference_now: a kept worker whose pid reads as `pids` says,
    one read after another, and a re-timing that gives `now` (or raises it)."""
    timed: list[str] = []

    def again(judge, task, case):
        timed.append(case.id)
        if isinstance(now, Exception):
            raise now
        return now

    reads = iter(pids)
    judge = SimpleNamespace(live_pid=lambda: next(reads))
    session = SimpleNamespace(reference_judge=lambda task: judge, time_reference_again=again)
    case = Case(BENCHMARK, 0, {"size": 8})
    return SimpleNamespace(
        mode="benchmark",
        session=session,
        _kept_pid=7,
        _kept_timings={reference_key(case): host_bound_timing(100.0)},
        timed=timed,
        case=case,
    )


def test_a_batch_carries_a_host_bound_reference_by_its_kept_worker():
    state = _judge_with_kept_worker([7, 7], host_bound_timing(150.0))
    moved = BatchJudge._reference_now(state, None, state.case, host_bound_timing(200.0))
    assert moved is not None and moved["rank_us"] == pytest.approx(300.0)
    assert state.timed == [state.case.id]


@pytest.mark.parametrize(
    "pids, now, reference",
    [
        ([7, 8], host_bound_timing(150.0), host_bound_timing(200.0)),  # another worker timed it
        ([8], host_bound_timing(150.0), host_bound_timing(200.0)),  # the kept worker is gone
        ([7, 7], RuntimeError("the reference's worker crashed"), host_bound_timing(200.0)),
        ([7, 7], host_bound_timing(150.0), {**host_bound_timing(200.0), "host_bound_calls": 0}),
        ([7, 7], host_bound_timing(150.0), {**host_bound_timing(200.0), "clock": "host"}),
    ],
)
def test_the_reference_stays_as_timed_where_no_kept_worker_can_say_how_the_host_moved(
    pids, now, reference
):
    state = _judge_with_kept_worker(pids, now)
    assert BatchJudge._reference_now(state, None, state.case, reference) is None


def test_a_carried_reference_reaches_the_record(core_repo, monkeypatch):
    """Whatever _reference_now gives is the candidate's reference in its record: its time, the
    speedup and the drift (a CPU's host-clock timings are never carried; this one is)."""
    asked: list[str] = []

    def doubled(self, task, case, reference):
        asked.append(case.id)
        return {**reference, "rank_us": 2 * reference["rank_us"], "drift": 2.0}

    monkeypatch.setattr(BatchJudge, "_reference_now", doubled)
    (record,) = judge_many(
        "addone", [Candidate("a.py", GOOD)], mode="benchmark", root=core_repo, gpus=[]
    )
    (timed,) = [case for case in record["cases"] if case["kind"] == "benchmark"]
    assert asked == [timed["id"]]
    assert timed["speedup"] == pytest.approx(timed["reference_us"] / timed["time_us"])
    jsonschema.validate(record, record_schema())
