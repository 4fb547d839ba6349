"""Submissions that cheat once timing starts are caught by the timed calls' verification."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.measure import TimingPlan
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor.pool import WorkerPool

ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"
PLAN = TimingPlan(
    rule=StoppingRule(precision=0.5, min_samples=12, min_time_s=0.0, budget_s=5.0),
    warmup=Warmup(max_calls=5),
    flush_bytes=0,
)


@pytest.fixture(scope="module")
def task():
    return load_task(ADDONE)


def judge_case(task, tmp_path, source: str):
    path = tmp_path / "submission.py"
    path.write_text(textwrap.dedent(source))
    judge = SubmissionJudge(
        task, LeaderboardModules(task), path, use_cuda=False, pool=WorkerPool(spares=0)
    )
    try:
        return judge.benchmark_case(Case(BENCHMARK, 0, task.benchmarks[0]), 60.0, PLAN)
    finally:
        judge.close()


def test_an_honest_submission_is_timed_with_every_sample_recorded(task, tmp_path):
    outcome = judge_case(
        task,
        tmp_path,
        """
        def custom_kernel(data):
            x, out = data
            return out.copy_(x + 1)
    """,
    )
    assert outcome.status == "passed", outcome.message
    timing = outcome.timing
    assert timing["clock"] == "host"
    assert timing["n"] == len(timing["samples_us"]) >= 12
    assert timing["checked_calls"] >= 10
    assert timing["min_us"] <= timing["median_us"] <= timing["max_us"]


def test_a_cached_output_for_a_repeated_shape_is_caught(task, tmp_path):
    outcome = judge_case(
        task,
        tmp_path,
        """
        cache = {}

        def custom_kernel(data):
            x, out = data
            key = tuple(x.shape)
            if key not in cache:
                cache[key] = (x + 1).clone()  # computed once, replayed for every later input
            return out.copy_(cache[key])
    """,
    )
    assert outcome.status == "failed"
    assert "returned a wrong output" in outcome.message


def test_a_kernel_that_skips_work_once_timing_starts_is_caught(task, tmp_path):
    outcome = judge_case(
        task,
        tmp_path,
        """
        calls = 0

        def custom_kernel(data):
            global calls
            calls += 1
            x, out = data
            if calls > 4:  # correctness call and warm-up done: stop working
                return out
            return out.copy_(x + 1)
    """,
    )
    assert outcome.status == "failed"
    assert "timed call" in outcome.message and "wrong output" in outcome.message


def test_the_workers_waits_survive_a_submission_patching_torchs_synchronisation(monkeypatch):
    """torch.cuda.synchronize calls the torch._C attribute when it runs, so patching that at
    import would turn every wait of the worker into nothing; the worker waits through the
    function object it captured before the submission was imported."""
    import torch

    from pytest_kernelboard.channel import fences

    waits = []
    monkeypatch.setattr(fences, "_captured", {})
    monkeypatch.setattr(torch._C, "_cuda_synchronize", lambda: waits.append(1), raising=False)
    fences.capture()
    monkeypatch.setattr(torch._C, "_cuda_synchronize", lambda: None)  # the submission's patch
    fences.synchronize()
    assert waits == [1]
