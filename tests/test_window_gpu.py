"""The device-window transport on a GPU: both directions, growth, the host fallback for a reply
too large, and the sandbox (where CUDA IPC cannot cross). Runs only with CUDA."""

from __future__ import annotations

import pytest

from pytest_kernelboard.channel import transport
from pytest_kernelboard.judge import devices
from pytest_kernelboard.supervisor import sandbox
from pytest_kernelboard.supervisor.client import WorkerProcess
from pytest_kernelboard.supervisor.failures import WorkerFailure

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device"),
]


def modes() -> list[bool]:
    return [False, True] if sandbox.probe() is None else [False]


@pytest.fixture(params=modes(), ids=lambda s: "sandboxed" if s else "plain")
def worker(request):
    started = WorkerProcess(sandboxed=request.param)
    yield started
    started.close()


def test_cuda_tensors_cross_both_ways_through_the_windows(worker):
    import torch

    x = torch.randn(1000, 7, device="cuda")
    back = worker.request("echo", 60.0, data=x).payload["output"]
    assert worker.transport == transport.WINDOW, worker.output_tail()
    assert back.is_cuda and torch.equal(back, x + 1)
    assert back.data_ptr() != x.data_ptr()  # the judge's own copy, not the window
    assert set(worker.windows) == {"in", "out"}


def test_a_larger_input_grows_the_inbound_window(worker):
    import torch

    small = torch.ones(16, device="cuda")
    worker.request("echo", 60.0, data=small)
    first = worker.windows["in"].size
    big = torch.randn(first // 4 + 1, device="cuda")  # more bytes than the window holds
    back = worker.request("echo", 60.0, data=big).payload["output"]
    assert worker.windows["in"].size >= big.numel() * 4 > first
    assert torch.equal(back, big + 1)


def test_a_reply_larger_than_the_outbound_window_comes_as_a_copy_and_grows_it(worker, tmp_path):
    import torch

    (tmp_path / "tripler.py").write_text(
        "import torch\n\ndef custom_kernel(x):\n    return torch.cat([x, x, x, x])\n"
    )
    worker.load(tmp_path, "tripler", 60.0)
    x = torch.randn(1 << 20, device="cuda")  # 4 MiB in, 16 MiB out
    reply = worker.request("call", 60.0, data=x)
    out_size = worker.windows["out"].size
    assert out_size < 4 * x.numel() * 4  # it did not fit: it came as host copies
    assert reply.host_transport  # and the judge's clock knows it held copies
    assert torch.equal(reply.payload["output"], torch.cat([x, x, x, x]))
    again = worker.request("call", 60.0, data=x)  # the next request grows the window first
    assert worker.windows["out"].size >= 4 * x.numel() * 4 and not again.host_transport
    assert torch.equal(again.payload["output"], torch.cat([x, x, x, x]))


def test_a_reply_expected_large_grows_the_outbound_window_before_the_first_call(worker, tmp_path):
    """A fresh worker told how large a case's output is (the judge learnt it from an earlier
    candidate's passed output) has its window grown before the call: no host copies."""
    import torch

    (tmp_path / "tripler.py").write_text(
        "import torch\n\ndef custom_kernel(x):\n    return torch.cat([x, x, x, x])\n"
    )
    worker.load(tmp_path, "tripler", 60.0)
    x = torch.randn(1 << 20, device="cuda")  # 4 MiB in, 16 MiB out
    worker.expect_reply(4 * x.numel() * 4)
    reply = worker.request("call", 60.0, data=x)
    assert worker.windows["out"].size >= 4 * x.numel() * 4
    assert not reply.host_transport and worker.reply_outgrew == 0
    assert torch.equal(reply.payload["output"], torch.cat([x, x, x, x]))


def test_an_output_written_into_an_input_comes_back_through_the_window(worker, tmp_path):
    """vectoradd's shape: the output buffer is an input, written in place and returned. Only
    the first reply (before the outbound window has grown) may cross as host copies."""
    import torch

    (tmp_path / "adder.py").write_text(
        "import torch\n\ndef custom_kernel(data):\n"
        "    a, b, c = data\n    torch.add(a, b, out=c)\n    return c\n"
    )
    worker.load(tmp_path, "adder", 60.0)
    a, b = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
    replies = [
        worker.request("call", 60.0, data=(a, b, torch.full_like(a, float("nan"))))
        for _ in range(3)
    ]
    assert [r.host_transport for r in replies[1:]] == [False, False]
    for reply in replies:
        assert torch.equal(reply.payload["output"], a + b)


def test_a_worker_that_dies_leaves_the_judges_windows_released(worker):
    import torch

    worker.request("echo", 60.0, data=torch.ones(4, device="cuda"))
    worker.process.kill()
    with pytest.raises(WorkerFailure):
        worker.request("echo", 60.0, data=torch.ones(4, device="cuda"))
    assert worker.windows == {}
