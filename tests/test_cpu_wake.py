"""The CPU a batch judge keeps spinning while a case is timed (supervisor/cpu_wake.py): stopped
until a timed case, spinning through it, on its own CPU, and gone with its judge."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from pytest_kernelboard.supervisor.cpu_wake import CpuWake
from pytest_kernelboard.supervisor.pool import WorkerPool
from pytest_kernelboard.supervisor.proctree import process_state

needs_proc = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self"),
    reason="needs CPU affinity and /proc",
)


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@needs_proc
def test_the_spinner_runs_on_its_cpu_only_while_awake():
    cpu = max(os.sched_getaffinity(0))
    wake = CpuWake(cpu)
    try:
        pid = wake.process.pid
        assert process_state(pid) in ("T", "t")  # stopped from the start
        assert os.sched_getaffinity(pid) == {cpu}
        idle = cpu_seconds(pid)
        time.sleep(0.2)
        assert cpu_seconds(pid) - idle < 0.05
        with wake.awake():
            time.sleep(0.3)
            assert process_state(pid) == "R"
        spun = cpu_seconds(pid) - idle
        assert spun > 0.1, spun  # it ran for most of the 0.3 s
        time.sleep(0.05)
        assert process_state(pid) in ("T", "t")
    finally:
        wake.close()
    assert wake.process.poll() is not None


@needs_proc
def test_the_spinner_ends_with_the_judge_that_started_it():
    program = (
        "import os, sys\n"
        "from pytest_kernelboard.supervisor.cpu_wake import CpuWake\n"
        "wake = CpuWake(min(os.sched_getaffinity(0)))\n"
        "os.kill(wake.process.pid, 18)\n"  # SIGCONT: spinning when its judge dies
        "print(wake.process.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 5
    while process_state(pid) not in (None, "Z", "X") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_state(pid) in (None, "Z", "X")


def test_a_quiet_pool_keeps_its_wake_cpu_spinning_once_for_the_outermost_turn():
    events = []

    class RecordingWake:
        @contextmanager
        def awake(self):
            events.append("spin")
            yield
            events.append("stop")

        def close(self):
            events.append("closed")

    pool = WorkerPool(spares=0)
    pool.wake = RecordingWake()
    with pool.quiet():
        with pool.quiet():  # re-entrant: the same turn
            assert events == ["spin"]
    assert events == ["spin", "stop"]
    pool.close()
    assert events == ["spin", "stop", "closed"]
