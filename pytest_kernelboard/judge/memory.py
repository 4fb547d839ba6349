"""Device memory: how much a case's data holds, and when a call is judged frugally.

A call whose inputs and outputs are large (FRUGAL_MIN_BYTES and up) is judged so that the
judge and its worker together hold two copies of the inputs and two of the outputs at most
(docs/architecture.md, "Device memory"): the judge's pristine inputs, the worker's copy in the
inbound window, the worker's output (written back over its consumed inputs there, read in
place), and the reference's expected output while the check runs; each side returns its cached
memory after every call. Small calls keep the simpler path (outputs copied out of the outbound
window), where a few more copies cost nothing that matters.
"""

from __future__ import annotations

import os
from typing import Any

from ..stats.floors import device_bytes

FRUGAL_MIN_BYTES = 1 << 30
# KERNELBOARD_FRUGAL_MIN_BYTES moves the threshold (0: every GPU call; a large number: none).
THRESHOLD_VARIABLE = "KERNELBOARD_FRUGAL_MIN_BYTES"


def is_frugal(data: Any) -> bool:
    """Whether calls on this input are judged frugally (large inputs on the GPU)."""
    threshold = int(os.environ.get(THRESHOLD_VARIABLE) or FRUGAL_MIN_BYTES)
    return device_bytes(data) >= max(threshold, 1)


# KERNELBOARD_MEMORY_TRACE=FILE: one JSON line per phase of a frugal call, for the accounting
# that benchmarks/memory_peak.py prints (which copy the judge holds when).
TRACE_VARIABLE = "KERNELBOARD_MEMORY_TRACE"
TRACE_SEGMENT_MIN = 256 << 20  # segments this large and up are listed one by one


def trace(phase: str, windows: int = 0, worker_peak: int | None = None) -> None:
    """Where the judge's device memory stands at `phase`: torch's allocated and reserved
    bytes, its large segments (size, allocated), the device windows' bytes and the worker's
    reported peak. Nothing without the variable or before CUDA is in use."""
    path = os.environ.get(TRACE_VARIABLE)
    if not path:
        return
    import json
    import time

    import torch

    if not torch.cuda.is_initialized():
        return
    segments = [
        (s["total_size"], s["allocated_size"])
        for s in torch.cuda.memory_snapshot()
        if s["total_size"] >= TRACE_SEGMENT_MIN
    ]
    line = {
        "t": round(time.monotonic(), 3),
        "pid": os.getpid(),
        "phase": phase,
        "allocated": torch.cuda.memory_allocated(),
        "reserved": torch.cuda.memory_reserved(),
        "segments": segments,
        "windows": windows,
        "worker_peak": worker_peak,
    }
    with open(path, "a") as out:
        out.write(json.dumps(line) + "\n")
