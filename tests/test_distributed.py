"""Multi-GPU leaderboards on CPU: gloo, two ranks, the whole path of distributed.py."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pytest_kernelboard.judge.core import CaseOutcome, SubmissionJudge
from pytest_kernelboard.judge.distributed import (
    CPU_MAX_WORLD_SIZE,
    DistributedJudge,
    answered_reference,
    make_judge,
    rank_summary,
)
from pytest_kernelboard.judge.measure import TimingPlan
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case, task_cases
from pytest_kernelboard.spec.task import TaskError, load_task
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor.client import WorkerProcess
from pytest_kernelboard.supervisor.environment import NO_MULTICAST, worker_environment
from pytest_kernelboard.supervisor.pool import WorkerPool

ROOT = Path(__file__).resolve().parent.parent
BOARD = ROOT / "leaderboards" / "allreduce_scale"
FIXTURES = Path(__file__).parent / "fixtures" / "distributed"


@pytest.fixture(scope="module")
def task():
    return load_task(BOARD / "task.yml")


@pytest.fixture(scope="module")
def modules(task):
    return LeaderboardModules(task)


def judge_for(task, modules, path: Path | None, entry: str = "custom_kernel"):
    return make_judge(task, modules, path, use_cuda=False, pool=WorkerPool(), entry=entry)


def case_of(task, size: int) -> Case:
    return next(c for c in task_cases(task) if c.kind == TEST and c.spec["size"] == size)


# -- task.yml ---------------------------------------------------------------------------------
def write_task(tmp_path: Path, cases: str) -> Path:
    (tmp_path / "reference.py").write_text("")
    path = tmp_path / "task.yml"
    path.write_text(
        "files:\n  - {name: submission.py, source: '@SUBMISSION@'}\n"
        "  - {name: reference.py, source: reference.py}\n"
        "description: d\nmulti_gpu: true\n" + cases
    )
    return path


@pytest.mark.parametrize(
    ("cases", "expected"),
    [
        ("tests:\n  - {size: 4}\n", "tests[0]: multi_gpu is true but the case has no world_size"),
        ("tests:\n  - {world_size: 2}\n  - {world_size: two}\n", "tests[1]: world_size must be"),
        ("tests:\n  - {world_size: 0}\n", "tests[0]: world_size must be a positive"),
        ("tests:\n  - {world_size: 2}\nbenchmarks:\n  - {world_size: true}\n", "benchmarks[0]"),
    ],
)
def test_world_size_errors_name_file_and_case(tmp_path, cases, expected):
    path = write_task(tmp_path, cases)
    with pytest.raises(TaskError) as error:
        load_task(path)
    assert str(path) in str(error.value) and expected in str(error.value)


def test_max_and_min_world_size(tmp_path):
    task = load_task(
        write_task(tmp_path, "tests:\n  - {world_size: 2}\nbenchmarks:\n  - {world_size: 8}\n")
    )
    assert (task.max_world_size, task.min_world_size) == (8, 2)


def test_make_judge_picks_by_leaderboard(task, modules):
    assert isinstance(judge_for(task, modules, None, "ref_kernel"), DistributedJudge)
    vectoradd = load_task(ROOT / "leaderboards" / "vectoradd" / "task.yml")
    judge = make_judge(vectoradd, LeaderboardModules(vectoradd), None, False, WorkerPool())
    assert type(judge) is SubmissionJudge


# -- NVLink multicast ---------------------------------------------------------------------------
def test_worker_environment_forces_multicast_off(tmp_path):
    parent = {"PATH": "/usr/bin", "NCCL_NVLS_ENABLE": "1", "NVSHMEM_DISABLE_NVLS": "0"}
    env = worker_environment(parent, tmp_path, tmp_path)
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert env["NVSHMEM_DISABLE_NVLS"] == "1"


def test_a_started_worker_runs_with_multicast_off(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # the runner's own setting does not leak through
    worker = WorkerProcess()
    try:
        worker.ping()  # started: /proc/<pid>/environ is empty while the process is still exec'ing
        raw = Path(f"/proc/{worker.process.pid}/environ").read_bytes()
        env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
        for name, value in NO_MULTICAST.items():
            assert env.get(name) == value, name
    finally:
        worker.close()


# -- ranks -------------------------------------------------------------------------------------
def test_every_rank_gets_its_own_input(task, modules):
    judge = judge_for(task, modules, None, "ref_kernel")
    inputs = judge.generate(case_of(task, 1000))
    assert len(inputs) == 2
    # rank-specific data: a local-only kernel fails (compared on the host: on GPUs rank r's
    # input lies on GPU r)
    assert not inputs[0][0].cpu().equal(inputs[1][0].cpu())


def test_case_asking_for_more_ranks_is_skipped_with_reason(task, modules):
    judge = judge_for(task, modules, None, "ref_kernel")
    big = CPU_MAX_WORLD_SIZE + 1
    case = Case(TEST, 0, {"world_size": big, "size": 8, "scale": 1.0, "seed": 1})
    outcome = judge.check_case(case, 30)
    assert outcome.status == "skipped"
    assert f"world_size={big}" in outcome.message and "never runs on fewer" in outcome.message
    assert outcome.message.startswith(f"needs {big} GPUs; the CPU cap is")
    assert judge._group is None  # nothing was started


def test_wrong_on_rank_one_only_fails_naming_the_rank(task, modules):
    judge = judge_for(task, modules, BOARD / "solutions" / "wrong" / "submission_rank0_only.py")
    try:
        outcome = judge.check_case(case_of(task, 1000), 60)
    finally:
        judge.close()
    assert outcome.status == "failed"
    assert outcome.message.startswith("rank 1 of 2:")


def test_a_rank_killed_mid_call_fails_that_case_alone(task, modules):
    judge = judge_for(task, modules, FIXTURES / "submission_rank1_stalls.py")
    try:
        assert judge.check_case(case_of(task, 1), 60).passed
        victim = judge._group.workers[1].process.pid
        threading.Timer(1.0, os.kill, (victim, signal.SIGKILL)).start()
        started = time.perf_counter()
        outcome = judge.check_case(case_of(task, 1000), 60)
        assert time.perf_counter() - started < 30  # not the 60 s limit: the death is seen
        assert outcome.status == "crashed"
        assert "rank 1 of 2" in outcome.message and "SIGKILL" in outcome.message
        assert "all 2 ranks were stopped" in outcome.message
        assert all(not w.alive for w in judge._group.workers)
        assert judge.check_case(case_of(task, 4099), 60).passed  # a fresh group
    finally:
        judge.close()


class _Peer:
    """A rank as the group sees it: alive until `dies_at` (perf_counter), None never dies."""

    def __init__(self, dies_at: float | None):
        self.dies_at = dies_at

    @property
    def alive(self) -> bool:
        return self.dies_at is None or time.perf_counter() < self.dies_at


def test_an_error_reply_waits_briefly_for_the_peer_whose_death_caused_it():
    # The peer's sockets close (and rank 0's collective fails) a moment before the peer reads
    # as exited: the death, not the error it caused, is the case's failure.
    from pytest_kernelboard.judge import distributed

    group = distributed.RankGroup.__new__(distributed.RankGroup)
    group.workers = [_Peer(None), _Peer(time.perf_counter() + 0.1)]
    assert group._dead_peer(0) == 1
    group.workers = [_Peer(None), _Peer(None)]
    started = time.perf_counter()
    assert group._dead_peer(0) is None  # the error is rank 0's own, after the grace
    assert time.perf_counter() - started >= distributed.PEER_DEATH_GRACE_S


def test_a_hanging_rank_times_out_and_every_rank_is_killed(task, modules):
    judge = judge_for(task, modules, FIXTURES / "submission_rank1_stalls.py")
    try:
        judge.group(case_of(task, 1000))  # start-up is not part of the call's limit
        outcome = judge.check_case(case_of(task, 1000), 2.0)
        assert outcome.status == "timeout"
        assert "rank(s) 0, 1" in outcome.message or "rank(s) 1" in outcome.message
        assert all(not w.alive for w in judge._group.workers)
    finally:
        judge.close()


def test_two_groups_at_once_do_not_collide_on_ports(task, modules):
    judges = [judge_for(task, modules, None, "ref_kernel") for _ in range(2)]
    outcomes: list = [None, None]

    def run(index: int) -> None:
        outcomes[index] = judges[index].check_case(case_of(task, 1000), 60)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
        assert [o.status for o in outcomes] == ["passed", "passed"], outcomes
        assert judges[0]._group.port != judges[1]._group.port
    finally:
        for judge in judges:
            judge.close()


def test_checks_at_once_each_see_their_own_answer_for_the_reference():
    """Two judges sharing a leaderboard's modules check ranks at once: one's stand-in for
    ref_kernel never answers the other's check, and the real one is back after both (on a
    2 x H200 host the second check once met the real ref_kernel and its all_reduce)."""
    import types

    def real(data):
        raise AssertionError("the real ref_kernel ran inside a check")

    shared = types.SimpleNamespace(reference=types.SimpleNamespace(ref_kernel=real))
    first_inside, second_inside, first_left = (threading.Event() for _ in range(3))
    seen: dict[str, object] = {}

    def first() -> None:
        with answered_reference(shared, "first"):
            first_inside.set()
            second_inside.wait(0.5)  # the second check is let in meanwhile, or waits its turn
            seen["first"] = shared.reference.ref_kernel(None)
        first_left.set()

    def second() -> None:
        first_inside.wait(5)
        with answered_reference(shared, "second"):
            second_inside.set()
            first_left.wait(1)  # the first check restores what it found as it leaves
            seen["second"] = shared.reference.ref_kernel(None)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == {"first": "first", "second": "second"}
    assert shared.reference.ref_kernel is real


def test_timed_case_reports_every_rank_and_counts_the_slowest(task, modules):
    judge = judge_for(task, modules, BOARD / "solutions" / "correct" / "submission_pytorch.py")
    plan = TimingPlan(
        rule=StoppingRule(min_samples=5, max_samples=12, min_time_s=0.0, budget_s=3.0),
        warmup=Warmup(max_calls=3),
        flush_bytes=0,
    )
    case = Case(BENCHMARK, 0, {"world_size": 2, "size": 4096, "scale": 0.5, "seed": 7})
    try:
        outcome = judge.benchmark_case(case, 60, plan)
    finally:
        judge.close()
    assert outcome.status == "passed", outcome.message
    timing = outcome.timing
    ranks = timing["ranks"]
    assert ranks["world_size"] == 2 and ranks["backend"] == "gloo"
    assert len(ranks["samples_us"][0]) == len(timing["samples_us"])
    for call, sample in enumerate(timing["samples_us"]):
        slowest = max(ranks["samples_us"][r][call] for r in range(2))
        assert sample == pytest.approx(slowest, abs=1e-3)
    assert sum(ranks["slowest_calls"]) == len(timing["samples_us"])
    assert timing["checked_calls"] >= 5


def test_rank_summary():
    summary = rank_summary([[1.0, 3.0], [4.0, 2.0], [5.0, 6.0]], 2, "nccl")
    assert summary["samples_us"] == [[1.0, 4.0, 5.0], [3.0, 2.0, 6.0]]
    assert summary["slowest_calls"] == [1, 2]
    assert summary["rank0_mean_us"] == pytest.approx(10 / 3)


def test_a_port_taken_before_rank_zero_binds_is_retried_with_a_fresh_one(
    task, modules, monkeypatch
):
    """Ranks on the host's network (no sandbox): a sandboxed case has a network of its own,
    where no other run takes its port."""
    import socket

    from pytest_kernelboard.judge import distributed
    from pytest_kernelboard.supervisor import sandbox

    monkeypatch.setattr(sandbox, "enabled", lambda: False)

    squatter = socket.socket()
    squatter.bind(("0.0.0.0", 0))  # another run holds this port (bound, not listening)
    taken = squatter.getsockname()[1]
    ports = iter([taken])
    real = distributed.free_port
    monkeypatch.setattr(distributed, "free_port", lambda: next(ports, None) or real())
    judge = judge_for(task, modules, None, "ref_kernel")
    try:
        assert judge.check_case(case_of(task, 1000), 60).passed
        assert judge._group.port != taken
    finally:
        judge.close()
        squatter.close()


CONFIG_REFERENCE = """
import dataclasses

