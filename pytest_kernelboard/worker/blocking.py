"""Hold a CUDA stream until the host has queued a whole timed call (nvbench's blocking kernel).

Without it the start event fires as soon as the host records it, and whatever the host does
before the call's first launch (Python, the dispatcher, a page fault, being descheduled on a
busy runner) shows up as idle device time inside the timed interval: a tail of slow samples
that has nothing to do with the kernel. With it the stream runs: blocking kernel (spins on a
flag in pinned host memory) -> start event -> the call's kernels -> end event, and the host
raises the flag only after the end event is queued, so the interval holds device work only.

The spin gives up after a bounded number of polls, so a call that synchronises inside itself
(`.item()`, `torch.cuda.synchronize()`) waits a few milliseconds once instead of deadlocking;
`timed_out()` says so and the worker stops blocking for that submission. Host work inside the
call is then charged by the host clock instead (judge/measure.py), never dropped.
"""

from __future__ import annotations

import functools
from typing import Any

from pytest_kernelboard.channel import fences

# About 1 us per poll of host memory over PCIe: a few tens of milliseconds at most.
MAX_POLLS = 20_000


@functools.cache  # one JIT function per worker: what compile_ahead() compiled is reused
def _spin_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def spin_until_released(flag_ptr, report_ptr, max_polls):
        released = tl.load(flag_ptr, volatile=True)
        polls = 0
        while (released == 0) & (polls < max_polls):
            released = tl.load(flag_ptr, volatile=True)
            polls += 1
        tl.store(report_ptr, released)

    return spin_until_released


class _DevicePointer:
    """What Triton needs of a pointer argument: the device address of the pinned flag."""

    def __init__(self, address: int, dtype: Any):
        self._address = address
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self._address


def compile_ahead(torch: Any) -> None:
    """Compile the spin kernel (or load it from Triton's cache) without launching it: nothing
    runs on the device, so a worker may do it while another's call is timed. The first block()
    then only loads the compiled kernel."""
    flag = torch.zeros(1, dtype=torch.int32).pin_memory()
    report = torch.empty(1, dtype=torch.int32, device="cuda")  # no kernel fills it
    pointer = _DevicePointer(flag.data_ptr(), torch.int32)
    _spin_kernel().warmup(pointer, report, MAX_POLLS, grid=(1,))


class StreamBlocker:
    """block() queues the spin on the current stream; release() lets it go."""

    def __init__(self, torch_module: Any):
        torch = self.torch = torch_module
        self.flag = torch.zeros(1, dtype=torch.int32).pin_memory()
        self.report = torch.zeros(1, dtype=torch.int32, device="cuda")
        self._flag_view = self.flag.numpy()  # a host write that needs no dispatcher call
        # Pinned memory is mapped at the same address on the device (unified addressing).
        self._flag_ptr = _DevicePointer(self.flag.data_ptr(), torch.int32)
        self._kernel = _spin_kernel()
        self.block()  # compile and load now, outside any timed call
        self.release()
        fences.synchronize()
        if self.timed_out():
            raise RuntimeError("the blocking kernel did not see its release flag")

    def block(self) -> None:
        self._flag_view[0] = 0
        self._kernel[(1,)](self._flag_ptr, self.report, MAX_POLLS)

    def release(self) -> None:
        self._flag_view[0] = 1

    def timed_out(self) -> bool:
        """After a synchronisation: True when the last spin gave up instead of being released."""
        return int(self.report.item()) == 0
