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
