"""Whether any kernel has run on the judge's GPU since a moment: NVML's utilisation samples.

Before a timed case starts while a stopped worker's hung correctness call stays open (a call
set aside, batch/turns.py), the judge must know that the worker left nothing running: a
stopped process launches nothing more, but what it queued before the stop runs on. NVML's
samples of GPU utilisation say, each for the period since the one before, whether any kernel
ran. On an H200 they come every 200 ms; a process stopped inside a long kernel reads busy
until that kernel ends (benchmarks/probes/gpu_idle.py). A tiny kernel's own latency does not
tell: it read 0.1 – 0.3 ms with the other process idle and 0.2 – 0.7 ms with its kernels running,
the GPU switching between the two in fractions of a millisecond (`gpu_idle.py --launch`).
"""

from __future__ import annotations

import time

from . import devices

WAIT_S = 1.0  # for a sample whose whole period lies after the moment (200 ms apart on an H200)
POLL_S = 0.02


def quiet_since(cuda_index: int, since: float, wait_s: float = WAIT_S) -> bool:
    """The first utilisation sample whose period began at or after `since` (time.time())
    reads 0: no kernel ran in it. False where NVML cannot say within wait_s."""
    device = devices.nvml_device(cuda_index)
    if device is None:
        return False
    nvml, handle = device
    since_us = int(since * 1e6)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        stamps = _samples(nvml, handle, since_us - 2_000_000)  # the one before it too
        for (began, _), (_, percent) in zip(stamps, stamps[1:], strict=False):
            if began >= since_us:
                return percent == 0
        time.sleep(POLL_S)
    return False


def _samples(nvml, handle, after_us: int) -> list[tuple[int, int]]:
    """(timestamp µs, utilisation %) of the samples newer than after_us, oldest first."""
    try:
        _, values = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, after_us)
    except nvml.NVMLError:
        return []
    return sorted((int(v.timeStamp), int(v.sampleValue.uiVal)) for v in values)
