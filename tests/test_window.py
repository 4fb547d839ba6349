"""The device-window transport's bookkeeping, on the CPU: slots, checks, descriptors.

The windows themselves are CUDA allocations (tests/test_window_gpu.py); here a CPU byte tensor
stands in for one, which exercises the same packing, the same checks and the same rebuilding.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import weakref
from dataclasses import dataclass

import pytest
import torch

from pytest_kernelboard.channel import window
from pytest_kernelboard.supervisor import pickles


@dataclass
class HostWindow:
    """A window in host memory: what Packer and from_window use of a real one."""

    bytes: torch.Tensor
    size: int
    device: int | None = None


def host_window(size: int = 1 << 16) -> HostWindow:
    return HostWindow(torch.zeros(size, dtype=torch.uint8), size)


def packed(tensors, shared):
    """Slots for `tensors`, their storages copied into `shared`, as the judge does."""
    packer = window.Packer(None)
    slots = [packer.reduce(t)[1][0] for t in tensors]
    assert packer.nbytes <= shared.size
    packer.copy_into(shared)
    return slots, packer


def test_tensors_come_back_equal_with_dtype_shape_strides_and_views():
    shared = host_window()
    base = torch.randn(8, 6)
    tensors = [
        base,
        base.t(),  # a transposed view of the same storage
        base[2:5, 1::2],  # an offset, strided view
        torch.arange(10, dtype=torch.int64),
        torch.tensor([True, False, True]),
        torch.randn(3, 4, dtype=torch.float64).requires_grad_(),
    ]
    slots, packer = packed(tensors, shared)
    assert slots[0].offset == slots[1].offset == slots[2].offset  # one storage, placed once
    assert all(s.offset % window.ALIGN == 0 for s in slots)
    window.set_receiving(shared, copy_out=False)
    try:
        rebuilt = [window.from_window(s) for s in slots]
    finally:
        window.set_receiving(None)
    for original, back in zip(tensors, rebuilt, strict=True):
        assert back.dtype == original.dtype and back.shape == original.shape
        assert back.stride() == original.stride()
        assert torch.equal(back.detach(), original.detach())
    assert rebuilt[5].requires_grad
    # In place (the worker's side), views of one storage stay views of one another.
    rebuilt[0][2, 1] = 1234.0
    assert rebuilt[2][0, 0] == 1234.0 and rebuilt[1][1, 2] == 1234.0


def test_a_rebuilt_tensor_holds_only_its_own_bytes_so_an_output_in_an_input_goes_back_alone():
    """The worker's tensors are regions of its inbound window. An output written into one of
    them (vectoradd's `torch.add(a, b, out=c); return c`) is packed for the reply by its
    storage: were that the whole window, the reply would need the whole inbound window's
    bytes, never fit the outbound window and cross as host copies on every call."""
    shared = host_window()
    a, b, c = torch.randn(256), torch.randn(256), torch.full((256,), float("nan"))
    slots, _ = packed([a, b, c], shared)
    window.set_receiving(shared, copy_out=False)
    try:
        a2, b2, c2 = (window.from_window(s) for s in slots)
    finally:
        window.set_receiving(None)
    assert c2.untyped_storage().nbytes() == c.untyped_storage().nbytes()
    torch.add(a2, b2, out=c2)  # the output buffer passed in, written in place
    assert torch.equal(c2, a + b)
    assert torch.equal(shared.bytes[slots[2].offset :][: c.nbytes].view(torch.float32), a + b)
    reply_packer = window.Packer(None)
    reply_packer.reduce(c2)
    assert reply_packer.nbytes == c.nbytes  # the output alone, not the window's 64 KiB


def test_the_judge_copies_each_tensor_out_of_the_window_at_once():
    shared = host_window()
    slots, _ = packed([torch.ones(16)], shared)
    with window.receiving(shared, copy_out=True):
        received = window.from_window(slots[0])
    shared.bytes.zero_()  # the worker rewrites its window after replying
    assert torch.equal(received, torch.ones(16))


def test_a_packer_lets_go_of_the_inputs_once_they_are_copied():
    """The judge keeps its last request's packer, to read the inputs back after the call; if
    it held their storages too, that call's input would stay alive while the next one is made:
    two inputs at once (seen on the H100 at KernelBench's sizes)."""
    shared = host_window()
    data = torch.randn(64)
    slots, packer = packed([data], shared)
    assert packer.offset_of(data) == slots[0].offset  # still found while the caller holds it
    storage = weakref.ref(data.untyped_storage())
    del data
    assert storage() is None


def test_a_reply_pickled_for_the_judge_is_read_through_its_allow_list():
    shared = host_window()
    output = torch.randn(5, 3)
    packer = window.Packer(None)
    buffer = io.BytesIO()

    class ReplyPickler(pickle.Pickler):  # the worker's, without the CUDA test on is_cuda
        def reducer_override(self, obj):
            return packer.reduce(obj) if isinstance(obj, torch.Tensor) else NotImplemented

    ReplyPickler(buffer).dump({"output": (output, output[1:])})
    packer.copy_into(shared)
    with window.receiving(shared, copy_out=True):
        reply = pickles.loads(buffer.getvalue(), {})
    first, second = reply["output"]
    assert torch.equal(first, output) and torch.equal(second, output[1:])


@pytest.mark.parametrize(
    "change, says",
    [
        ({"offset": 1 << 20}, "outside"),
        ({"offset": 3}, "outside"),
        ({"offset": -512}, "negative"),
        ({"dtype": "cuda"}, "names no tensor"),
        ({"size": (5000,)}, "runs past its storage"),
        ({"size": (2, 2)}, "names no tensor"),  # two sizes, one stride
        ({"nbytes": 6}, "whole"),
        ({"storage_offset": 63}, "runs past its storage"),
    ],
)
def test_a_forged_slot_is_refused_before_any_memory_is_read(change, says):
    shared = host_window()
    slots, _ = packed([torch.ones(16)], shared)
    forged = slots[0]._replace(**change)
    with window.receiving(shared, copy_out=True), pytest.raises(window.WindowError, match=says):
        window.from_window(forged)


def test_a_slot_without_a_shared_window_is_refused():
    slots, _ = packed([torch.ones(4)], host_window())
    with window.receiving(None, copy_out=True), pytest.raises(window.WindowError, match="never"):
        window.from_window(slots[0])


def test_a_host_copy_is_refused_unless_it_is_a_host_tensor():
    with pytest.raises(window.WindowError):
        window.from_host("not a tensor", 0)


def test_the_window_grows_with_headroom_and_never_shrinks():
    assert window.grown_size(1000, 0) == 1250
    assert window.grown_size(1000, 4096) == 4096
    # A window kept past its case gets a capped headroom; one let go at its case's end none.
    assert window.grown_size(200 << 20, 0) == (200 << 20) + (50 << 20)
    assert window.grown_size(240 << 20, 0) == 240 << 20  # 300 MiB with headroom: not kept
    assert window.grown_size(8 << 30, 0) == 8 << 30


def test_a_descriptor_crosses_the_socket_after_its_frame():
    judge_end, worker_end = socket.socketpair()
    read_end, write_end = os.pipe()
    try:
        judge_end.sendall(b"frame")
        window.send_fd(judge_end.fileno(), write_end)
        assert worker_end.recv(5) == b"frame"  # the frame is read first, then the descriptor
        received = window.receive_fd(worker_end.fileno())
        os.write(received, b"through the passed descriptor")
        os.close(received)
        assert os.read(read_end, 100) == b"through the passed descriptor"
    finally:
        for fd in (read_end, write_end):
            os.close(fd)
        judge_end.close()
        worker_end.close()


def test_an_announced_window_without_a_descriptor_is_an_error():
    judge_end, worker_end = socket.socketpair()
    try:
        judge_end.sendall(b"w")  # the byte, but no descriptor with it
        with pytest.raises(window.WindowError, match="no descriptor"):
            window.receive_fd(worker_end.fileno())
    finally:
        judge_end.close()
        worker_end.close()


class _FakeDriver:
    """cuda_vmm's create/map as the judge sees them, with the first create failing."""

    def __init__(self, first_error: str):
        self.first_error, self.creates, self.emptied = first_error, 0, 0

    def create(self, size, device):
        self.creates += 1
        if self.creates == 1:
            raise window.cuda_vmm.CudaDriverError(f"cuMemCreate failed: {self.first_error}")
        return 7


@pytest.fixture
def fake_driver(monkeypatch):
    def install(first_error: str) -> _FakeDriver:
        driver = _FakeDriver(first_error)
        monkeypatch.setattr(window.cuda_vmm, "granularity", lambda device: 2 << 20)
        monkeypatch.setattr(window.cuda_vmm, "create", driver.create)
        monkeypatch.setattr(window.cuda_vmm, "map_readwrite", lambda handle, size, device: 4096)

        def empty_cache():
            driver.emptied += 1

        monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)

        def bare_init(self, handle, address, size, device):  # no device memory on the CPU
            self.handle, self.address, self.size, self.device = handle, address, size, device

        monkeypatch.setattr(window.Window, "__init__", bare_init)
        return driver

    return install


def test_a_window_that_finds_the_gpu_full_retries_after_emptying_torchs_cache(fake_driver):
    driver = fake_driver("CUDA_ERROR_OUT_OF_MEMORY (2)")
    made = window.Window.create(3 << 20, 0)
    assert (made.handle, made.size) == (7, 4 << 20)
    assert driver.creates == 2 and driver.emptied == 1


def test_other_driver_errors_are_not_retried(fake_driver):
    driver = fake_driver("CUDA_ERROR_INVALID_VALUE (1)")
    with pytest.raises(window.cuda_vmm.CudaDriverError, match="INVALID_VALUE"):
        window.Window.create(3 << 20, 0)
    assert driver.creates == 1 and driver.emptied == 0
