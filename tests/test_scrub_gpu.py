"""A frugal case's timed calls do not meet the scrubbing of the memory given back before them.

Runs only with CUDA (the lead's H100; H200 here). The bundled vectoradd's 16384² case (1 GiB
of inputs: judged frugally) read either about 363 or about 403 µs per worker on an H200, by
whether its timed calls met the driver's scrubbing of the gigabytes its judge and worker had
just given back (channel/scrubbing.py). Judged three times, in three workers, each case must read
what the same add reads in this process with nothing freed before it.
"""

from __future__ import annotations

import statistics
import textwrap
from pathlib import Path

import pytest

from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.measure import TimingPlan, default_flush_bytes
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.scoring import rank_us
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor.pool import WorkerPool

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device"),
]
VECTORADD = Path(__file__).parents[1] / "leaderboards" / "vectoradd" / "task.yml"
SUBMISSION = """
import torch


def custom_kernel(data):
    a, b, c = data
    return torch.add(a, b, out=c)
"""
TOLERANCE = 0.03  # the two values lie 11% apart


def in_process_us(n: int) -> float:
    """The add's device time here, back to back with the L2 flushed: nothing freed before it."""
    import torch

    a, b, c = (torch.randn(n, n, device="cuda").half() for _ in "abc")
    flush = torch.zeros(default_flush_bytes() // 8, dtype=torch.int64, device="cuda")
    sink = torch.zeros((), dtype=torch.int64, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(23):
        torch.sum(flush, dim=0, out=sink)
        start.record()
        torch.add(a, b, out=c)
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end) * 1e3)
    del a, b, c, flush
    torch.cuda.empty_cache()
    return statistics.median(times)


def test_the_large_add_reads_its_own_time_in_every_worker(tmp_path):
    task = load_task(VECTORADD)
    index = next(i for i, spec in enumerate(task.benchmarks) if spec["size"] == 16384)
    case = Case(BENCHMARK, index, task.benchmarks[index])
    path = tmp_path / "submission.py"
    path.write_text(textwrap.dedent(SUBMISSION))
    plan = TimingPlan(
        rule=StoppingRule(precision=0.01, min_samples=10, min_time_s=0.0, budget_s=20.0),
        warmup=Warmup(max_calls=3),
        flush_bytes=default_flush_bytes(),
    )
    expected = in_process_us(16384)
    judged = []
    for _ in range(3):
        judge = SubmissionJudge(
            task, LeaderboardModules(task), path, use_cuda=True, pool=WorkerPool(spares=0)
        )
        try:
            outcome = judge.benchmark_case(case, 300.0, plan)
        finally:
            judge.close()
        assert outcome.status == "passed", outcome.message
        assert outcome.timing["frugal"] is True
        assert outcome.timing.get("scrub_wait_ms", 0) > 0, outcome.timing
        judged.append(rank_us(outcome.timing))
    print(f"in process {expected:.1f} us; judged {', '.join(f'{t:.1f}' for t in judged)} us")
    for time_us in judged:
        assert abs(time_us / expected - 1) <= TOLERANCE, (expected, judged)
