"""Which test leaves the judge's torch_shm_manager gone? A pytest plugin for a GPU host.

    PYTHONPATH=benchmarks/probes python -m pytest -p shm_watch -s \
        tests/test_distributed_gpu.py tests/test_distributed.py

CPU tensors cross from the judge to its workers as shared-memory files registered with the
judge's torch_shm_manager (supervisor/shm_manager.py). On a 2-GPU host, the gloo cases of
tests/test_distributed.py failed with "the judge raised: RuntimeError: Broken pipe" when they
ran after tests/test_distributed_gpu.py in the same process, the manager then a zombie; alone
they passed. After each test this prints the judge's manager processes (pid and state: S
sleeping, Z exited) and how many descriptors the judge holds, so the first test after which the
manager reads Z, or is missing, is the one that ends it.
"""

from __future__ import annotations

import os

from pytest_kernelboard.supervisor.proctree import read_snapshot


def managers_of(parent: int) -> list[tuple[int, str]]:
    """The torch_shm_manager children of `parent`: (pid, state letter)."""
    snapshot = read_snapshot()
    processes = snapshot.processes.values() if snapshot is not None else ()
    return [
        (p.pid, p.state)
        for p in processes
        if p.ppid == parent and p.name.startswith("torch_shm_man")  # comm is cut at 15
    ]


def pytest_runtest_logfinish(nodeid: str, location: tuple) -> None:
    managers = managers_of(os.getpid()) or "none"
    descriptors = len(os.listdir("/proc/self/fd"))
    print(f"\nshm-watch after {nodeid}: managers {managers}, judge fds {descriptors}", flush=True)
