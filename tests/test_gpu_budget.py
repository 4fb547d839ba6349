"""The GPU's shared memory budget: who may start, who waits, what never fits (CPU tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from pytest_kernelboard.judge.gpu_budget import (
    CONTEXTS_PER_PROCESS,
    GiB,
    GpuBudget,
    decide,
    is_out_of_memory,
)


def test_a_case_starts_when_it_fits_beside_the_others():
    others = [{"bytes": 30 * GiB, "active": True}, {"bytes": 20 * GiB, "active": True}]
    assert decide(25 * GiB, 79 * GiB, others, alone=False).start
    waits = decide(30 * GiB, 79 * GiB, others, alone=False)
    assert not waits.start and waits.fits_alone and waits.others_bytes == 50 * GiB


def test_a_case_running_alone_blocks_every_other_and_alone_waits_for_all():
    alone = [{"bytes": 79 * GiB, "alone": True, "active": True}]
    assert not decide(1 * GiB, 79 * GiB, alone, alone=False).start
    busy = [{"bytes": 1 * GiB, "active": True}]
    assert not decide(79 * GiB, 79 * GiB, busy, alone=True).start
    idle = [{"bytes": 0, "active": False}]
    assert decide(79 * GiB, 79 * GiB, idle, alone=True).start


def test_what_does_not_fit_alone_is_said_so():
    assert not decide(90 * GiB, 79 * GiB, [], alone=False).fits_alone
    budget = GpuBudget("x", 80 * GiB, free_bytes=lambda: 12 * GiB)
    message = budget.too_large(41 * GiB)
    assert (
        message == "not run: the case needs 41.0 GiB at its peak; this GPU has 80 GiB, 12 GiB free"
    )


@pytest.mark.parametrize(
    "text",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB",
        "CudaDriverError: cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY",
    ],
)
def test_out_of_memory_is_recognised(text):
    assert is_out_of_memory(text)
    assert not is_out_of_memory("ValueError: shapes do not match")


@pytest.fixture
def other_process():
    """A live process that holds a share of the ledger (any live pid counts as a holder)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


def _hold(budget: GpuBudget, pid: int, nbytes: int, alone: bool = False) -> None:
    with budget._locked() as entries:
        entries[str(pid)] = {"bytes": nbytes, "alone": alone, "active": nbytes > 0}


def test_a_case_waits_for_room_and_starts_once_the_other_lets_go(tmp_path, other_process):
    budget = GpuBudget("gpu0", 40 * GiB + 2 * CONTEXTS_PER_PROCESS, folder=tmp_path)
    _hold(budget, other_process, 30 * GiB)
    notes: list[tuple[int, int]] = []
    started = threading.Event()

    def case() -> None:
        with budget.held(20 * GiB, waiting=lambda need, held: notes.append((need, held))):
            started.set()

    thread = threading.Thread(target=case)
    thread.start()
    time.sleep(1.0)
    assert not started.is_set()  # 30 + 20 GiB does not fit 40 GiB: it waits
    assert notes == [(20 * GiB, 30 * GiB)]  # and says so, once
    _hold(budget, other_process, 0)
    thread.join(timeout=10)
    assert started.is_set()
    entries = json.loads(budget.path.read_text())
    assert entries[str(budget.pid)] == {"bytes": 0, "alone": False, "active": False}


def test_a_dead_holders_share_is_dropped(tmp_path):
    budget = GpuBudget("gpu0", 40 * GiB + 2 * CONTEXTS_PER_PROCESS, folder=tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _hold(budget, dead.pid, 40 * GiB, alone=True)
    started = time.monotonic()
    with budget.held(20 * GiB):
        pass
    assert time.monotonic() - started < 1.0


def test_a_need_beyond_the_gpu_runs_alone(tmp_path, other_process):
    budget = GpuBudget("gpu0", 40 * GiB, folder=tmp_path)
    _hold(budget, other_process, 1 * GiB)
    done = threading.Event()

    def case() -> None:
        with budget.held(100 * GiB):
            done.set()

    thread = threading.Thread(target=case)
    thread.start()
    time.sleep(1.0)
    assert not done.is_set()  # any other active case keeps it waiting
    _hold(budget, other_process, 0)
    thread.join(timeout=10)
    assert done.is_set()


def test_learned_peaks_become_the_reservation():
    budget = GpuBudget("gpu0", 80 * GiB)
    assert budget.reservation("lb/benchmark/0") == 10 * GiB  # a first run: an eighth
    budget.learn("lb/benchmark/0", 23 * GiB)
    budget.learn("lb/benchmark/0", 21 * GiB)
    assert budget.reservation("lb/benchmark/0") == 23 * GiB
