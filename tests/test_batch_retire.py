"""A judged candidate's worker is kept through the next candidate's timed case, stopped, and
killed right after it (batch/judge.py, BatchJudge._retire): its exit, a CUDA context's teardown
on a GPU, goes beside that candidate's census instead of before its timed case.

The judge here is a real BatchJudge with only what these methods use set; the workers are real
processes whose command line names the worker's module, as pausing.py finds workers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_kernelboard.batch.judge import BatchJudge
from pytest_kernelboard.batch.phases import PhaseClock
from pytest_kernelboard.judge.core import CaseOutcome, case_name
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case
from pytest_kernelboard.supervisor.proctree import process_state

CASES = [Case(TEST, 0, {"seed": 1}), Case(BENCHMARK, 0, {"seed": 2})]


class FakeCandidate:
    """A judged candidate: one worker process (idle, as between requests) and its folder."""

    def __init__(self, folder: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)", "pytest_kernelboard.worker.main"]
        )
        folder.mkdir()
        self.ref = SimpleNamespace(path=folder / "submission.py")
        self.judge = SimpleNamespace()
        self.closed_at: float | None = None
        self.states_during_run: list[str | None] = []  # of the other candidates' workers

    def workers(self) -> list[SimpleNamespace]:
        alive = self.process.poll() is None
        return [SimpleNamespace(process=self.process)] if alive else []

    def cases(self) -> list[Case]:
        return CASES

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.closed_at = time.perf_counter()


def judge(mode: str = "benchmark", use_cuda: bool = True, small: bool = True) -> BatchJudge:
    made = BatchJudge.__new__(BatchJudge)
    made.mode = mode
    made.task = None
    frugal = {case_name(case): not small for case in CASES}
    made.session = SimpleNamespace(
        use_cuda=use_cuda, modules=lambda task: SimpleNamespace(frugal_cases=frugal)
    )
    made._retired = None
    made._closing = []
    made._clocks = {}
    return made


@pytest.fixture
def candidates(tmp_path):
    made: list[FakeCandidate] = []

    def make() -> FakeCandidate:
        made.append(FakeCandidate(tmp_path / f"c{len(made)}"))
        return made[-1]

    yield make
    for candidate in made:
        if candidate.process.poll() is None:
            candidate.close()


def test_the_last_judged_worker_is_stopped_through_the_next_timed_case_and_killed_after_it(
    candidates,
):
    batch = judge()
    first, second = candidates(), candidates()
    batch._retire(first)
    assert batch._retired is first and first.closed_at is None, "killed before the next case"
    states: list[str | None] = []

    def timed_case(case, checked):
        states.append(process_state(first.process.pid))
        return CaseOutcome("passed")

    second.run = timed_case
    outcome = batch._timed_case(second, CASES[1], None, PhaseClock(), [])
    assert outcome.passed
    assert states == ["T"], "the kept worker ran beside the timed case"
    batch._closed()
    assert first.closed_at is not None, "the kept worker outlived the timed case after it"
    assert batch._retired is None


def test_one_worker_is_kept_at_most_and_the_batch_end_kills_it(candidates):
    batch = judge()
    first, second = candidates(), candidates()
    batch._retire(first)
    batch._retire(second)  # no timed case between them: the first goes now
    batch._closed()
    assert first.closed_at is not None and second.closed_at is None
    batch._close_retired()
    batch._closed()
    assert second.closed_at is not None


@pytest.mark.parametrize(
    "settings",
    [
        {"mode": "test"},  # no timed case is to come
        {"use_cuda": False},  # a CPU worker's exit is no device work
        {"small": False},  # a frugal case's memory is not to be held beside the next
    ],
)
def test_a_worker_that_need_not_or_must_not_be_kept_is_killed_at_once(candidates, settings):
    batch = judge(**settings)
    first = candidates()
    batch._retire(first)
    batch._closed()
    assert batch._retired is None and first.closed_at is not None
