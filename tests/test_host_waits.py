"""The judge's clock check on a busy host: run-queue waits explain unseen time, and only when
the worker did not cause them (worker/host_waits.py, judge/outside_clock.py)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import types

import pytest

from pytest_kernelboard.judge.measure import HOST_WAIT
from pytest_kernelboard.judge.outside_clock import judged_times, unaccounted
from pytest_kernelboard.worker import host_waits
from pytest_kernelboard.worker.client import WorkerProcess
from pytest_kernelboard.worker.host_waits import CPU_SLACK_US, HostWaitMeter, TreeTimes
from pytest_kernelboard.worker.protocol import Op

COUNTS = host_waits.thread_times()
needs_counts = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or COUNTS is None or COUNTS.run_ns == 0,
    reason="this kernel keeps no per-thread run-queue counts (schedstat)",
)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _spin_pinned(cpu: int, seconds: float) -> None:
    os.sched_setaffinity(0, {cpu})
    _spin(seconds)


def _parent_of_a_spinner(seconds: float) -> None:
    child = multiprocessing.get_context("fork").Process(target=_spin, args=(seconds,))
    child.start()
    child.join()


# -- the rule, as the H200 showed it -------------------------------------------------------------
def test_a_busy_hosts_waits_explain_the_unseen_time():
    # 16 host spinners on 16 CPUs: a 6.6 ms request, 257 µs accounted for by the worker.
    assert "outside its timed interval" in unaccounted(257.2, 6608.6, 21.0)
    assert unaccounted(257.2, 6608.6, 21.0, host_wait_us=6100.0) is None
    # Waits that explain only part of it leave the rest to be judged, and the message says so.
    message = unaccounted(257.2, 12_000.0, 80.0, host_wait_us=500.0)
    assert "500.0 us of it waiting for the host's CPUs" in message
    assert "11162.8 us ran outside" in message


def test_the_replys_host_wait_reaches_the_payload():
    payload = {"device_us": 250.0, "wall_us": 257.2}
    reply = types.SimpleNamespace(
        payload=payload, outside_us=6608.6, elapsed_s=0.0067, host_transport=False
    )
    assert judged_times(types.SimpleNamespace(**vars(reply), host_wait_us=0.0), 21.0, True)[
        "outside_unseen"
    ]
    judged = judged_times(types.SimpleNamespace(**vars(reply), host_wait_us=6100.0), 21.0, True)
    assert judged["outside_unseen"] is None and judged[HOST_WAIT] == 6100.0


@needs_counts
def test_a_kept_open_reader_follows_threads_that_come_and_go():
    reader = host_waits.TreeReader()
    try:
        first = reader.times(os.getpid())
        done = threading.Event()
        extra = threading.Thread(target=lambda: (_spin(0.2), done.wait()))
        extra.start()
        time.sleep(0.25)
        during = reader.times(os.getpid())
        done.set()
        extra.join()
        after = reader.times(os.getpid())  # its files were open: reading them now fails
    finally:
        reader.close()
    assert (during - first).run_ns > 100_000_000  # the new thread's spinning is in the sum
    assert after is not None and after.run_ns >= first.run_ns
    assert reader._files == {}


def _meter(judge: tuple[int, int], worker: tuple[int, int]) -> HostWaitMeter:
    meter = HostWaitMeter(0)
    meter._judge = [TreeTimes(0, 0), TreeTimes(0, judge[1])]
    meter._worker = [TreeTimes(0, 0), TreeTimes(*worker)]
    return meter


def test_waits_count_only_while_the_worker_kept_to_its_interval():
    meter = _meter(judge=(0, 3_000_000), worker=(400_000, 2_500_000))  # ns
    assert meter.explained_us(wall_us=300.0) == pytest.approx(5500.0)
    # Its threads ran 2 ms beyond the interval and the slack: they made its own thread wait.
    busy = _meter(judge=(0, 3_000_000), worker=(int((300 + CPU_SLACK_US + 1) * 1e3), 2_500_000))
    assert busy.explained_us(wall_us=300.0) == 0.0


def test_nothing_is_explained_where_the_kernel_does_not_say():
    meter = HostWaitMeter(0)
    meter._judge, meter._worker = [None, TreeTimes(0, 9)], [TreeTimes(), TreeTimes(0, 9)]
    assert meter.explained_us(100.0) == 0.0
    assert HostWaitMeter(0).explained_us(100.0) == 0.0  # never started
    assert host_waits.tree_times(2**22 + 12345) is None  # no such process


# -- the kernel's counts, read as the judge reads them --------------------------------------------
@needs_counts
def test_a_trees_run_time_includes_its_childrens_threads():
    parent = multiprocessing.get_context("fork").Process(target=_parent_of_a_spinner, args=(1.0,))
    parent.start()
    try:
        time.sleep(0.1)
        before = host_waits.tree_times(parent.pid)
        time.sleep(0.5)
        after = host_waits.tree_times(parent.pid)
    finally:
        parent.join()
    ran = (after - before).run_ns / 1e9
    assert ran > 0.3, ran  # the grandchild's spinning, seen from the parent's PID


@needs_counts
def test_a_thread_sharing_its_cpu_with_a_spinner_is_seen_waiting():
    cpu = min(os.sched_getaffinity(0))
    spinner = multiprocessing.get_context("fork").Process(target=_spin_pinned, args=(cpu, 1.5))
    previous = os.sched_getaffinity(0)
    spinner.start()
    try:
        time.sleep(0.1)
        os.sched_setaffinity(0, {cpu})
        before = host_waits.thread_times()
        for _ in range(20):  # wake up often: each wake-up queues behind the spinner
            _spin(0.005)
            time.sleep(0.001)
        after = host_waits.thread_times()
    finally:
        os.sched_setaffinity(0, previous)
        spinner.join()
    assert (after - before).wait_ns > 5_000_000  # over 5 ms of 120 ms spent waiting


@needs_counts
def test_a_request_to_a_real_worker_measures_the_judges_wait():
    """The whole path: a started (sandboxed where the runner is) worker, its tree read by its
    host PID, the judge's thread pinned with spinners on its CPU."""
    worker = WorkerProcess()
    cpu = min(os.sched_getaffinity(0))
    previous = os.sched_getaffinity(0)
    context = multiprocessing.get_context("fork")
    spinners = [context.Process(target=_spin_pinned, args=(cpu, 3.0)) for _ in range(2)]
    try:
        worker.ping()
        quiet = [worker.request(Op.PING, 30, host_waits=True).host_wait_us for _ in range(5)]
        for spinner in spinners:
            spinner.start()
        time.sleep(0.1)
        os.sched_setaffinity(0, {cpu})
        busy = [worker.request(Op.PING, 30, host_waits=True).host_wait_us for _ in range(20)]
        unmeasured = worker.request(Op.PING, 30).host_wait_us
    finally:
        os.sched_setaffinity(0, previous)
        for spinner in spinners:
            spinner.join()
        worker.close()
    assert sum(busy) > 1000.0, busy  # the judge woke behind two spinners, time and again
    assert sum(busy) > 4 * sum(quiet), (quiet, busy)
    assert unmeasured == 0.0  # only asked-for requests read /proc
