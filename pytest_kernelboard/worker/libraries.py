"""Library state a fresh worker would otherwise set up inside a candidate's first call."""

from __future__ import annotations

from typing import Any


def warm_blas(torch: Any) -> None:
    """cuBLAS's handle, its workspace and its first kernel, made while the worker starts, before
    it holds any candidate's code. Left to the first call, they were 0.06 - 0.07 s of every
    candidate's first correctness call of KernelBench L2 12 on an H200
    (benchmarks/probes/first_calls.py), made in a shared turn that the next timed case waits
    for. One 8 x 8 matmul: microseconds on the device, work of the same kind as the CUDA
    context's own creation, which a starting worker makes beside others' timed calls."""
    small = torch.ones(8, 8, device="cuda")
    torch.mm(small, small)
    torch.cuda.synchronize()
