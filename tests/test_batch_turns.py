"""Correctness side by side, timed work alone: the batch judge's turns on its device, and the
checks it makes ahead of a candidate's turn."""

from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_kernelboard.batch import Candidate, gil_handoff, judge_many
from pytest_kernelboard.batch.turns import GpuTurns

GOOD = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"
WRONG = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 2)\n    return out\n"


def test_shared_turns_run_side_by_side():
    turns = GpuTurns()
    inside = threading.Barrier(3, timeout=5)  # all three must be inside at once

    def work() -> None:
        with turns.shared():
            inside.wait()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert not inside.broken


def test_the_exclusive_turn_waits_for_shared_work_in_flight_and_holds_off_new_work():
    turns = GpuTurns()
    events: list[str] = []
    in_flight = threading.Event()
    release = threading.Event()

    def correctness_call() -> None:
        with turns.shared():
            events.append("call starts")
            in_flight.set()
            release.wait(5)
            events.append("call returns")

    def timed_case() -> None:
        with turns.exclusive():
            events.append("timed")
            time.sleep(0.2)
            events.append("timed ends")

    def late_call() -> None:
        with turns.shared():
            events.append("late call")

    first = threading.Thread(target=correctness_call)
    first.start()
    in_flight.wait(5)
    timer = threading.Thread(target=timed_case)
    timer.start()
    time.sleep(0.1)  # the timed case now waits for the call in flight
    late = threading.Thread(target=late_call)
    late.start()
    time.sleep(0.1)
    assert events == ["call starts"]  # neither the timed case nor a new call has started
    release.set()
    for thread in (first, timer, late):
        thread.join(timeout=10)
    assert events == ["call starts", "call returns", "timed", "timed ends", "late call"]


def test_work_meanwhile_overlaps_the_calls_in_flight_and_no_new_call_starts():
    """A timed case's `meanwhile` (the judged candidates' workers killed) runs while a
    correctness call in flight goes on; a call asked for meanwhile waits for the timed case."""
    turns = GpuTurns()
    events: list[str] = []
    in_flight, release, late_asked = threading.Event(), threading.Event(), threading.Event()

    def correctness_call() -> None:
        with turns.shared():
            in_flight.set()
            release.wait(5)
            events.append("call returns")

    def late_call() -> None:
        late_asked.set()
        with turns.shared():
            events.append("late call")

    def meanwhile() -> None:
        events.append("closing starts")
        threading.Thread(target=late_call).start()
        late_asked.wait(5)
        time.sleep(0.1)  # the late call now waits, as the turn is asked for
        release.set()  # the call in flight returns while the closing is under way
        time.sleep(0.1)
        events.append("closing ends")

    first = threading.Thread(target=correctness_call)
    first.start()
    in_flight.wait(5)
    with turns.exclusive(meanwhile=meanwhile):
        events.append("timed")
    first.join(timeout=10)
    for _ in range(100):
        if "late call" in events:
            break
        time.sleep(0.01)
    assert events == ["closing starts", "call returns", "closing ends", "timed", "late call"]


def test_work_meanwhile_that_fails_leaves_the_turns_free():
    turns = GpuTurns()

    def fails() -> None:
        raise RuntimeError("a worker would not die")

    with pytest.raises(RuntimeError, match="would not die"):
        with turns.exclusive(meanwhile=fails):
            pass
    entered = threading.Event()

    def call() -> None:
        with turns.shared():
            entered.set()

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(timeout=5)
    assert entered.is_set()  # nobody waits for the exclusive turn any more


def test_the_exclusive_holder_may_take_both_turns_again_inside():
    turns = GpuTurns()
    done = threading.Event()

    def reference_inside_a_timed_case() -> None:
        with turns.exclusive(), turns.exclusive(), turns.shared():
            done.set()

    thread = threading.Thread(target=reference_inside_a_timed_case)
    thread.start()
    thread.join(timeout=5)
    assert done.is_set()
    with turns.shared():  # and it is free again afterwards
        pass


@pytest.fixture(scope="module")
def batch_with_checks_ahead(tmp_path_factory) -> list[dict]:
    """Eight candidates in benchmark mode: the later ones are checked ahead of their turn."""
    root = tmp_path_factory.mktemp("turns") / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    sources = [GOOD, GOOD, GOOD, GOOD, GOOD, WRONG, GOOD, WRONG]
    candidates = [Candidate(f"c{i}.py", f"# {i}\n{s}") for i, s in enumerate(sources)]
    return list(judge_many("addone", candidates, mode="benchmark", root=root, gpus=[]))


def test_candidates_checked_ahead_get_the_verdicts_of_their_code(batch_with_checks_ahead):
    records = batch_with_checks_ahead
    assert [r["id"] for r in records] == [f"c{i}.py" for i in range(8)]  # in the order given
    statuses = [r["status"] for r in records]
    assert statuses == ["passed"] * 5 + ["failed", "passed", "failed"]
    # The first candidate is judged before any judge has made the cases' inputs; later ones
    # (once their inputs are known to be small) have their correctness calls made ahead, and
    # a passing one still gets its timing in its turn.
    assert "correctness_ahead" not in records[0]["phases"]
    checked_ahead = [r for r in records if "benchmark_check_ahead" in r["phases"]]
    assert any(r["status"] == "passed" for r in checked_ahead)
    for record in checked_ahead:
        assert "correctness_ahead" in record["phases"]
        if record["status"] == "passed":
            assert record["phases"]["timing"] > 0
            assert all(case["status"] == "passed" for case in record["cases"])
    wrong = records[7]
    assert wrong["failed_case"] and "timing" not in wrong["phases"]


def test_the_exclusive_turn_hands_the_gil_back_promptly(monkeypatch):
    """While a case is timed, another thread's hold on the GIL ends within 200 us of the timing
    thread asking for it, not Python's 5 ms; once no turn is held, Python's own interval is
    back, nested turns included."""
    monkeypatch.delenv(gil_handoff.VARIABLE, raising=False)
    python_own = sys.getswitchinterval()
    turns = GpuTurns()
    with turns.exclusive():
        assert sys.getswitchinterval() == pytest.approx(gil_handoff.SWITCH_US / 1e6)
        with turns.exclusive():  # the reference timed inside a candidate's case
            assert sys.getswitchinterval() == pytest.approx(gil_handoff.SWITCH_US / 1e6)
        assert sys.getswitchinterval() == pytest.approx(gil_handoff.SWITCH_US / 1e6)
    assert sys.getswitchinterval() == python_own
    with turns.shared():
        assert sys.getswitchinterval() == python_own


def test_the_gil_handoff_can_be_left_to_python_and_names_a_bad_value(monkeypatch):
    python_own = sys.getswitchinterval()
    monkeypatch.setenv(gil_handoff.VARIABLE, "0")
    with GpuTurns().exclusive():
        assert sys.getswitchinterval() == python_own
    monkeypatch.setenv(gil_handoff.VARIABLE, "fast")
    with pytest.raises(ValueError, match="KERNELBOARD_TIMING_SWITCH_US='fast'"):
        with GpuTurns().exclusive():
            pass
    assert sys.getswitchinterval() == python_own
