"""A hang at import is told apart from a slow build (supervisor/stall.py).

First the watch on its own, with a fake clock and hand-made process tables; then real workers
(sandboxed where bubblewrap runs) judged under a 2 s stall window: a sleeping import fails
within the window, imports that keep a CPU busy, run a compiler or wait on a lock whose holder
works for 2.5 windows pass, and a waiter whose holder sleeps fails.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from pytest_kernelboard.judge import builds, devices
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.supervisor import stall
from pytest_kernelboard.supervisor.environment import default_cache_dir
from pytest_kernelboard.supervisor.proctree import (
    _TICKS_PER_S,
    ProcessInfo,
    Snapshot,
    read_snapshot,
)
from pytest_kernelboard.supervisor.stall import STALL_VARIABLE, ImportWatch, stall_window_s

WORKER, HOLDER = 100, 200


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Table:
    """A process table that the test moves on: the worker (and its child), maybe a holder."""

    def __init__(self) -> None:
        self.cpu_s = {WORKER: 0.0, HOLDER: 0.0}
        self.names = {WORKER: "python", HOLDER: "python"}
        self.child: str | None = None  # a child of the worker, by name
        self.state = "S"  # the worker's own process state ("T": paused by a judge)
        self.waits_for: int | None = None  # the worker blocked on a lock this pid holds

    def __call__(self) -> Snapshot:
        processes = {
            pid: ProcessInfo(pid, 1, self.names[pid], round(cpu * _TICKS_PER_S))
            for pid, cpu in self.cpu_s.items()
        }
        processes[WORKER] = ProcessInfo(
            WORKER, 1, self.names[WORKER], round(self.cpu_s[WORKER] * _TICKS_PER_S), self.state
        )
        if self.child:
            processes[101] = ProcessInfo(101, WORKER, self.child, 0)
        waits = {WORKER: frozenset({self.waits_for})} if self.waits_for else {}
        return Snapshot(processes, waits)


def run(
    watch: ImportWatch,
    clock: Clock,
    table: Table,
    seconds: float,
    cpu_share=None,
    holder_share=None,
):
    """Move on `seconds` in half-second samples; the first failure message, or None."""
    for _ in range(int(seconds / 0.5)):
        clock.now += 0.5
        if cpu_share:
            table.cpu_s[WORKER] += 0.5 * cpu_share
        if holder_share:
            table.cpu_s[HOLDER] += 0.5 * holder_share
        message = watch.check()
        if message:
            return message
    return None


def watch_of(table: Table, clock: Clock, window_s: float = 60.0) -> ImportWatch:
    return ImportWatch(WORKER, window_s, 600.0, clock=clock, snapshot=table)


def test_an_idle_tree_fails_after_exactly_the_window():
    clock, table = Clock(), Table()
    watch = watch_of(table, clock)
    assert run(watch, clock, table, 59.5) is None
    message = run(watch, clock, table, 0.5)
    assert message == (
        "no progress for 60 s during import (no CPU used and no compiler running: the worker's "
        "processes used 0.00 s of CPU in that time); a build that keeps working keeps its whole "
        "build budget of 600 s"
    )


def test_a_busy_import_keeps_going_and_a_trickle_does_not():
    clock, table = Clock(), Table()
    watch = watch_of(table, clock)
    assert run(watch, clock, table, 300, cpu_share=1.0) is None  # five windows at full CPU
    assert run(watch, clock, table, 300, cpu_share=0.05) is None  # a slow import at 5%
    # A runtime's idle threads (0.5% of a core) are not work: the window runs out.
    message = run(watch, clock, table, 61, cpu_share=0.005)
    assert message and "no progress for 60 s" in message
    assert clock.now == pytest.approx(660.0)


def test_a_running_compiler_is_progress_without_cpu():
    clock, table = Clock(), Table()
    watch = watch_of(table, clock)
    table.child = "cicc"  # waiting on its disk, say
    assert run(watch, clock, table, 300) is None
    table.child = "sleep"  # not a compiler
    assert "no progress" in run(watch, clock, table, 61)


def test_a_paused_worker_is_not_charged_for_the_pause():
    """A batch judge stops other workers (SIGSTOP) while it times a case: however long that
    takes, the window starts again when the worker goes on."""
    clock, table = Clock(), Table()
    watch = watch_of(table, clock)
    assert run(watch, clock, table, 30, cpu_share=1.0) is None
    table.state = "T"
    assert run(watch, clock, table, 300) is None
    table.state = "S"
    assert run(watch, clock, table, 59.5) is None  # a full window after the pause ...
    assert "no progress" in run(watch, clock, table, 0.5)  # ... and no more


def test_a_lock_waiter_rides_on_its_holder():
    clock, table = Clock(), Table()
    watch = watch_of(table, clock)
    table.waits_for = HOLDER
    assert run(watch, clock, table, 300, holder_share=1.0) is None  # the holder builds
    table.names[HOLDER] = "ninja"
    assert run(watch, clock, table, 300) is None  # ... or runs a build tool
    table.names[HOLDER] = "python"
    message = run(watch, clock, table, 61)  # a holder that sleeps carries no one
    assert message and "no progress for 60 s" in message


def test_a_lock_the_worker_holds_itself_carries_nothing():
    clock, table = Clock(), Table()
    watch = watch_of(table, clock)
    table.waits_for = WORKER  # a deadlock on its own lock: no one outside gets on
    assert "no progress" in run(watch, clock, table, 61)


def test_no_proc_no_verdict():
    clock = Clock()
    watch = ImportWatch(WORKER, 1.0, 600.0, clock=clock, snapshot=lambda: None)
    clock.now = 100.0
    assert watch.check() is None


def test_the_window_comes_from_the_environment():
    assert stall_window_s({}) == stall.STALL_WINDOW_S == 60.0
    assert stall_window_s({STALL_VARIABLE: "2.5"}) == 2.5
    assert stall_window_s({STALL_VARIABLE: "0"}) is None  # off
    for bad in ("soon", "-1", "inf", "nan"):
        with pytest.raises(ValueError, match=STALL_VARIABLE):
            stall_window_s({STALL_VARIABLE: bad})


def test_a_window_as_long_as_the_budget_leaves_the_budget_to_decide(monkeypatch):
    monkeypatch.setenv(STALL_VARIABLE, "60")
    assert stall.import_watch(1, 600.0).window_s == 60.0
    assert stall.import_watch(1, 60.0) is None
    monkeypatch.setenv(STALL_VARIABLE, "0")
    assert stall.import_watch(1, 600.0) is None


# -- real workers -------------------------------------------------------------------------------
WINDOW_S = 2.0
WORKS_S = 2.5 * WINDOW_S  # how long the passing imports keep at it
STARTUP_SLACK_S = 30.0  # a worker's start-up on a busy machine, as tests/test_hostile.py allows

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")


@pytest.fixture
def judge_import(addone_task, addone_modules, worker_pool, tmp_path, monkeypatch):
    """Judge one correctness case of a submission whose import runs `prelude`; the outcome and
    the seconds it took. The build budget is 120 s: a missed stall would show in the time."""
    monkeypatch.setenv(STALL_VARIABLE, str(WINDOW_S))
    builds.set_compile_timeout_override(120.0)

    def judge(prelude: str):
        submission = tmp_path / "submission.py"
        submission.write_text(
            textwrap.dedent(prelude)
            + "\n\ndef custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"
        )
        judge = SubmissionJudge(
            addone_task, addone_modules, submission, devices.has_cuda(), pool=worker_pool
        )
        try:
            started = time.perf_counter()
            outcome = judge.check_case(Case(TEST, 0, addone_task.tests[0]), 60.0)
            return outcome, time.perf_counter() - started
        finally:
            judge.close()
            worker_pool.prestart()

    yield judge
    builds.set_compile_timeout_override(None)


@linux_only
def test_an_import_that_sleeps_fails_within_the_window(judge_import):
    outcome, elapsed = judge_import("import time\ntime.sleep(1000)")
    assert outcome.status == "timeout", outcome.message
    assert f"no progress for {WINDOW_S:g} s during import" in outcome.message
    assert "build budget of 120 s" in outcome.message
    # The worker's start-up (seconds on a busy machine), then the window: not the budget.
    assert elapsed < WINDOW_S + STARTUP_SLACK_S


def test_a_malformed_window_fails_the_import_and_names_the_variable(judge_import, monkeypatch):
    monkeypatch.setenv(STALL_VARIABLE, "a minute")
    outcome, _ = judge_import("")
    assert outcome.status == "error"
    assert f"{STALL_VARIABLE}='a minute'" in outcome.message


@linux_only
def test_an_import_that_keeps_a_cpu_busy_passes(judge_import):
    outcome, elapsed = judge_import(f"""
        import time
        end = time.perf_counter() + {WORKS_S}
        while time.perf_counter() < end:
            pass
    """)
    assert outcome.status == "passed", outcome.message
    assert elapsed >= WORKS_S


@linux_only
def test_an_import_that_waits_on_a_compiler_passes(judge_import):
    # A child that uses no CPU but runs under a compiler's name (as nvcc waits for cicc).
    outcome, elapsed = judge_import(f"""
        import subprocess, sys
        child = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'nvcc', 0, 0, 0); time.sleep({WORKS_S})"
        subprocess.run([sys.executable, "-c", child], check=True)
    """)
    assert outcome.status == "passed", outcome.message
    assert elapsed >= WORKS_S


def hold_build_lock(key: str, work: str) -> subprocess.Popen:
    """Another worker's build, as the waiter sees it: a process holding the key's build lock
    in the shared build cache while it `work`s ("spin" or "sleep") until it is killed."""
    lock = default_cache_dir() / "builds" / f"{key}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    busy = "while True: pass" if work == "spin" else "time.sleep(120)"
    code = f"""
        import fcntl, time
        with open({str(lock)!r}, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            print("held", flush=True)
            {busy}
    """
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def release_after_waiting(holder: subprocess.Popen, wait_s: float) -> dict[str, float]:
    """Kill the holder once some process has waited `wait_s` on its lock (however long the
    worker took to start); what it saw, in the returned dict, when that is done."""
    seen: dict[str, float] = {}

    def watch() -> None:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline and "waited_s" not in seen and holder.poll() is None:
            found = read_snapshot()
            waiting = any(holder.pid in holders for holders in found.lock_waits.values())
            if waiting and "since" not in seen:
                seen["since"] = time.monotonic()
            if "since" in seen and time.monotonic() - seen["since"] >= wait_s:
                seen["waited_s"] = time.monotonic() - seen["since"]
            time.sleep(0.05)
        holder.kill()

    threading.Thread(target=watch, daemon=True).start()
    return seen


WAIT_FOR_BUILD = """
    from pytest_kernelboard.worker.builds import build_lock, default_build_root
    with build_lock(default_build_root(), "{key}"):
        pass
"""


@pytest.fixture
def lock_key():
    key = f"kb-stall-test-{secrets.token_hex(6)}"
    yield key
    (default_cache_dir() / "builds" / f"{key}.lock").unlink(missing_ok=True)


@linux_only
def test_a_lock_waiter_whose_holder_builds_passes(judge_import, lock_key):
    holder = hold_build_lock(lock_key, "spin")
    seen = release_after_waiting(holder, WORKS_S)
    try:
        outcome, _ = judge_import(WAIT_FOR_BUILD.format(key=lock_key))
    finally:
        holder.kill()
        holder.wait()
    assert outcome.status == "passed", outcome.message
    assert seen["waited_s"] >= WORKS_S  # the worker sat on the lock for 2.5 windows


@linux_only
def test_a_lock_waiter_whose_holder_sleeps_fails(judge_import, lock_key):
    holder = hold_build_lock(lock_key, "sleep")
    seen = release_after_waiting(holder, 60.0)
    try:
        outcome, elapsed = judge_import(WAIT_FOR_BUILD.format(key=lock_key))
        failed_at = time.monotonic()
    finally:
        holder.kill()
        holder.wait()
    assert outcome.status == "timeout", outcome.message
    assert f"no progress for {WINDOW_S:g} s during import" in outcome.message
    assert failed_at - seen["since"] < WINDOW_S + 5.0  # a window after it began to wait
    assert elapsed < WINDOW_S + STARTUP_SLACK_S
