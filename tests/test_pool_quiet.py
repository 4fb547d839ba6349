"""A pool is quiet while a case is timed: its spares paused, none started, no other thread's take.

Spares here are sleeping Python processes whose command line names the worker's module, as a
worker's does (supervisor/pausing.py finds workers by it); the pool's start of a worker is
replaced by starting one of them.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.supervisor import pool as pool_module
from pytest_kernelboard.supervisor.proctree import process_state

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)", "pytest_kernelboard.worker.main"]
STOPPED = ("T", "t")


class SleeperWorker:
    """What the pool needs of a worker: its process, whether it lives, how it ends."""

    def __init__(self, **_: object) -> None:
        self.process = subprocess.Popen(SLEEPER)
        deadline = time.monotonic() + 10
        cmdline = Path(f"/proc/{self.process.pid}/cmdline")
        while b"pytest_kernelboard.worker.main" not in cmdline.read_bytes():
            assert time.monotonic() < deadline, "a sleeper never showed its command line"
            time.sleep(0.005)

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self, timeout_s: float = 1.0) -> None:
        self.discard()

    def discard(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(pool_module, "WorkerProcess", SleeperWorker)
    made = pool_module.WorkerPool(spares=2)
    made.prestart()
    yield made
    made.close()


def states(workers) -> list[str | None]:
    return [process_state(w.process.pid) for w in workers]


def test_spares_are_paused_while_quiet_and_go_on_after(pool):
    spares = pool.spare_workers()
    assert len(spares) == 2
    with pool.quiet():
        assert all(state in STOPPED for state in states(spares))
    assert not any(state in STOPPED for state in states(spares))


def test_no_spare_starts_while_quiet_and_the_pool_fills_up_after(pool):
    with pool.quiet():
        taken = pool.take()  # the timing thread itself may take one (a reference's worker)
        assert process_state(taken.process.pid) not in STOPPED  # what is taken runs
        assert len(pool.spare_workers()) == 1  # no replacement started meanwhile
    assert len(pool.spare_workers()) == 2
    taken.discard()


def test_another_threads_take_waits_until_the_timed_case_ends(pool):
    took_at: list[float] = []

    def take() -> None:
        took_at.append(time.monotonic())
        pool.take().discard()
        took_at.append(time.monotonic())

    with pool.quiet():
        quiet_since = time.monotonic()
        thread = threading.Thread(target=take)
        thread.start()
        time.sleep(0.3)
        assert len(took_at) == 1, "a worker was taken while a case was timed"
        quiet_until = time.monotonic()
    thread.join(10)
    assert len(took_at) == 2
    assert took_at[1] >= quiet_until > quiet_since


def test_quiet_is_reentrant_in_its_thread(pool):
    spares = pool.spare_workers()
    with pool.quiet():
        with pool.quiet():
            assert all(state in STOPPED for state in states(spares))
        assert all(state in STOPPED for state in states(spares))  # the outer scope still holds
    assert not any(state in STOPPED for state in states(spares))


class Pool:
    """A pool that says whether it is quiet now."""

    quiet_now = False

    @contextmanager
    def quiet(self):
        Pool.quiet_now = True
        try:
            yield
        finally:
            Pool.quiet_now = False


def test_a_judge_times_its_case_with_the_pool_quiet(monkeypatch):
    """SubmissionJudge.time_case holds the pool quiet for the calibration and the timed calls."""
    seen: list[bool] = []

    judge = SubmissionJudge.__new__(SubmissionJudge)
    judge.pool = Pool()
    monkeypatch.setattr(judge, "worker", lambda: object(), raising=False)
    monkeypatch.setattr(
        judge, "_time_case", lambda *args: seen.append(Pool.quiet_now) or "timed", raising=False
    )
    assert judge.time_case(None, None, 1.0) == "timed"
    assert seen == [True]
    assert not Pool.quiet_now


def test_a_kernel_census_is_taken_with_the_pool_quiet(monkeypatch):
    """A census's kernel durations are held against the timed calls' (census_exceeds_timing):
    no spare starts beside it either."""
    quiet_during_request: list[bool] = []

    class Worker:
        def private_copy(self, data):
            return data

        def request(self, op, timeout_s, **fields):
            quiet_during_request.append(Pool.quiet_now)
            return type("Reply", (), {"payload": {"kernels": [("gemm", 2700.0)]}})()

    from pytest_kernelboard.judge import core

    judge = SubmissionJudge.__new__(SubmissionJudge)
    judge.pool = Pool()
    judge.use_cuda = True
    monkeypatch.setattr(judge, "worker", lambda: Worker(), raising=False)
    monkeypatch.setattr(judge, "generate_or_not_run", lambda case, index: [1.0], raising=False)
    monkeypatch.setattr(judge, "settle", lambda: None, raising=False)
    monkeypatch.setattr(
        judge, "verified", lambda worker, case, pristine, output: (True, ""), raising=False
    )
    monkeypatch.setattr(core, "own", lambda reply: [1.0])
    monkeypatch.setattr(core, "is_frugal", lambda data: False)
    assert judge.kernel_census(None, 1.0) == [("gemm", 2700.0)]
    assert quiet_during_request == [True]
    assert not Pool.quiet_now
