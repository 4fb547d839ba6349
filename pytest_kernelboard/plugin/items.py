"""The test items kernelboard makes (a case, a self-check), and the GPU lease each item holds
under `pytest -n` (xdist_gpus.py)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Generator

import pytest

from ..judge.gpu_lease import GpuLeases, Lease, LeaseTimeout
from ..spec.task import TaskSpec

LEASE = pytest.StashKey[Lease]()
REPORT_SECTION = "kernelboard GPU lease"


class CaseItem(pytest.Function):
    """A kernelboard item. Its failure header is the command that reruns just it (pytest's
    own would be the collector chain joined by dots, which no command takes); never a suffix of
    the node id, so verbose result lines stay as pytest writes them."""

    def reportinfo(self):
        # Line 0, not None: pytest-benchmark warns through warn(), which needs a line.
        return self.path, 0, f"pytest {self.config.cwd_relative_nodeid(self.nodeid)}"


def task_of(item: pytest.Item) -> TaskSpec | None:
    """The leaderboard an item judges or self-checks, or None (a plain test)."""
    for node in reversed(item.listchain()):
        task = getattr(node, "task", None)
        if isinstance(task, TaskSpec):
            return task
    return None


def runnable_world_size(task: TaskSpec, host_gpus: int) -> int:
    """The most GPUs a case of this leaderboard runs on here: its largest world_size the host
    has. A case asking for more is skipped with the reason, on no GPU but the worker's own."""
    if not task.multi_gpu:
        return 1
    sizes = (int(case["world_size"]) for case in (*task.tests, *task.benchmarks))
    return max((size for size in sizes if size <= host_gpus), default=1)


def gpus_needed(item: pytest.Item, host_gpus: int) -> int:
    """How many GPUs an item leases: a `gpus(n)` marker's n; an item of a multi-GPU
    leaderboard, the most its cases run on here; else one. Never more than the host has."""
    marker = item.get_closest_marker("gpus")
    if marker is not None:
        count = marker.args[0] if marker.args else None
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(
                f"{item.nodeid}: the gpus marker takes a positive whole number, got {count!r}"
            )
    else:
        task = task_of(item)
        count = runnable_world_size(task, host_gpus) if task is not None else 1
    return min(count, host_gpus)


def progress_line(config: pytest.Config, line: str) -> None:
    """A line on stderr past pytest's capture: an xdist worker's stderr is the run's terminal."""
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        sys.stderr.write(f"kernelboard {line}\n")
        sys.stderr.flush()


class ItemLeases:
    """Under `pytest -n`: each item holds its GPU lease from its setup to its teardown (a
    submission's last item tears down its workers, which give their GPU memory back then)."""

    def __init__(self, leases: GpuLeases):
        self.leases = leases

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        try:
            count = gpus_needed(item, len(self.leases.gpus))
            lease = self.leases.acquire(
                count, item.nodeid, on_wait=lambda line: progress_line(item.config, line)
            )
        except (ValueError, LeaseTimeout) as exc:
            pytest.fail(str(exc), pytrace=False)
        item.stash[LEASE] = lease
        if lease.waited_s >= self.leases.notice_after_s:  # a wait worth reporting
            devices = ", ".join(lease.devices)
            item.add_report_section(
                "setup",
                REPORT_SECTION,
                f"waited {lease.waited_s:.0f} s for GPU(s) {devices}: {lease.waited_for}",
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        try:
            return (yield)
        finally:
            lease = item.stash.get(LEASE, None)
            if lease is not None:
                lease.release()
                del item.stash[LEASE]
