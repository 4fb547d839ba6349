"""The hard limits a worker sets on itself before it imports a submission: no way back."""

from __future__ import annotations

import os
import resource

from ..channel.cage import LIMITS_VARIABLE

MAX_PROCESSES = 512  # threads count too: torch starts one per core
MAX_OPEN_FILES = 4096
# One file. The largest a worker writes is a reply's host copy of an output too large for its
# device window: one shared-memory file per tensor (KernelBench's 32768 x 32768 fp32 matmuls:
# 4 GiB, which a 4 GiB limit refused with EFBIG). Scratch and /tmp are sized tmpfs besides.
MAX_FILE_BYTES = 64 << 30


def apply_limits(mode: str | None = None) -> None:
    """Called by the worker itself before it imports a submission; hard limits, no way back.

    `mode` is what the judge set in LIMITS_VARIABLE: "sandboxed" or "plain". Processes are
    bounded only in the sandbox, where the count is per user namespace (outside, it would
    count every process of the judge's user).
    """
    mode = mode if mode is not None else os.environ.pop(LIMITS_VARIABLE, "")
    if not mode:
        return
    limits = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, MAX_OPEN_FILES),
        (resource.RLIMIT_FSIZE, MAX_FILE_BYTES),
    ]
    if mode == "sandboxed":
        limits.append((resource.RLIMIT_NPROC, MAX_PROCESSES))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass  # a lower limit is already in force
