"""Multi-GPU cases on real GPUs, sandboxed as a runner has them: every rank's verdict, NCCL's
fast transports between the ranks of a case, and CUDA IPC handles exchanged between them.
Needs two CUDA devices and a working sandbox (KERNELBOARD_SANDBOX=require on a GPU runner)."""

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
from pytest_kernelboard.supervisor import sandbox
from pytest_kernelboard.supervisor.pool import WorkerPool


def gpu_count() -> int:
    if not devices.has_cuda():
        return 0
    import torch

    return torch.cuda.device_count()


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(gpu_count() < 2, reason="needs two CUDA devices"),
    pytest.mark.gpus(2),  # under -n: the lease of two whole GPUs (judge/gpu_lease.py)
]
ROOT = Path(__file__).resolve().parent.parent
ALLREDUCE = ROOT / "leaderboards" / "allreduce_scale"
GATHER_IPC = Path(__file__).parent / "fixtures" / "distributed_ipc" / "gather_ipc"
SOLUTIONS = [
    (ALLREDUCE, "correct/submission_pytorch.py", "passed"),
    (ALLREDUCE, "correct/submission_scale_first.py", "passed"),
    (ALLREDUCE, "wrong/submission_no_communication.py", "failed"),
    (ALLREDUCE, "wrong/submission_rank0_only.py", "failed"),
    (GATHER_IPC, "correct/submission_cuda_ipc.py", "passed"),
    (GATHER_IPC, "wrong/submission_own_part_only.py", "failed"),
]


@pytest.fixture(scope="module", autouse=True)
def sandboxed():
    reason = sandbox.probe()
    if reason is not None:
        pytest.fail(f"the multi-GPU sandbox test needs bubblewrap here: {reason}")


def judge_of(board: Path, solution: str):
    task = load_task(board / "task.yml")
    submission = board / "solutions" / solution
    return task, make_judge(task, LeaderboardModules(task), submission, True, WorkerPool())


@pytest.mark.parametrize(("board", "solution", "verdict"), SOLUTIONS)
def test_every_test_case_gets_the_solutions_verdict(board, solution, verdict):
    task, judge = judge_of(board, solution)
    try:
        outcomes = [judge.check_case(case, 120) for case in task_cases(task) if case.kind == TEST]
    finally:
        judge.close()
    if verdict == "passed":
        assert all(o.status == "passed" for o in outcomes), [o.message for o in outcomes]
    else:
        assert any(o.status == "failed" for o in outcomes)
        assert all(o.status in ("passed", "failed") for o in outcomes), [
            o.message for o in outcomes
        ]


@pytest.mark.parametrize(
    ("board", "solution"),
    [(ALLREDUCE, "correct/submission_pytorch.py"), (GATHER_IPC, "correct/submission_cuda_ipc.py")],
)
def test_a_timed_case_joins_its_ranks_by_nvlink_or_shared_memory_never_sockets(board, solution):
    task, judge = judge_of(board, solution)
    plan = TimingPlan(
        rule=StoppingRule(budget_s=5.0), warmup=Warmup(), flush_bytes=default_flush_bytes()
    )
    case = next(c for c in task_cases(task) if c.kind == BENCHMARK)
    try:
        outcome = judge.benchmark_case(case, 120, plan)
    finally:
        judge.close()
    assert outcome.status == "passed", outcome.message
    transports = outcome.timing["ranks"]["transports"]
    assert transports, "NCCL's log named no transport"
    assert all(t.startswith(("P2P", "SHM")) for t in transports), transports
    timing = outcome.timing
    assert timing["clock"] == "cuda_event"
    ranks = timing["ranks"]
    assert ranks["backend"] == "nccl" and ranks["world_size"] == 2
    assert len(timing["clocks_per_gpu"]["before"]) == 2
    for call, sample in enumerate(timing["samples_us"]):  # the slowest rank's time counts
        assert sample >= max(r[call] for r in ranks["samples_us"]) - 1e-3
    print(
        f"{task.name} {case.id}: mean {timing['mean_us']:.2f} us (slowest rank), "
        f"rank means {[round(m, 2) for m in ranks['mean_us']]}, transports {transports}"
    )


def test_a_rank_only_wrong_on_rank_one_fails_naming_it():
    task, judge = judge_of(ALLREDUCE, "wrong/submission_rank0_only.py")
    try:
        outcome = judge.check_case(next(c for c in task_cases(task) if c.kind == TEST), 120)
    finally:
        judge.close()
    assert outcome.status == "failed" and outcome.message.startswith("rank 1 of 2:")
