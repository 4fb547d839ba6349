"""A multi-GPU case's communication ceiling: an all-reduce of the bytes one rank reads, timed in
the reference's ranks after the case's timed calls, recorded with the case (gloo on CPU here;
the last test needs two GPUs)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from pytest_kernelboard.judge import distributed
from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.judge.distributed import CEILING_REPETITIONS, make_judge
from pytest_kernelboard.judge.measure import TimingPlan
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.presentation import fmt_timed_case
from pytest_kernelboard.results.recorder import case_record
from pytest_kernelboard.results.records import TIMING_SCHEMA
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.speed_of_light import (
    COMM_KEY,
    all_reduce_bus_factor,
    comm_ceiling,
    comm_speed_of_light,
    with_speed_of_light,
)
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor.failures import WorkerFailure
from pytest_kernelboard.supervisor.pool import WorkerPool

ROOT = Path(__file__).resolve().parent.parent
ALLREDUCE = ROOT / "leaderboards" / "allreduce_scale"
PYTORCH = ALLREDUCE / "solutions" / "correct" / "submission_pytorch.py"
SIZE = 4096  # float32 elements of each rank's x (its `out` is written, not read)

# A submission that slows every all-reduce made through torch.distributed in its process: the
# ceiling, timed in the reference's ranks, must not see it.
SLOW_ALL_REDUCE = """
import time

import torch.distributed as dist
from task import input_t, output_t

_all_reduce = dist.all_reduce


def _slow(*args, **kwargs):
    time.sleep(0.05)
    return _all_reduce(*args, **kwargs)


dist.all_reduce = _slow


def custom_kernel(data: input_t) -> output_t:
    x, out, scale = data
    out.copy_(x)
    dist.all_reduce(out)
    out.mul_(scale)
    return out
