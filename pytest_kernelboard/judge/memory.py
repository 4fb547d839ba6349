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

FRUGAL_MIN_BYTES = 1 << 30
# KERNELBOARD_FRUGAL_MIN_BYTES moves the threshold (0: every GPU call; a large number: none).
THRESHOLD_VARIABLE = "KERNELBOARD_FRUGAL_MIN_BYTES"


def device_bytes(data: Any) -> int:
    """Bytes of the distinct CUDA storages in `data` (tuples, lists, dicts, objects' fields)."""
    import torch

    seen: dict[int, int] = {}
    stack, visited = [data], set()
    while stack:
        item = stack.pop()
        if id(item) in visited:
            continue
        visited.add(id(item))
        if isinstance(item, torch.Tensor):
            if item.is_cuda:
                storage = item.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif hasattr(item, "__dict__") and not isinstance(item, type):
            stack.extend(vars(item).values())
    return sum(seen.values())


def is_frugal(data: Any) -> bool:
    """Whether calls on this input are judged frugally (large inputs on the GPU)."""
    threshold = int(os.environ.get(THRESHOLD_VARIABLE) or FRUGAL_MIN_BYTES)
    return device_bytes(data) >= max(threshold, 1)
