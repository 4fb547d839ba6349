"""Multi-GPU cases on real GPUs: NCCL over two ranks, each pinned to its own GPU.

Runs only where at least two CUDA devices are visible (e.g. a 2xH200 host).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.distributed import make_judge
from pytest_kernelboard.judge.measure import TimingPlan, default_flush_bytes
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, task_cases
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.worker.client import WorkerPool


def _gpus() -> int:
    if not devices.has_cuda():
        return 0
    import torch

    return torch.cuda.device_count()


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(_gpus() < 2, reason="needs at least two CUDA devices"),
]

BOARD = Path(__file__).resolve().parent.parent / "leaderboards" / "allreduce_scale"


@pytest.fixture(scope="module")
def task():
    return load_task(BOARD / "task.yml")


def judge(task, path: Path):
    return make_judge(task, LeaderboardModules(task), path, True, WorkerPool())


def test_correct_solution_passes_every_case_on_nccl(task):
    j = judge(task, BOARD / "solutions" / "correct" / "submission_pytorch.py")
    try:
        for case in task_cases(task):
            if case.kind == TEST:
                outcome = j.check_case(case, 120)
                assert outcome.passed, (case.id, outcome.message)
    finally:
        j.close()


def test_wrong_on_other_ranks_fails_on_nccl(task):
    j = judge(task, BOARD / "solutions" / "wrong" / "submission_rank0_only.py")
    try:
        outcome = j.check_case(next(c for c in task_cases(task) if c.kind == TEST), 120)
    finally:
        j.close()
    assert outcome.status == "failed" and outcome.message.startswith("rank 1 of 2:")


def test_timed_case_records_every_rank_and_every_gpu(task):
    j = judge(task, BOARD / "solutions" / "correct" / "submission_pytorch.py")
    plan = TimingPlan(
        rule=StoppingRule(budget_s=5.0), warmup=Warmup(), flush_bytes=default_flush_bytes()
    )
    case = next(c for c in task_cases(task) if c.kind == BENCHMARK)
    try:
        outcome = j.benchmark_case(case, 120, plan)
    finally:
        j.close()
    assert outcome.status == "passed", outcome.message
    timing = outcome.timing
    assert timing["clock"] == "cuda_event"
    ranks = timing["ranks"]
    assert ranks["backend"] == "nccl" and ranks["world_size"] == 2
    assert len(timing["clocks_per_gpu"]["before"]) == 2
    for call, sample in enumerate(timing["samples_us"]):
        assert sample >= max(r[call] for r in ranks["samples_us"]) - 1e-3
    print(
        f"allreduce_scale {case.id}: mean {timing['mean_us']:.2f} us (slowest rank), "
        f"rank means {[round(m, 2) for m in ranks['mean_us']]}"
    )