import torch
import torch.distributed as dist


@dataclasses.dataclass
class Config:  # a class of the leaderboard's own in every rank's input (GPU MODE's all2all)
    scale: float


def generate_input(world_size, rank, size, seed):
    gen = torch.Generator().manual_seed(seed + rank)
    return Config(scale=2.0), torch.randn(size, generator=gen)


def ref_kernel(data):
    config, x = data
    total = x.clone()
    dist.all_reduce(total)
    return total * config.scale


def check_implementation(data, output):
    expected = ref_kernel(data)
    return (True, "") if torch.allclose(output, expected) else (False, "mismatch")
"""


def judged_on_cpu_board(folder: Path, submission: str, world_size: int) -> CaseOutcome:
    """One gloo case of a leaderboard whose inputs live on the CPU whatever the host has
    (allreduce_scale puts rank r on cuda:r where CUDA is)."""
    (folder / "reference.py").write_text(CONFIG_REFERENCE)
    (folder / "submission.py").write_text(submission)
    (folder / "task.yml").write_text(
        "files:\n  - {name: submission.py, source: '@SUBMISSION@'}\n"
        "  - {name: reference.py, source: reference.py}\n"
        "description: d\nmulti_gpu: true\n"
        f"tests:\n  - {{world_size: {world_size}, size: 64, seed: 3}}\n"
    )
    task = load_task(folder / "task.yml")
    judge = make_judge(
        task, LeaderboardModules(task), folder / "submission.py", False, WorkerPool()
    )
    try:
        return judge.check_case(next(iter(task_cases(task))), 60)
    finally:
        judge.close()


REDUCED = (
    "import torch.distributed as dist\n\n"
    "def custom_kernel(data):\n"
    "    config, x = data\n"
    "    out = x.clone()\n"
    "    dist.all_reduce(out)\n"
    "    return out * config.scale\n"
)


def test_inputs_holding_the_leaderboards_own_classes_reach_every_rank(tmp_path):
    outcome = judged_on_cpu_board(tmp_path, REDUCED, 2)
    assert outcome.status == "passed", outcome.message


def test_gloo_runs_any_world_size_up_to_the_cpu_cap(tmp_path):
    # Three CPU ranks, on a host showing fewer GPUs too: a gloo rank pins no GPU.
    wrong_on_rank_one = REDUCED.replace(
        "    return out", "    out += dist.get_rank() == 1\n    return out"
    )
    outcome = judged_on_cpu_board(tmp_path, wrong_on_rank_one, 3)
    assert outcome.status == "failed" and outcome.message.startswith("rank 1 of 3:")
