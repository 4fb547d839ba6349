"""Device labels with GPU counts, the gate's routing of multi-GPU leaderboards, runner labels,
and one GPU per pytest-xdist worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.plugin.xdist_gpus import (
    XdistWorker,
    pin_xdist_worker,
    worker_results_path,
    xdist_worker,
)
from pytest_kernelboard.pr.gate import multi_gpu_devices, runner_labels
from pytest_kernelboard.pr.runner_labels import labels
from pytest_kernelboard.results.recorder import RunRecorder
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.spec.discovery import SubmissionRef
from pytest_kernelboard.spec.task import load_task

ROOT = Path(__file__).resolve().parent.parent


def test_device_labels_carry_the_gpu_count():
    assert devices.device_label(1, "H200") == "H200"
    assert devices.device_label(2, "H200") == "H200x2"
    assert devices.device_label(4, "CPU") == "CPU"
    assert devices.split_device_label("H100x8") == ("H100", 8)
    assert devices.split_device_label("MI300x8") == ("MI300", 8)
    assert devices.split_device_label("RTX 4090") == ("RTX 4090", 1)
    assert devices.host_device_labels("H200", 3) == ["H200", "H200x2", "H200x3"]


def test_runner_announces_every_count_it_can_serve():
    assert labels("H200", 2) == ["kernelboard", "h200", "h200x2"]
    assert "h200x2" not in labels("H200", 1)  # a one-GPU host never gets a two-GPU job
    assert runner_labels("H200x2")[-1] == "h200x2" and "h200x2" in labels("H200", 8)


def task_with(tmp_path: Path, gpus: str, sizes=(2, 4)) -> object:
    (tmp_path / "reference.py").write_text("")
    cases = "".join(f"  - {{world_size: {n}}}\n" for n in sizes)
    path = tmp_path / "task.yml"
    path.write_text(
        "files:\n  - {name: submission.py, source: '@SUBMISSION@'}\n"
        f"description: d\nmulti_gpu: true\ngpus: {gpus}\ntests:\n{cases}"
    )
    return load_task(path)


def test_gate_routes_to_runners_with_enough_gpus(tmp_path):
    problems = []
    task = task_with(tmp_path, "[H200, H100x4]")
    assert multi_gpu_devices(task, lambda *a: problems.append(a)) == ["H200x4", "H100x4"]
    assert problems == []


def test_gate_refuses_a_device_with_too_few_gpus(tmp_path):
    problems = []
    task = task_with(tmp_path, "[H200x2]")
    assert multi_gpu_devices(task, lambda *a: problems.append(a)) == []
    assert problems and problems[0][0] == "devices" and "H200x4" in problems[0][1]


def test_shipped_leaderboard_routes_to_two_gpu_runners():
    task = load_task(ROOT / "leaderboards" / "allreduce_scale" / "task.yml")
    assert multi_gpu_devices(task, lambda *a: pytest.fail(str(a))) == ["H100x2", "H200x2"]


def test_results_device_carries_the_ranks_used(monkeypatch):
    monkeypatch.setattr(devices, "environment", lambda: {"device": "H200", "device_kind": "cuda"})
    task = load_task(ROOT / "leaderboards" / "allreduce_scale" / "task.yml")
    recorder = RunRecorder("test")
    path = ROOT / "leaderboards" / "allreduce_scale" / "solutions" / "correct"
    ref = SubmissionRef(path / "submission_pytorch.py", task.name, "alice")
    recorder.record(task, ref, Case(TEST, 0, task.tests[0]), CaseOutcome("passed"))
    assert recorder.environment()["device"] == "H200x2"
    skipped_only = RunRecorder("test")
    skipped_only.record(task, ref, Case(TEST, 0, task.tests[0]), CaseOutcome("skipped", "few"))
    assert skipped_only.environment()["device"] == "H200"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        # its own GPU first (cuda:0), the others after it for the cases it leases them for
        ({"PYTEST_XDIST_WORKER": "gw0", "CUDA_VISIBLE_DEVICES": "2,3"}, "2,3"),
        ({"PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "2,3"}, "3,2"),
        ({"PYTEST_XDIST_WORKER": "gw2", "CUDA_VISIBLE_DEVICES": "2,3"}, "2,3"),
        ({"CUDA_VISIBLE_DEVICES": "2,3"}, "2,3"),  # not under xdist: untouched
    ],
)
def test_each_xdist_worker_gets_its_own_gpu(env, expected):
    environ = dict(env)
    worker_id = environ.pop("PYTEST_XDIST_WORKER", None)
    worker = XdistWorker(worker_id, 2) if worker_id else None
    warning = pin_xdist_worker(worker, environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == expected
    assert warning is None


def test_more_xdist_workers_than_gpus_warns():
    environ = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert "3 xdist workers share 2 GPU(s)" in pin_xdist_worker(XdistWorker("gw2", 3), environ)


def test_no_gpu_leaves_the_environment_alone(monkeypatch):
    environ = {"CUDA_VISIBLE_DEVICES": ""}
    assert pin_xdist_worker(XdistWorker("gw0", 1), environ) is None
    assert environ["CUDA_VISIBLE_DEVICES"] == ""


def test_results_file_per_xdist_worker():
    assert worker_results_path(Path("out/run.json"), XdistWorker("gw1", 2)) == Path(
        "out/run.gw1.json"
    )
    assert worker_results_path(Path("run.json"), None) == Path("run.json")


class _Config:  # what xdist gives a worker's config, and what a plain session has
    def __init__(self, workerinput=None):
        if workerinput is not None:
            self.workerinput = workerinput


def test_the_worker_is_read_from_the_session_not_the_environment(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")  # inherited by a pytest a test started
    assert xdist_worker(_Config()) is None
    worker = xdist_worker(_Config({"workerid": "gw1", "workercount": 4}))
    assert worker == XdistWorker("gw1", 4) and worker.index == 1
