"""A fresh worker sets up cuBLAS while it starts, not inside a candidate's first call."""

from __future__ import annotations

import pytest

from pytest_kernelboard.judge import devices
from pytest_kernelboard.worker import libraries


class FakeTorch:
    """What warm_blas calls of torch, recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.cuda = self

    def ones(self, *shape, device):
        self.calls.append(("ones", shape, device))
        return "tensor"

    def mm(self, a, b):
        self.calls.append(("mm", a, b))

    def synchronize(self):
        self.calls.append(("synchronize",))


def test_warm_blas_runs_one_small_matmul_on_the_device_and_waits_for_it():
    torch = FakeTorch()
    libraries.warm_blas(torch)
    assert torch.calls == [("ones", (8, 8), "cuda"), ("mm", "tensor", "tensor"), ("synchronize",)]


@pytest.mark.gpu
@pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device")
def test_a_fresh_workers_cublas_is_set_up_before_its_first_request(tmp_path):
    """The candidate's first call finds cuBLAS's workspace already allocated (torch takes it
    from its caching allocator with the handle): the set-up happened while the worker started."""
    import torch

    from pytest_kernelboard.supervisor.client import WorkerProcess

    (tmp_path / "held.py").write_text(
        "import torch\n\ndef custom_kernel(data):\n"
        "    return torch.tensor([float(torch.cuda.memory_allocated())], device='cuda')\n"
    )
    worker = WorkerProcess()
    try:
        worker.load(tmp_path, "held", 60.0)
        held = worker.request("call", 60.0, data=torch.zeros(1, device="cuda")).payload["output"]
        assert held.item() > 0, worker.output_tail()
    finally:
        worker.close()
