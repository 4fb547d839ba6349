"""A gloo case's ranks see no GPU, so none of their tensors may cross on a device, whatever
the judge has: on a GPU host, a judge that handed such a rank a device window failed every
CPU multi-rank case with cuInit CUDA_ERROR_NO_DEVICE in the rank."""

from __future__ import annotations

import pytest

from pytest_kernelboard.supervisor import crossing
from pytest_kernelboard.supervisor.crossing import TensorCrossing


def never_called(*args, **kwargs):
    raise AssertionError("a CPU rank's crossing asked for a device window or a transport probe")


@pytest.fixture
def judge_on_gpu(monkeypatch):
    monkeypatch.setattr(crossing, "_judge_device", lambda: 0)


def test_a_cpu_ranks_tensors_never_cross_on_a_device(judge_on_gpu):
    cpu_rank = TensorCrossing(None, True, never_called, never_called, cuda=False)
    assert cpu_rank.cuda_device() is None
    assert cpu_rank.transport_for({"data": [1.0]}) is None  # shared-memory files, as on a CPU


def test_a_gpu_rank_crosses_on_its_own_device(judge_on_gpu):
    assert TensorCrossing(1, True, never_called, never_called).cuda_device() == 1
    assert TensorCrossing(None, True, never_called, never_called).cuda_device() == 0
