"""The judge's clock check on a busy host: run-queue waits explain unseen time, and only when
the worker did not cause them (supervisor/host_waits.py, judge/outside_clock.py)."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import types

import pytest

from pytest_kernelboard.channel.protocol import Op
from pytest_kernelboard.judge.measure import HOST_WAIT
from pytest_kernelboard.judge.outside_clock import judged_times, unaccounted
from pytest_kernelboard.supervisor import host_waits
from pytest_kernelboard.supervisor.client import WorkerProcess
from pytest_kernelboard.supervisor.host_waits import (
    CPU_SLACK_US,
    TICK_US,
    HostWaitMeter,
    ThreadTimes,
    TreeSnapshot,
    ran_between,
)

COUNTS = host_waits.thread_times()
needs_counts = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or COUNTS is None or COUNTS.run_ns == 0,
    reason="this kernel keeps no per-thread run-queue counts (schedstat)",
)


def _snapshot(root: int) -> TreeSnapshot | None:
    reader = host_waits.TreeReader()
    try:
        return reader.snapshot(root)
    finally:
        reader.close()


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _spin_pinned(cpu: int, seconds: float) -> None:
    os.sched_setaffinity(0, {cpu})
    _spin(seconds)


def _spin_on_signal(cpu: int, go, done, seconds: float) -> None:
    os.sched_setaffinity(0, {cpu})
    go.wait()
    _spin(seconds)
    done.set()
    time.sleep(1.0)  # alive when the meter reads it after the "request"


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
        payload=payload,
        outside_us=6608.6,
        elapsed_s=0.0067,
        host_transport=False,
        worker_cpu_us=None,
    )
    assert judged_times(types.SimpleNamespace(**vars(reply), host_wait_us=0.0), 21.0, True)[
        "outside_unseen"
    ]
    judged = judged_times(types.SimpleNamespace(**vars(reply), host_wait_us=6100.0), 21.0, True)
    assert judged["outside_unseen"] is None and judged[HOST_WAIT] == 6100.0


def _thread_on_signal(started, done, finish) -> None:
    """A process whose second thread spins 0.2 s, then waits for `done` and ends."""
    extra = threading.Thread(target=lambda: (_spin(0.2), done.wait()))
    extra.start()
    started.set()
    extra.join()
    finish.wait(30)


@needs_counts
def test_a_kept_open_reader_follows_threads_that_come_and_go():
    context = multiprocessing.get_context("fork")
    started, done, finish = context.Event(), context.Event(), context.Event()
    child = context.Process(target=_thread_on_signal, args=(started, done, finish))
    child.start()
    reader = host_waits.TreeReader()
    try:
        started.wait(10)
        first = reader.snapshot(child.pid)
        time.sleep(0.3)
        during = reader.snapshot(child.pid)
        done.set()
        gone = time.perf_counter() + 10  # until the second thread has left /proc
        while len(os.listdir(f"/proc/{child.pid}/task")) > 1 and time.perf_counter() < gone:
            time.sleep(0.01)
        after = reader.snapshot(child.pid)  # its files were open: reading them now fails
        (ended,) = first.threads.keys() - after.threads.keys()
        still_open = [path for path in reader._files if f"/task/{ended.split('/')[1]}/" in path]
    finally:
        finish.set()
        child.join()
        reader.close()
    assert len(first.threads) == 2 and len(after.threads) == 1
    assert ran_between(first, during) > 10_000  # µs: the thread's spinning is counted
    assert ran_between(during, after) is None  # it ended: what it ran since cannot be told
    assert still_open == []  # the ended thread's files were closed by the reading after it
    assert reader._files == {}


def _meter(judge_wait_ns: int, main: ThreadTimes, helper_run_ns: int = 0) -> HostWaitMeter:
    """A meter as if around one request: the judge waited, the worker's main thread (pid 7)
    ran and waited `main`, a helper thread of its ran `helper_run_ns`."""
    meter = HostWaitMeter(7)
    before = TreeSnapshot({"7/7": ThreadTimes(), "7/8": ThreadTimes()}, ticks=0)
    after = TreeSnapshot({"7/7": main, "7/8": ThreadTimes(helper_run_ns, 0)}, ticks=0)
    meter._tree = [before, after]
    meter._judge = [ThreadTimes(0, 0), ThreadTimes(0, judge_wait_ns)]
    return meter


def test_the_judges_waits_and_the_workers_beyond_its_interval_are_explained():
    meter = _meter(3_000_000, ThreadTimes(400_000, 2_500_000))  # ns
    assert meter.ran_us() == pytest.approx(400.0)  # what the tree ran, for the messages
    # The main thread waited 2.5 ms, at most 0.3 ms of it inside its 0.3 ms interval.
    assert meter.explained_us(wall_us=300.0) == pytest.approx(3000.0 + 2200.0)
    assert _meter(0, ThreadTimes(400_000, 200_000)).explained_us(300.0) == 0.0


def test_a_low_priority_spinners_waits_explain_nothing():
    # A helper thread that is runnable all the time but rarely runs waits the whole request:
    # only the request thread's waits count, and it did not wait.
    meter = _meter(0, ThreadTimes(400_000, 0), helper_run_ns=100_000)
    meter._tree[1].threads["7/8"] = ThreadTimes(100_000, 6_000_000)
    assert meter.explained_us(wall_us=300.0) == 0.0


def test_waits_count_only_while_the_worker_kept_to_its_interval():
    beyond = int((300 + CPU_SLACK_US + 1) * 1e3) - 400_000
    busy = _meter(3_000_000, ThreadTimes(400_000, 2_500_000), helper_run_ns=beyond)
    assert busy.explained_us(wall_us=300.0) == 0.0  # its helper ran 2 ms beyond the interval


def test_a_thread_that_ended_or_came_and_went_hides_no_run_time():
    before = TreeSnapshot({"7/7": ThreadTimes(), "7/9": ThreadTimes(5, 0)}, ticks=100)
    after = TreeSnapshot({"7/7": ThreadTimes(400_000, 0)}, ticks=100)
    assert ran_between(before, after) is None  # 7/9 ended: its count left with it
    unseen = TreeSnapshot({"7/7": ThreadTimes(400_000, 0)}, ticks=103)  # one came and went
    assert ran_between(TreeSnapshot({"7/7": ThreadTimes()}, 100), unseen) == pytest.approx(TICK_US)
    new = TreeSnapshot({"7/7": ThreadTimes(400_000, 0), "7/10": ThreadTimes(900_000, 0)}, 100)
    assert ran_between(TreeSnapshot({"7/7": ThreadTimes()}, 100), new) == pytest.approx(1300.0)


def test_nothing_is_explained_where_the_kernel_does_not_say():
    meter = _meter(3_000_000, ThreadTimes(400_000, 2_500_000))
    meter._judge[0] = None
    assert meter.explained_us(100.0) == 0.0
    assert HostWaitMeter(0).explained_us(100.0) == 0.0  # never started
    assert _snapshot(2**22 + 12345) is None  # no such process


# -- the kernel's counts, read as the judge reads them --------------------------------------------
@needs_counts
def test_a_trees_run_time_includes_its_childrens_threads():
    parent = multiprocessing.get_context("fork").Process(target=_parent_of_a_spinner, args=(1.0,))
    parent.start()
    try:
        time.sleep(0.1)
        before = _snapshot(parent.pid)
        time.sleep(0.5)
        after = _snapshot(parent.pid)
    finally:
        parent.join()
    assert len(after.threads) >= 2  # the parent's thread and the grandchild's
    ran = ran_between(before, after) / 1e6
    assert ran > 0.05, ran  # the grandchild's spinning (0.5 s of it), seen from the parent's PID


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
    assert after.wait_ns - before.wait_ns > 5_000_000  # over 5 ms of 120 ms spent waiting


@needs_counts
def test_a_judged_request_reads_the_real_workers_tree_and_the_judges_thread():
    """The whole path: a started worker (sandboxed where the runner is), its tree read by its
    host PID with its main thread (the one serving requests) in it, and the judge's thread."""
    worker = WorkerProcess()
    try:
        worker.ping()
        reply = worker.request(Op.PING, 30, host_waits=True)
        meter = worker._host_waits
        (tree0, tree1), (judge0, judge1) = meter._tree, meter._judge
        main = f"{worker.process.pid}/{worker.process.pid}"
        assert main in tree0.threads and main in tree1.threads
        assert tree1.threads[main].run_ns > tree0.threads[main].run_ns  # it served the ping
        assert judge0 is not None and judge1 is not None
        assert ran_between(tree0, tree1) is not None
        assert reply.host_wait_us >= 0.0
        assert reply.worker_cpu_us == meter.ran_us() > 0.0  # the judge's reading, for messages
        assert worker.request(Op.PING, 30).host_wait_us == 0.0  # only when asked
    finally:
        worker.close()
    assert worker._host_waits is None  # its files closed with it


