"""Device memory: how much a case's data holds, and when a call is judged frugally.

A call whose inputs and outputs are large (FRUGAL_MIN_BYTES and up) is judged so that the
judge and its worker together hold two copies of the inputs and two of the outputs at most
(docs/architecture.md, "Device memory"): the judge's pristine inputs, the worker's copy in the
inbound window, the worker's output (written back over its consumed inputs there, read in
place), and the reference's expected output while the check runs; each side returns its cached
memory after every call. Small calls keep the simpler path (outputs copied out of the outbound
window), where a few more copies cost nothing that matters.

On the host (CPU tensors, which cross as shared-memory files) the same threshold applies: the
worker's copy of the inputs is the judge's shared-memory file, the worker's output is sent as
it is (no copy of its own first) and read in place while the worker is stopped, and the worker
lets go of the request and its reply as soon as the reply is packed
(docs/architecture.md, "Host memory").
"""

from __future__ import annotations

import os
from typing import Any

from ..stats.floors import device_bytes

FRUGAL_MIN_BYTES = 1 << 30
# KERNELBOARD_FRUGAL_MIN_BYTES moves the threshold (0: every GPU call; a large number: none).
THRESHOLD_VARIABLE = "KERNELBOARD_FRUGAL_MIN_BYTES"


def is_frugal(data: Any) -> bool:
    """Whether calls on this input are judged frugally (large inputs on the GPU, or on the
    host where they hold no CUDA tensor)."""
    threshold = max(int(os.environ.get(THRESHOLD_VARIABLE) or FRUGAL_MIN_BYTES), 1)
    on_gpu = device_bytes(data)
    if on_gpu:
        return on_gpu >= threshold
    return device_bytes(data, "cpu") >= threshold


# KERNELBOARD_MEMORY_TRACE=FILE: one JSON line per phase of a frugal call, for the accounting
# that benchmarks/memory_peak.py prints (which copy the judge holds when).
TRACE_VARIABLE = "KERNELBOARD_MEMORY_TRACE"
TRACE_SEGMENT_MIN = 256 << 20  # segments this large and up are listed one by one


def trace(phase: str, windows: int = 0, worker_peak: int | None = None) -> None:
    """Where the judge's device memory stands at `phase`: torch's allocated and reserved
    bytes, its large segments (size, allocated), the device windows' bytes and the worker's
    reported peak; where CUDA is not in use, the judge's own host memory (its private
    anonymous memory and the shared-memory files it maps). Nothing without the variable."""
    path = os.environ.get(TRACE_VARIABLE)
    if not path:
        return
    import torch

    if not torch.cuda.is_initialized():
        _write(path, {"phase": phase, **_host_memory()})
        return
    segments = [
        (s["total_size"], s["allocated_size"])
        for s in torch.cuda.memory_snapshot()
        if s["total_size"] >= TRACE_SEGMENT_MIN
    ]
    line = {
        "phase": phase,
        "allocated": torch.cuda.memory_allocated(),
        "reserved": torch.cuda.memory_reserved(),
        "segments": segments,
        "windows": windows,
        "worker_peak": worker_peak,
    }
    _write(path, line)


def _write(path: str, line: dict[str, Any]) -> None:
    import json
    import time

    line = {"t": round(time.monotonic(), 3), "pid": os.getpid(), **line}
    with open(path, "a") as out:
        out.write(json.dumps(line) + "\n")


def _host_memory() -> dict[str, int]:
    """The judge's resident memory by kind (bytes), from /proc/self/status: `host_anon` its own
    (tensors included), `host_shmem` the shared-memory files it maps (inputs sent, outputs read
    in place). Empty where there is no /proc."""
    fields = {"RssAnon": "host_anon", "RssShmem": "host_shmem"}
    found = {}
    try:
        with open("/proc/self/status") as status:
            for row in status:
                key, _, value = row.partition(":")
                if key in fields:
                    found[fields[key]] = int(value.split()[0]) * 1024
    except OSError:
        pass
    return found
