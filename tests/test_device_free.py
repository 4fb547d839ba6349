"""The judge's check that a stopped worker left no kernel running on its GPU (NVML's
utilisation samples), on a real GPU: busy while a stopped process's long kernel runs on,
idle once it has ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pytest_kernelboard.judge import device_free, devices

pytestmark = pytest.mark.skipif(
    not devices.has_cuda(), reason="needs a CUDA device and NVML: it reads the GPU's samples"
)

LONG_KERNEL = r"""
import time, torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
torch.cuda._sleep(20_000_000_000)  # seconds at any clock: it runs until the process ends
print("queued", flush=True)
time.sleep(60)
"""


def test_a_stopped_process_s_kernel_reads_busy_until_it_ends_then_idle():
    child = subprocess.Popen([sys.executable, "-c", LONG_KERNEL], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b"queued"
        os.kill(child.pid, signal.SIGSTOP)
        assert not device_free.quiet_since(0, time.time()), "read idle while its kernel ran"
    finally:
        os.kill(child.pid, signal.SIGCONT)
        child.kill()  # its context goes, and its kernel with it
        child.wait()
    assert device_free.quiet_since(0, time.time()), "read busy with nothing running"