@needs_counts
def test_a_meter_sees_a_judge_and_a_worker_that_wait_for_their_cpu():
    """Real threads and processes: the "worker" child spins 40 ms (reported as a 50 ms
    interval) on a CPU two spinners share; the "judge" thread spins 100 ms on another two
    spinners share. Both wait, and what they waited is explained."""
    cpus = sorted(os.sched_getaffinity(0))
    judge_cpu, worker_cpu = cpus[0], cpus[-1]
    context = multiprocessing.get_context("fork")
    spinners = [
        context.Process(target=_spin_pinned, args=(cpu, 2.0))
        for cpu in (judge_cpu, judge_cpu, worker_cpu, worker_cpu)
    ]
    go, done = context.Event(), context.Event()
    child = context.Process(target=_spin_on_signal, args=(worker_cpu, go, done, 0.04))
    previous = os.sched_getaffinity(0)
    child.start()
    for spinner in spinners:
        spinner.start()
    try:
        time.sleep(0.2)
        os.sched_setaffinity(0, {judge_cpu})
        meter = HostWaitMeter(child.pid)
        meter.start()
        meter.sent()
        go.set()
        _spin(0.1)
        done.wait()  # it has served its "request"
        meter.stop()
        explained = meter.explained_us(wall_us=50_000.0)
    finally:
        os.sched_setaffinity(0, previous)
        for spinner in spinners:
            spinner.join()
        child.join()
    assert explained > 20_000.0, explained  # the judge's 100 ms spin alone waits ~100 ms


