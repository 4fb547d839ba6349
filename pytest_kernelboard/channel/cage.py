"""The worker's cage as both sides see it: the judge builds the sandbox and the worker's
environment from these, and the worker and the zygote read them inside.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

SCRATCH_BYTES = 1 << 30  # a worker's home and /tmp, each a tmpfs of this size
MAX_RANKS = 16  # the most ranks one multi-GPU case's sandbox (one zygote request) holds
# Set by the judge for the worker: the limits it applies to itself, "sandboxed" or "plain"
# (worker/limits.py).
LIMITS_VARIABLE = "KB_WORKER_LIMITS"
# Set by the judge for workers that will be timed: make the blocking kernel (worker/blocking.py)
# while starting, off the critical path.
WARM_TIMING_VARIABLE = "KERNELBOARD_WARM_TIMING"
# Set by a batch judge that keeps a CPU core for timed calls (judge/timing_core.py): the CPU
# every timed case of the worker runs on (worker/timing.py).
TIMING_CPU_VARIABLE = "KERNELBOARD_TIMING_CPU"
# Set to 0 (by whoever starts the judge) to leave timed calls on whichever CPU the scheduler
# gives them: no CPU chosen per case (worker/cpu_choice.py), no core kept (judge/timing_core.py).
PIN_VARIABLE = "KERNELBOARD_PIN_CPU"


def gpu_devices(minors: Iterable[int] | None = None, dev: Path = Path("/dev")) -> list[str]:
    """The NVIDIA device nodes (nvidia0..N, nvidiactl, nvidia-uvm, caps): nothing else of /dev.
    minors: only these GPUs' own nodes (/dev/nvidia<minor>) among nvidia0..N; None: all."""
    kept = None if minors is None else {f"nvidia{minor}" for minor in minors}
    found = sorted(
        str(p)
        for p in dev.glob("nvidia*")
        if kept is None or not p.name[len("nvidia") :].isdigit() or p.name in kept
    )
    if (dev / "dri").is_dir():
        found.append(str(dev / "dri"))
    return found
