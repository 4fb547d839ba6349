"""A hung correctness call set aside while other candidates are timed: its worker stopped, its
stop left out of its timeout, and the candidates behind it judged meanwhile."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_kernelboard.batch import Candidate, judge_many
from pytest_kernelboard.batch import turns as turns_module
from pytest_kernelboard.batch.turns import GpuTurns
from pytest_kernelboard.supervisor import aside
from pytest_kernelboard.supervisor.pausing import go_on, stop
from pytest_kernelboard.supervisor.proctree import process_state

GOOD = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"
HANG = "import time\n\ndef custom_kernel(data):\n    while True:\n        time.sleep(0.05)\n"
STOPPED = ("T", "t")


@pytest.fixture
def sleeper():
    """A process standing in for a worker whose call hangs."""
    process = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def quick_staleness(monkeypatch):
    monkeypatch.setattr(turns_module, "STALE_AFTER_S", 0.2)
    monkeypatch.setattr(turns_module, "RETRY_AFTER_S", 0.2)


def quiet_answering(answer: bool):
    """A `quiet` that answers `answer`, and the moments it was asked about."""
    asked: list[float] = []

    def quiet(since: float) -> bool:
        asked.append(since)
        return answer

    return quiet, asked


class Call:
    """A thread's shared turn, waiting on `pid`'s reply until `release` is set."""

    def __init__(self, turns: GpuTurns, pid: int) -> None:
        self.turns, self.pid = turns, pid
        self.waiting, self.release = threading.Event(), threading.Event()
        self.ended_at: float | None = None
        self.stopped_s: float | None = None
        self.thread = threading.Thread(target=self.run)
        self.thread.start()
        assert self.waiting.wait(5)

    def run(self) -> None:
        with self.turns.shared():
            holder = aside.current()
            assert holder is not None, "a shared turn lets its calls be set aside"
            holder.begin(self.pid)
            self.waiting.set()
            self.release.wait(10)
            holder.end()
            self.ended_at = time.perf_counter()
            self.stopped_s = holder.stopped_s()

    def finish(self) -> None:
        self.release.set()
        self.thread.join(10)


def test_a_stale_call_is_set_aside_and_its_stop_is_not_its_own(sleeper, quick_staleness):
    quiet, asked = quiet_answering(True)
    turns = GpuTurns(quiet=quiet)
    call = Call(turns, sleeper.pid)
    started = time.perf_counter()
    with turns.exclusive():
        got_at = time.perf_counter()
        assert process_state(sleeper.pid) in STOPPED, "the hung call's worker runs on"
        go_on(stop([sleeper.pid]))  # as the timed case pauses every other worker
        assert process_state(sleeper.pid) in STOPPED, "pausing let a call set aside go on"
        call.release.set()  # its reply came: its thread waits until the turn ends
        time.sleep(0.3)
        assert call.ended_at is None, "a call set aside went on during the timed case"
        left_at = time.perf_counter()
    call.thread.join(10)
    assert 0.2 <= got_at - started < 2.0, "the timed case waited for the hung call's end"
    assert len(asked) == 1 and turns.set_aside_count == 1
    assert call.ended_at is not None and call.ended_at >= left_at
    assert call.stopped_s == pytest.approx(call.ended_at - got_at, abs=0.1)
    assert process_state(sleeper.pid) not in STOPPED


def test_a_call_whose_device_is_busy_is_waited_for_and_tried_again(sleeper, quick_staleness):
    quiet, asked = quiet_answering(False)
    turns = GpuTurns(quiet=quiet)
    call = Call(turns, sleeper.pid)
    threading.Timer(0.9, call.release.set).start()
    with turns.exclusive():
        assert call.ended_at is not None, "the timed case began beside a busy call"
        assert process_state(sleeper.pid) not in STOPPED
    call.thread.join(10)
    assert len(asked) >= 2, "the call was not tried again after RETRY_AFTER_S"
    assert turns.set_aside_count == 0
    # Each try stopped its worker, and the stops are left out of its timeout too.
    assert 0 < call.stopped_s < 0.9


def test_a_young_call_and_a_judge_without_quiet_are_waited_for(sleeper, quick_staleness):
    quiet, asked = quiet_answering(True)
    young = GpuTurns(quiet=quiet)
    call = Call(young, sleeper.pid)
    threading.Timer(0.1, call.release.set).start()
    with young.exclusive():
        assert call.ended_at is not None
    assert not asked and young.set_aside_count == 0

    plain = GpuTurns()
    call = Call(plain, sleeper.pid)
    threading.Timer(0.6, call.release.set).start()
    with plain.exclusive():
        assert call.ended_at is not None
    call.thread.join(10)
    assert call.stopped_s == 0.0


def test_a_call_set_aside_stays_stopped_through_nested_turns(sleeper, quick_staleness):
    """The reference timed inside a candidate's case, its correctness calls in shared turns
    inside: the worker set aside goes on only when the outermost turn ends."""
    turns = GpuTurns(quiet=quiet_answering(True)[0])
    call = Call(turns, sleeper.pid)
    with turns.exclusive():
        with turns.exclusive(), turns.shared():
            pass
        assert process_state(sleeper.pid) in STOPPED
    call.finish()
    assert process_state(sleeper.pid) not in STOPPED


@pytest.fixture(scope="module")
def batch_with_a_hang(tmp_path_factory):
    """Benchmark mode: four good candidates, one that hangs in its first call (a 4 s test
    timeout), and four more good ones; each candidate's judging start and end, and each
    shared turn's call: how long it took and how long its worker was stopped."""
    from pytest_kernelboard.batch.judge import BatchJudge

    root = tmp_path_factory.mktemp("aside") / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    task_yml = root / "leaderboards" / "addone" / "task.yml"
    task_yml.write_text(task_yml.read_text().replace("test_timeout: 20", "test_timeout: 4"))
    judged: dict[str, tuple[float, float]] = {}
    judge_one = BatchJudge._judge_one
    calls: list[tuple[float, float]] = []  # each call's seconds from its start, and stopped
    began: dict[int, float] = {}
    begin, end = turns_module._SharedTurn.begin, turns_module._SharedTurn.end

    def timed_judge_one(self, candidate, evaluation, others):
        started = time.perf_counter()
        try:
            return judge_one(self, candidate, evaluation, others)
        finally:
            judged[candidate.id] = (started, time.perf_counter())

    def first_begin(self, root_pid):
        began.setdefault(id(self), time.perf_counter())
        begin(self, root_pid)

    def counted_end(self):
        end(self)
        if id(self) in began:
            calls.append((time.perf_counter() - began.pop(id(self)), self.stopped_total))

    # The hang comes fifth: it arrives as the first is judged (four are prepared at once), by
    # when a judge has made the cases' inputs (each small?), so its calls are made ahead.
    sources = [GOOD] * 4 + [HANG] + [GOOD] * 4
    candidates = [
        Candidate("hang.py" if source is HANG else f"c{i}.py", f"# {i}\n{source}")
        for i, source in enumerate(sources)
    ]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BatchJudge, "_judge_one", timed_judge_one)
        patch.setattr(turns_module._SharedTurn, "begin", first_begin)
        patch.setattr(turns_module._SharedTurn, "end", counted_end)
        started = time.perf_counter()
        records = list(judge_many("addone", candidates, mode="benchmark", root=root, gpus=[]))
        took = time.perf_counter() - started
    return records, judged, calls, took


