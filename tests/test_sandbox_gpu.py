"""The sandboxed worker on a GPU: device nodes, the CUDA tensor transport, timing, and the
patched event clock. Runs only with CUDA and a working bubblewrap sandbox (the lead's H100)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_kernelboard.channel import transport
from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.measure import TimingPlan, default_flush_bytes
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor import sandbox
from pytest_kernelboard.supervisor.client import WorkerProcess, session_transport
from pytest_kernelboard.supervisor.pool import WorkerPool

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device"),
]
ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"
CORRECT = """
import torch


def custom_kernel(data):
    x, out = data
    assert x.is_cuda and out.is_cuda
    return out.copy_(x + 1)
"""


@pytest.fixture(scope="module", autouse=True)
def needs_sandbox():
    reason = sandbox.probe()
    if reason is not None:
        pytest.fail(f"the GPU sandbox test needs bubblewrap here: {reason}")


def judge(tmp_path, source: str) -> SubmissionJudge:
    task = load_task(ADDONE)
    path = tmp_path / "submission.py"
    path.write_text(textwrap.dedent(source))
    pool = WorkerPool()
    return SubmissionJudge(task, LeaderboardModules(task), path, use_cuda=True, pool=pool)


def test_the_sandboxed_worker_sees_the_gpu_and_nothing_else_of_dev():
    worker = WorkerProcess(sandboxed=True)
    try:
        assert worker.ping()["cuda"] is True, worker.output_tail()
    finally:
        worker.close()


def test_the_transport_is_probed_and_cuda_cases_pass_either_way(tmp_path):
    chosen = session_transport()
    assert chosen in (transport.IPC, transport.HOST)
    j = judge(tmp_path, CORRECT)
    try:
        task = j.task
        for index in range(len(task.tests)):
            outcome = j.check_case(Case(TEST, index, task.tests[index]), 120.0)
            assert outcome.status == "passed", f"{chosen}: {outcome.message}"
    finally:
        j.close()
    print(f"CUDA tensors cross the sandbox by: {chosen}")


def test_a_patched_event_clock_does_not_change_the_sandboxed_timing(tmp_path):
    j = judge(
        tmp_path,
        """
        import torch

        _real = torch.cuda.Event.elapsed_time
        torch.cuda.Event.elapsed_time = lambda self, end: _real(self, end) / 1000


        def custom_kernel(data):
            x, out = data
            torch.cuda._sleep(4_000_000)
            return out.copy_(x + 1)
        """,
    )
    plan = TimingPlan(
        rule=StoppingRule(precision=0.05, min_samples=10, min_time_s=0.0, budget_s=10.0),
        warmup=Warmup(max_calls=3),
        flush_bytes=default_flush_bytes(),
    )
    try:
        outcome = j.benchmark_case(Case(BENCHMARK, 0, j.task.benchmarks[0]), 120.0, plan)
    finally:
        j.close()
    assert outcome.status == "passed", outcome.message
    assert outcome.timing["clock"] == "cuda_event"
    assert outcome.timing["median_us"] > 1000.0, outcome.timing  # the real sleep, not /1000


CAGE_CHECK = """
import glob

import torch

EXPECTED_UUID = {uuid!r}


def custom_kernel(data):
    x, out = data
    nodes = sorted(glob.glob("/dev/nvidia[0-9]*"))
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    if len(nodes) != 1 or torch.cuda.device_count() != 1 or EXPECTED_UUID[4:] not in uuid:
        raise RuntimeError(f"the cage holds {{nodes}}, {{torch.cuda.device_count()}} GPU(s), {{uuid}}")
    return out.copy_(x + 1)
"""


@pytest.mark.parametrize("which", ["first", "last"])
def test_a_judge_given_one_gpu_cages_its_workers_with_that_gpus_node_alone(
    tmp_path, monkeypatch, which
):
    """`kernelboard judge --gpus K`: the worker finds GPU K's node alone in its /dev, one CUDA
    device, and that it is GPU K (supervisor/gpu_view.py); the first GPU is judged in this
    process, which sees every GPU, the last by a judge process that sees it alone. On a
    one-GPU host only the last two checks say anything."""
    import shutil

    from pytest_kernelboard.batch import Candidate, judge_many
    from pytest_kernelboard.supervisor import gpu_view

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    gpu = 0 if which == "first" else len(gpu_view.host_gpus() or ()) - 1
    view = gpu_view.view_of(str(gpu))
    assert view is not None, "NVML lists this host's GPUs"
    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    source = CAGE_CHECK.format(uuid=view.visible)
    (record,) = judge_many(
        "addone", [Candidate("cage.py", source)], mode="test", root=root, gpus=[gpu]
    )
    assert record["status"] == "passed", record["message"]