"""


@pytest.fixture(autouse=True)
def fresh_ceilings(monkeypatch):
    """Each test measures its own: a size is otherwise measured once per judge process."""
    monkeypatch.setattr(distributed, "_ceilings", {})


@pytest.fixture(scope="module")
def task():
    return load_task(ALLREDUCE / "task.yml")


@pytest.fixture(scope="module")
def modules(task):
    return LeaderboardModules(task)


def quick_plan() -> TimingPlan:
    return TimingPlan(
        rule=StoppingRule(min_samples=3, max_samples=5, min_time_s=0.0, budget_s=2.0),
        warmup=Warmup(min_calls=1, max_calls=1),
        flush_bytes=0,
    )


def benchmark(size: int = SIZE) -> Case:
    return Case(BENCHMARK, 0, {"world_size": 2, "size": size, "scale": 0.5, "seed": 7})


def timed(task, modules, submission: Path | None, case: Case) -> CaseOutcome:
    entry = "ref_kernel" if submission is None else "custom_kernel"
    judge = make_judge(task, modules, submission, False, WorkerPool(), entry=entry)
    try:
        return judge.benchmark_case(case, 60, quick_plan())
    finally:
        judge.close()


# -- the numbers ---------------------------------------------------------------------------------
def test_bus_bandwidth_follows_nccl_tests():
    record = comm_ceiling(1_000_000, [12.0, 10.0, 11.0, 50.0], 4, "nccl", "cuda_event")
    assert record["ceiling_us"] == 11.5  # the median of the repetitions
    assert record["algbw_gbps"] == pytest.approx(1_000_000 / 11.5e-6 / 1e9, rel=1e-4)
    assert record["bus_gbps"] == pytest.approx(record["algbw_gbps"] * 1.5, rel=1e-4)
    assert all_reduce_bus_factor(2) == 1.0 and all_reduce_bus_factor(8) == 1.75
    assert comm_ceiling(0, [1.0], 2, "gloo", "host") is None  # no bytes: nothing crosses
    assert comm_ceiling(64, [1.0], 1, "gloo", "host") is None  # one rank: no link


def test_of_light_is_the_ceiling_over_the_ranking_time():
    ceiling = comm_ceiling(4096, [20.0], 2, "gloo", "host")
    timing = {"rank_us": 80.0, "mean_us": 90.0, COMM_KEY: ceiling}
    assert comm_speed_of_light(timing) == 0.25
    recorded = with_speed_of_light(timing)
    assert recorded[COMM_KEY]["of_light"] == 0.25
    assert recorded["speed_of_light"] is None  # no floor on CPU: the DRAM one stays empty
    assert comm_speed_of_light({"rank_us": 80.0}) is None  # a single-GPU case has none


# -- on CPU: gloo, two ranks ---------------------------------------------------------------------
def test_a_benchmark_case_records_its_all_reduce_ceiling(task, modules):
    case = benchmark()
    outcome = timed(task, modules, PYTORCH, case)
    assert outcome.status == "passed", outcome.message
    ceiling = outcome.timing[COMM_KEY]
    assert ceiling["comm_bytes"] == SIZE * 4  # x alone: the output passed in is not read
    assert ceiling["world_size"] == 2 and ceiling["backend"] == "gloo"
    assert ceiling["clock"] == "host" and ceiling["repetitions"] == CEILING_REPETITIONS
    assert ceiling["ceiling_us"] > 0 and ceiling["bus_gbps"] > 0
    assert ceiling["bus_gbps"] == pytest.approx(ceiling["algbw_gbps"], rel=1e-3)  # W=2: x1
    # Measured once, in the reference's ranks: cached for this size on this host.
    assert list(distributed._ceilings) == [("gloo", 2, SIZE * 4)]

    record = case_record(case, outcome).to_json()
    stored = record["timing"][COMM_KEY]
    assert stored["of_light"] == pytest.approx(
        stored["ceiling_us"] / record["timing"]["rank_us"], rel=1e-4
    )
    jsonschema.validate(record["timing"], TIMING_SCHEMA)
    line = fmt_timed_case(outcome.timing)
    assert "communication ceiling" in line and "all-reduce of 16 KiB on 2 ranks" in line


def test_the_ceiling_is_timed_in_the_reference_ranks_not_the_submissions(task, modules, tmp_path):
    slow = tmp_path / "submission.py"
    slow.write_text(SLOW_ALL_REDUCE)
    outcome = timed(task, modules, slow, benchmark())
    assert outcome.status == "passed", outcome.message
    assert min(outcome.timing["samples_us"]) > 50_000  # its own calls carry the sleep
    assert outcome.timing[COMM_KEY]["ceiling_us"] < 50_000  # the reference's all-reduce does not


def test_the_reference_judged_alone_times_the_ceiling_in_its_own_ranks(task, modules):
    outcome = timed(task, modules, None, benchmark(size=1000))
    assert outcome.status == "passed", outcome.message
    assert outcome.timing[COMM_KEY]["comm_bytes"] == 4000


def test_a_ceiling_reply_of_the_wrong_shape_is_refused():
    good = [1.0] * CEILING_REPETITIONS
    assert distributed.ceiling_samples({"samples_us": good}, 0) == good
    for bad in (good[:-1], [*good[:-1], float("nan")], [*good[:-1], -1.0], [*good[:-1], True]):
        with pytest.raises(WorkerFailure, match="rank 1: the ceiling reply"):
            distributed.ceiling_samples({"samples_us": bad}, 1)


def test_a_failed_ceiling_leaves_the_case_its_verdict_and_a_flag(task, modules, monkeypatch):
    def fails(self, world_size, nbytes):
        raise WorkerFailure("crashed", "rank 0 of 2: the worker died\n(all 2 ranks were stopped)")

    monkeypatch.setattr(distributed.DistributedJudge, "comm_ceiling", fails)
    outcome = timed(task, modules, PYTORCH, benchmark())
    assert outcome.status == "passed", outcome.message
    assert COMM_KEY not in outcome.timing
    assert (
        "the communication ceiling was not measured: rank 0 of 2: the worker died"
        in (outcome.timing["flags"])
    )


def test_no_ceiling_for_test_cases_or_single_gpu_leaderboards(task, modules):
    case = Case(TEST, 0, {"world_size": 2, "size": SIZE, "scale": 0.5, "seed": 7})
    judge = make_judge(task, modules, PYTORCH, False, WorkerPool())
    try:
        outcome = judge.check_case(case, 60)
    finally:
        judge.close()
    assert outcome.passed and outcome.timing is None
    assert COMM_KEY not in (case_record(case, outcome).to_json().get("timing") or {})

    identity = load_task(ROOT / "leaderboards" / "identity" / "task.yml")
    single = make_judge(
        identity, LeaderboardModules(identity), None, False, WorkerPool(), entry="ref_kernel"
    )
    try:
        timing = single.benchmark_case(
            Case(BENCHMARK, 0, {"size": 4096, "seed": 3}), 60, quick_plan()
        )
    finally:
        single.close()
    assert timing.status == "passed", timing.message
    assert timing.timing and COMM_KEY not in timing.timing
    assert distributed._ceilings == {}


# -- on two GPUs: NCCL ---------------------------------------------------------------------------
def _gpus() -> int:
    from pytest_kernelboard.judge import devices

    if not devices.has_cuda():
        return 0
    import torch

    return torch.cuda.device_count()


@pytest.mark.gpu
@pytest.mark.gpus(2)
@pytest.mark.skipif(_gpus() < 2, reason="needs two CUDA devices")
def test_on_two_gpus_the_ceiling_is_nccls_all_reduce(task, modules):
    size = 16 << 20  # 64 MiB a rank: bandwidth-bound, past NCCL's latency
    judge = make_judge(task, modules, PYTORCH, True, WorkerPool())
    try:
        outcome = judge.benchmark_case(benchmark(size), 120, quick_plan())
    finally:
        judge.close()
    assert outcome.status == "passed", outcome.message
    ceiling = outcome.timing[COMM_KEY]
    assert ceiling["backend"] == "nccl" and ceiling["clock"] == "cuda_event"
    assert ceiling["comm_bytes"] == size * 4
    assert ceiling["bus_gbps"] > 5  # any GPU link (PCIe or NVLink) moves more than 5 GB/s
    # The submission is an NCCL all-reduce plus a copy and a scale: near its ceiling.
    assert 0.2 < comm_speed_of_light(outcome.timing) < 1.5