def test_the_candidates_behind_a_hung_call_are_judged_meanwhile(batch_with_a_hang):
    records, judged, _, _ = batch_with_a_hang
    ids = ["c0.py", "c1.py", "c2.py", "c3.py", "hang.py", "c5.py", "c6.py", "c7.py", "c8.py"]
    assert [r["id"] for r in records] == ids  # in the order they came
    assert [r["status"] for r in records] == ["passed"] * 4 + ["error"] + ["passed"] * 4
    hang = records[4]
    assert hang["error_kind"] == "timeout" and "4" in hang["message"], hang["message"]
    # Judged while the hung call waited out its timeout, not after it.
    hang_started = judged["hang.py"][0]
    behind = [judged[f"c{i}.py"][1] for i in range(5, 9)]
    assert max(behind) < hang_started, "the candidates behind the hang waited for its timeout"
    for record in records[5:]:
        assert record["phases"]["timing"] > 0


def test_a_call_set_aside_keeps_its_whole_timeout(batch_with_a_hang):
    """The hung call was stopped while the others were timed, and those seconds were added to
    its 4 s: it timed out after 4 s of its own time, not of the clock's."""
    _, _, calls, _ = batch_with_a_hang
    set_aside = [(took, stopped) for took, stopped in calls if stopped > 0]
    assert len(set_aside) == 1, calls
    ((took, stopped),) = set_aside
    assert 4.0 + stopped - 0.05 <= took <= 4.0 + stopped + 1.0
    assert stopped > 0.1  # four timed cases' worth


def test_a_failed_look_at_the_device_leaves_the_call_running(sleeper, quick_staleness):
    """NVML failing mid-check counts as a busy device: the worker goes on, nothing is stuck."""

    def failing(since: float) -> bool:
        raise RuntimeError("NVML went away")

    turns = GpuTurns(quiet=failing)
    call = Call(turns, sleeper.pid)
    threading.Timer(0.6, call.release.set).start()
    with turns.exclusive():
        assert call.ended_at is not None
    call.thread.join(10)
    assert process_state(sleeper.pid) not in STOPPED
    assert turns.set_aside_count == 0


def test_a_stream_s_next_candidates_are_taken_while_one_hangs(tmp_path):
    """As a GPU's judge process gets them (gpu_judge.py): candidates come one at a time, the
    next only once a record is out. The ones that come while an earlier one hangs are taken
    and judged meanwhile, their records out before the hung one's."""
    from queue import Queue

    from pytest_kernelboard.batch.judge import BatchJudge, find_task

    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    task_yml = root / "leaderboards" / "addone" / "task.yml"
    task_yml.write_text(task_yml.read_text().replace("test_timeout: 20", "test_timeout: 8"))
    task, root = find_task("addone", root)
    judge = BatchJudge(task, "benchmark", root, 10.0, prefetch=2)
    sources = [GOOD] * 3 + [HANG] + [GOOD] * 5
    queued: Queue = Queue()
    for i in range(5):  # three in flight beyond the first two, as the parent keeps them
        queued.put(Candidate("hang.py" if sources[i] is HANG else f"c{i}.py", sources[i]))
    sent = 5

    def stream():
        while (candidate := queued.get()) is not None:
            yield candidate

    out: list[tuple[str, float]] = []
    try:
        for _, record in judge.judge_as_done(stream()):
            out.append((record["id"], time.perf_counter()))
            if sent < len(sources):  # the parent sends the next one for each record back,
                # which reaches the judge a moment later
                candidate = Candidate(f"c{sent}.py", f"# {sent}\n{sources[sent]}")
                threading.Timer(3.0, queued.put, args=(candidate,)).start()
                sent += 1
            elif len(out) == len(sources):
                queued.put(None)
    finally:
        judge.close()
    ids = [name for name, _ in out]
    assert sorted(ids) == sorted(["hang.py", *(f"c{i}.py" for i in (0, 1, 2, 4, 5, 6, 7, 8))])
    assert ids[-1] == "hang.py", f"the candidates sent after the hang waited for it: {ids}"
