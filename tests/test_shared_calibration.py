"""The harness's calibration measured in the reference's workers and reused by candidates'
(judge/calibration.py, SubmissionJudge._calibrate). Real workers calibrate only on a GPU
(tests/test_batch_hacks.py checks a batch's records there); here the judge's side, with a
worker that answers as Timer.calibrate does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_kernelboard.channel.protocol import Op
from pytest_kernelboard.judge.calibration import (
    FULL_CALLS,
    WARM_UP_CALLS,
    SharedCalibration,
)
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.stats.preroll import MAX_PREROLL_US

FLUSH = 100 << 20


def calibration(event_us: float, spin: float = 1980.0, preroll_us: float = 40.0) -> dict:
    return {
        "empty_device_us": event_us,
        "wall_gap_us": 10 * event_us,
        "tail_gap_us": 2 * event_us,
        "harness_dispatch_us": 5 * event_us,
        "preroll_us": preroll_us,
        "spin_cycles_per_us": spin,
    }


class Worker:
    """Answers `calibrate` with a fixed calibration; records how many calls it was asked for."""

    def __init__(self, answer: dict):
        self.answer = answer
        self.calls: list[int] = []

    def request(self, op, timeout_s, **fields):
        assert op is Op.CALIBRATE and fields["flush_bytes"] == FLUSH
        self.calls.append(fields["calls"])
        return SimpleNamespace(payload=dict(self.answer))


def judge(shared: SharedCalibration, reference: bool) -> SubmissionJudge:
    made = SubmissionJudge.__new__(SubmissionJudge)
    made.modules = SimpleNamespace(calibration=shared)
    made.submission = None if reference else "submission.py"
    return made


def test_nothing_is_shared_before_a_reference_worker_calibrates():
    shared = SharedCalibration()
    assert shared.figures(FLUSH) is None
    shared.add(FLUSH, calibration(1.3))
    assert shared.figures(FLUSH)["empty_device_us"] == 1.3
    assert shared.figures(2 * FLUSH) is None  # another flush: another GPU's


def test_shared_figures_are_each_the_median_of_the_reference_workers():
    shared = SharedCalibration()
    for event_us, preroll in [(1.2, 30.0), (9.0, 45.0), (1.3, 200.0)]:
        shared.add(FLUSH, calibration(event_us, preroll_us=preroll))
    figures = shared.figures(FLUSH)
    assert figures["empty_device_us"] == 1.3
    assert figures["wall_gap_us"] == pytest.approx(13.0)
    assert figures["preroll_us"] == 45.0
    assert "spin_cycles_per_us" not in figures  # each worker's GPU clock is its own


def test_a_reference_worker_calibrates_in_full_and_shares_it():
    shared = SharedCalibration()
    worker = Worker(calibration(1.3, preroll_us=500.0))
    own = judge(shared, reference=True)._calibrate(worker, FLUSH)
    assert worker.calls == [FULL_CALLS]
    assert own["calibrated_by"] == "own_worker"
    assert own["preroll_us"] == MAX_PREROLL_US  # bounded by the judge before it is shared
    assert shared.figures(FLUSH)["preroll_us"] == MAX_PREROLL_US


def test_a_candidate_before_the_reference_calibrates_alone_and_shares_nothing():
    shared = SharedCalibration()
    worker = Worker(calibration(50.0))
    own = judge(shared, reference=False)._calibrate(worker, FLUSH)
    assert worker.calls == [FULL_CALLS]
    assert own["calibrated_by"] == "own_worker" and own["empty_device_us"] == 50.0
    assert shared.figures(FLUSH) is None  # a candidate's figures never reach another's


def test_a_candidate_after_the_reference_warms_up_and_takes_its_figures():
    shared = SharedCalibration()
    judge(shared, reference=True)._calibrate(Worker(calibration(1.3)), FLUSH)
    # The candidate's worker would report an event pair ten times as costly (its threads
    # busy during the empty calls): what it reports, bar its spin rate, is not used.
    worker = Worker(calibration(13.0, spin=1755.0))
    used = judge(shared, reference=False)._calibrate(worker, FLUSH)
    assert worker.calls == [WARM_UP_CALLS]
    assert used["calibrated_by"] == "reference_workers"
    assert used["empty_device_us"] == 1.3 and used["wall_gap_us"] == pytest.approx(13.0)
    assert used["spin_cycles_per_us"] == 1755.0


def test_a_timing_record_says_whose_calibration_it_used():
    from pytest_kernelboard.judge.measure import Measurement
    from pytest_kernelboard.results.result_model import Timing

    m = Measurement(clock="cuda_event", samples_us=[10.0, 10.1, 10.2, 10.0, 10.1])
    m.calibrated_by = "reference_workers"
    record = m.to_record()
    assert record["calibrated_by"] == "reference_workers"
    assert Timing.from_json(record).to_json() == record
    assert "calibrated_by" not in Measurement(clock="host", samples_us=[1.0]).to_record()
