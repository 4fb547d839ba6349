"""A case's output size, learnt from a passed output, sizes the next fresh worker's outbound
window before its first call of that case: its reply then crosses through the window instead of
as host copies (0.3 s of a 32 MB output on an H200, in a shared turn of every candidate).

The window itself exists only on a GPU (tests/test_window_gpu.py); here the judge's side: what it
learns, from which outputs, and what it tells a fresh worker."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.evaluation.session import JudgingSession
from pytest_kernelboard.judge.core import case_name
from pytest_kernelboard.spec.cases import TEST
from pytest_kernelboard.spec.discovery import SubmissionRef, load_catalog
from pytest_kernelboard.supervisor.client import WorkerProcess

GOOD = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"
WRONG = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 2)\n    return out\n"
OUTGREW = 123_456  # what the fake window says a reply needed beyond it


@pytest.fixture
def told(monkeypatch) -> list[tuple[int, int]]:
    """(worker pid, bytes) for each time the judge said how large a reply will be; every reply
    reads as having outgrown its window by OUTGREW."""
    said: list[tuple[int, int]] = []
    monkeypatch.setattr(
        WorkerProcess, "expect_reply", lambda self, n: said.append((self.process.pid, n))
    )
    monkeypatch.setattr(WorkerProcess, "reply_outgrew", property(lambda self: OUTGREW))
    return said


def judged_in_turn(tmp_path: Path, sources: list[str]) -> tuple[list[list[tuple]], dict]:
    """Each source's test cases, one candidate after another in one session (its own worker
    each): the expect_reply calls each candidate's worker got, and what the session learnt."""
    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    task = load_catalog(root).get("addone")
    session = JudgingSession("test", root)
    outcomes = []
    try:
        for index, source in enumerate(sources):
            path = tmp_path / f"c{index}" / "submission.py"
            path.parent.mkdir()
            path.write_text(source)
            evaluation = session.evaluation(task, SubmissionRef(path, task.name, f"c{index}"))
            cases = [c for c in evaluation.cases() if c.kind == TEST]
            outcomes.append([evaluation.run(case).status for case in cases])
            evaluation.close()
        return outcomes, dict(session.modules(task).reply_bytes), cases
    finally:
        session.close()


def test_a_passed_outputs_size_is_told_to_the_next_candidates_worker(tmp_path, told):
    outcomes, learnt, cases = judged_in_turn(tmp_path, [WRONG, GOOD, GOOD])
    assert outcomes == [["failed"] * len(cases), ["passed"] * len(cases), ["passed"] * len(cases)]
    names = [case_name(c) for c in cases]
    assert learnt == dict.fromkeys(names, OUTGREW)  # from the passed outputs only
    by_worker: dict[int, list[int]] = {}
    for pid, nbytes in told:
        by_worker.setdefault(pid, []).append(nbytes)
    wrong, first, second = by_worker.values()
    # A wrong output's size is not learnt: the first correct candidate is told nothing of it.
    assert wrong == [0] * len(cases) and first == [0] * len(cases)
    assert second == [OUTGREW] * len(cases)


def test_the_references_fresh_workers_are_told_the_reply_size_before_their_first_timed_call(
    tmp_path, told
):
    """The reference's workers time a case with no correctness call before it: each one's first
    timed call is told the size the candidates' passed outputs taught (at KernelBench L2 12's
    size, 0.37 s of host copies in each of the reference's five fresh workers otherwise)."""
    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    task = load_catalog(root).get("addone")
    session = JudgingSession("benchmark", root, reference_workers=2)
    try:
        path = tmp_path / "c" / "submission.py"
        path.parent.mkdir()
        path.write_text(GOOD)
        evaluation = session.evaluation(task, SubmissionRef(path, task.name, "c"))
        case = next(c for c in evaluation.cases() if c.kind != TEST)
        outcome = evaluation.run(case)
        assert outcome.passed and outcome.reference_timing is not None
        evaluation.close()
    finally:
        session.close()
    by_worker: dict[int, list[int]] = {}
    for pid, nbytes in told:
        by_worker.setdefault(pid, []).append(nbytes)
    candidate, *references = by_worker.values()
    assert candidate[0] == 0  # its check came first, before anything was learnt
    assert len(references) == 2  # the reference's two fresh workers
    for told_first in references:
        assert told_first[0] == OUTGREW


class FakeWindow:
    """A device window as the crossing sees it: a size (at least one 2 MiB granule)."""

    def __init__(self, size: int, device: int) -> None:
        self.size, self.device = max(size, 2 << 20), device

    def export_fd(self) -> int:
        return os.open(os.devnull, os.O_RDONLY)

    def close(self) -> None:
        pass


@pytest.mark.parametrize("windows_before", [True, False], ids=["kept", "made-anew"])
def test_an_expected_reply_grows_the_outbound_window_before_its_request(
    monkeypatch, windows_before
):
    """Told a reply's size, the crossing grows the outbound window as it encodes the request,
    whether the windows are there already or are made for this request (released after a
    large case, or a fresh worker's first): the replies to the window hand-overs themselves,
    which came back with nothing to grow, do not forget it."""
    from pytest_kernelboard.channel import transport, window
    from pytest_kernelboard.supervisor.crossing import TensorCrossing

    monkeypatch.setattr(window.Window, "create", staticmethod(FakeWindow))
    handed: list[tuple[str, int]] = []
    crossing: TensorCrossing

    def request(op, timeout_s, *, pass_fd, direction, size, device):
        handed.append((direction, size))
        crossing.outbound_needed = 0  # what decoding the hand-over's reply leaves

    crossing = TensorCrossing(0, False, request, lambda: transport.HOST)
    crossing.transport = transport.WINDOW
    if windows_before:
        crossing.windows = {"in": FakeWindow(0, 0), "out": FakeWindow(0, 0)}
    expected = 16 << 20
    crossing.expect_reply(expected)
    crossing.encode({"op": "call", "data": 1}, {})
    assert crossing.windows["out"].size >= expected
    assert handed[-1][0] == "out" and handed[-1][1] >= expected
    handed.clear()
    crossing.encode({"op": "call", "data": 1}, {})  # told once: the window is kept, not regrown
    assert handed == []


def test_a_passed_reply_larger_than_a_kept_window_is_not_told_to_others(tmp_path, monkeypatch):
    """A passed output whose storage is far larger than a window keeps (a view of a huge
    buffer) is not learnt: every later candidate's worker would have held a window that large."""
    from pytest_kernelboard.channel import window

    said: list[int] = []
    monkeypatch.setattr(WorkerProcess, "expect_reply", lambda self, n: said.append(n))
    huge = window.KEPT_WINDOW_MAX + 1
    monkeypatch.setattr(WorkerProcess, "reply_outgrew", property(lambda self: huge))
    outcomes, learnt, cases = judged_in_turn(tmp_path, [GOOD, GOOD])
    assert outcomes == [["passed"] * len(cases)] * 2
    assert learnt == {} and said == [0] * (2 * len(cases))