def test_where_a_flagged_calls_time_went_goes_into_the_message_only():
    """`pre_us` and `post_us` are the worker's claims and `worker_cpu_us` the judge's reading of
    its processes' CPU time: they say where the unseen time went, and change no verdict; a
    report that is not a number is left out."""
    from pytest_kernelboard.channel.protocol import ProtocolError, validate
    from pytest_kernelboard.judge.outside_clock import judged_times

    message = unaccounted(282.0, 7597.3, 30.0, pre_us=6900.0, post_us=40.0, worker_cpu_us=7100.0)
    assert "the worker reports 6900.0 us before the call" in message
    assert "40.0 us after it, packing the output" in message
    assert "its processes ran 7100.0 us of CPU during the request" in message
    assert unaccounted(257.2, 6608.6, 21.0, host_wait_us=6100.0, pre_us=6000.0) is None

    class Reply:
        payload = {"device_us": 250.0, "wall_us": 282.0}
        outside_us, elapsed_s, host_transport, host_wait_us = 7597.3, 0.0076, False, 0.0
        worker_cpu_us = None

    judged = judged_times(Reply(), 30.0, use_cuda=True)
    assert judged["outside_unseen"] and "reports" not in judged["outside_unseen"]
    assert "(" not in judged["outside_unseen"]  # nothing known: no empty parenthesis
    Reply.payload = {**Reply.payload, "pre_us": 6900.0, "post_us": 12.5}
    Reply.worker_cpu_us = 350.0
    unseen = judged_times(Reply(), 30.0, use_cuda=True)["outside_unseen"]
    assert "reports 6900.0 us" in unseen and "12.5 us after it" in unseen
    assert "ran 350.0 us of CPU" in unseen
    # The protocol lets only a finite, non-negative number through as either report.
    for key in ("pre_us", "post_us"):
        for claim in ("7 ms", float("nan"), -1.0):
            with pytest.raises(ProtocolError, match=key):
                validate("time", {"output": None, "device_us": 1.0, "wall_us": 2.0, key: claim})
