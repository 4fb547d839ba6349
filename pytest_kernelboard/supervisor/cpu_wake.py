"""A busy CPU beside a timed case, so that the host's CPUs are not in their idle states.

A launch-bound call's time is its host time, and a CPU runs the same code at very different
speeds depending on what the host's other CPUs are doing. On a KVM guest of an H200 host, a
probe of interpreter work on one CPU read 16.6 - 17.3 µs with the guest's other CPUs idle and
8.1 - 8.5 µs while a process spun on any of most of the others (docs/benchmarks.md, "Where the
host-bound verdicts' noise comes from"). A batch stops every other worker while a case is timed,
so the host is at its quietest exactly then, and how quiet depends on the moment. The judge
keeps one small process spinning on a CPU of its own for as long as a case is timed (the
reference's and every candidate's alike) and stopped otherwise: each timing then finds the
host awake. Which CPU: the one whose spinning made the timing CPU fastest when the judge
started (judge/timing_core.py), so not one sharing its physical core.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from .pausing import stop

# Spins until its judge (named on its command line, which it may outlive before it first
# runs) has gone: nothing to clean up after a crash.
SPIN = "import os, sys\nparent = int(sys.argv[1])\nwhile os.getppid() == parent:\n    pass\n"


class CpuWake:
    """One spinning process on `cpu`, stopped until `awake`."""

    def __init__(self, cpu: int) -> None:
        self.cpu = cpu
        self.process = subprocess.Popen(
            [sys.executable, "-S", "-c", SPIN, str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.move(cpu)
        stop([self.process.pid])

    def move(self, cpu: int) -> None:
        """Spin on `cpu` from now on."""
        os.sched_setaffinity(self.process.pid, {cpu})
        self.cpu = cpu

    @contextmanager
    def awake(self) -> Iterator[None]:
        """Spinning for the duration."""
        os.kill(self.process.pid, signal.SIGCONT)
        try:
            yield
        finally:
            os.kill(self.process.pid, signal.SIGSTOP)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
