"""supervisor/proctree.py: a process tree's CPU time, its compilers and the locks it waits on, from
a hand-made /proc and from this machine's own."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pytest_kernelboard.supervisor.proctree import (
    _TICKS_PER_S,
    ProcessInfo,
    Snapshot,
    is_compiler,
    read_snapshot,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")


def write_stat(
    proc: Path, pid: int, ppid: int, name: str, ticks: tuple[int, int, int, int], state="S"
):
    utime, stime, cutime, cstime = ticks
    folder = proc / str(pid)
    folder.mkdir(parents=True)
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime ...
    (folder / "stat").write_text(
        f"{pid} ({name}) {state} {ppid} {pid} {pid} 0 -1 4194304 100 0 0 0 "
        f"{utime} {stime} {cutime} {cstime} 20 0 1 0 12345 0 0\n"
    )


@pytest.fixture
def fake_proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    write_stat(proc, 1, 0, "init", (5, 5, 0, 0))
    write_stat(proc, 100, 1, "bwrap", (0, 0, 0, 0))  # a sandboxed worker's root
    write_stat(proc, 101, 100, "python (kb) ", (300, 50, 40, 10))  # spaces and parentheses
    write_stat(proc, 102, 101, "cc1plus", (70, 30, 0, 0))
    write_stat(proc, 200, 1, "python", (900, 100, 0, 0), state="T")  # another worker, paused
    (proc / "self").mkdir()  # not a pid: ignored
    (proc / "locks").write_text(
        textwrap.dedent("""\
            1: FLOCK  ADVISORY  WRITE 200 fe:00:2146898 0 EOF
            1: -> FLOCK  ADVISORY  WRITE 101 fe:00:2146898 0 EOF
            1:  -> FLOCK  ADVISORY  WRITE 300 fe:00:2146898 0 EOF
            2: POSIX  ADVISORY  WRITE 1 fe:00:555 0 EOF
            2: -> POSIX  ADVISORY  WRITE 102 fe:00:555 0 EOF
            3: OFDLCK ADVISORY  READ  -1 00:05:7 0 EOF
            3: -> FLOCK  ADVISORY  WRITE 102 fe:00:777 0 EOF
            """)
    )
    return proc


def test_a_tree_is_its_root_and_every_descendant(fake_proc):
    snapshot = read_snapshot(fake_proc)
    assert snapshot.tree(100) == {100, 101, 102}
    assert snapshot.tree(200) == {200}
    assert snapshot.tree(999) == frozenset()  # gone
    assert snapshot.processes[101].name == "python (kb) "


def test_cpu_counts_the_children_already_reaped(fake_proc):
    snapshot = read_snapshot(fake_proc)
    # 300 + 50 + 40 + 10 for the python (its exited children included) and 100 for cc1plus
    assert snapshot.cpu_s(snapshot.tree(100)) == pytest.approx(500 / _TICKS_PER_S)
    assert snapshot.compilers(snapshot.tree(100)) == ["cc1plus"]
    assert snapshot.compilers(snapshot.tree(200)) == []


def test_a_stopped_process_is_seen(fake_proc):
    snapshot = read_snapshot(fake_proc)
    assert snapshot.processes[200].state == "T" and snapshot.stopped({200})
    assert not snapshot.stopped(snapshot.tree(100))


def test_lock_waits_name_the_holder_of_the_same_kind_of_lock(fake_proc):
    snapshot = read_snapshot(fake_proc)
    tree = snapshot.tree(100)
    # 101 waits for 200's flock; 102 for init's POSIX lock; an OFD lock names no process, and
    # a wait on a file nobody is seen holding names no one.
    assert snapshot.holders_awaited(tree) == {200, 1}
    assert snapshot.lock_waits[300] == {200}  # a deeper waiter waits for the holder too
    assert snapshot.holders_awaited(frozenset({200})) == frozenset()  # holders wait on nothing


def test_a_missing_proc_reads_as_none(tmp_path):
    assert read_snapshot(tmp_path / "nowhere") is None


@pytest.mark.parametrize(
    ("name", "compiler"),
    [
        ("nvcc", True),
        ("cicc", True),
        ("ptxas", True),
        ("ptxas-blackwell", True),
        ("ninja", True),
        ("gcc-12", True),
        ("g++-13", True),
        ("x86_64-linux-gn", True),  # x86_64-linux-gnu-g++-12, cut to 15 characters
        ("ld.gold", True),
        ("python", False),
        ("python3.11", False),
        ("sleep", False),
        ("bwrap", False),
        ("pt_main_thread", False),
    ],
)
def test_compiler_names(name, compiler):
    assert is_compiler(name) is compiler


def test_snapshot_of_a_hand_made_table():
    snapshot = Snapshot({7: ProcessInfo(7, 1, "ninja", 250)}, {})
    assert snapshot.cpu_s({7, 8}) == pytest.approx(250 / _TICKS_PER_S)  # 8 is gone: no time


# -- this machine's /proc -----------------------------------------------------------------------
def spawn(code: str) -> subprocess.Popen:
    """A Python child that prints one line when it has reached the state under test."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
    )


def test_this_machine_a_reaped_childs_cpu_stays_in_the_tree():
    parent = spawn("""
        import subprocess, sys, time
        burn = "import time\\nend = time.process_time() + 0.4\\nwhile time.process_time() < end: pass"
        subprocess.run([sys.executable, "-c", burn], check=True)
        print("reaped", flush=True)
        time.sleep(30)
    """)
    try:
        assert parent.stdout.readline().strip() == "reaped"
        snapshot = read_snapshot()
        assert snapshot.tree(parent.pid) == {parent.pid}  # the child is gone ...
        assert snapshot.cpu_s({parent.pid}) >= 0.4  # ... its CPU time is not
    finally:
        parent.kill()
        parent.wait()


def test_this_machine_a_process_named_like_a_compiler_is_one():
    parent = spawn("""
        import subprocess, sys, time
        rename = "import ctypes, time\\nctypes.CDLL(None).prctl(15, b'nvcc', 0, 0, 0)\\n"
        child = subprocess.Popen([sys.executable, "-c", rename + "print(1, flush=True)\\ntime.sleep(30)"],
                                 stdout=subprocess.PIPE)
        child.stdout.readline()
        print("renamed", flush=True)
        time.sleep(30)
    """)
    try:
        assert parent.stdout.readline().strip() == "renamed"
        snapshot = read_snapshot()
        assert snapshot.compilers(snapshot.tree(parent.pid)) == ["nvcc"]
    finally:
        parent.kill()
        parent.wait()


def test_this_machine_a_paused_process_reads_as_stopped():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not read_snapshot().stopped({sleeper.pid})
        os.kill(sleeper.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not read_snapshot().stopped({sleeper.pid}):
            assert time.monotonic() < deadline, "SIGSTOP never showed in /proc"
            time.sleep(0.05)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_this_machine_stop_returns_once_a_busy_process_is_stopped():
    """SIGSTOP lands when the kernel next schedules its target; stop() waits for it, so a
    process spinning on a CPU is stopped by the time the first timed call starts."""
    from pytest_kernelboard.supervisor import pausing

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for _ in range(20):
            assert pausing.stop([spinner.pid]) == [spinner.pid]
            assert read_snapshot().processes[spinner.pid].state == "T"
            pausing.go_on([spinner.pid])
    finally:
        spinner.kill()
        spinner.wait()


def test_this_machine_stop_leaves_a_process_stopped_by_another_to_it():
    """A worker already stopped (a batch's call set aside, a worker whose output is being read)
    is not stopped again, so pausing it around a timed case does not let it go on after."""
    from pytest_kernelboard.supervisor import pausing

    sleeper = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.01)"])
    try:
        assert pausing.stop([sleeper.pid]) == [sleeper.pid]  # the other owner's stop
        assert pausing.stop([sleeper.pid]) == []  # not this one's to let go on
        assert read_snapshot().processes[sleeper.pid].state == "T"
        pausing.go_on([sleeper.pid])
    finally:
        sleeper.kill()
        sleeper.wait()


def test_this_machine_a_blocked_flock_names_its_holder(tmp_path):
    path = tmp_path / "build.lock"
    with open(path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiter = spawn(f"""
            import fcntl
            print("waiting", flush=True)
            with open({str(path)!r}, "w") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
            print("got it", flush=True)
        """)
        try:
            assert waiter.stdout.readline().strip() == "waiting"
            deadline = time.monotonic() + 10
            while not read_snapshot().lock_waits.get(waiter.pid):
                assert time.monotonic() < deadline, "the waiter never showed in /proc/locks"
                time.sleep(0.05)
            snapshot = read_snapshot()
            assert snapshot.holders_awaited(snapshot.tree(waiter.pid)) == {os.getpid()}
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
    assert waiter.stdout.readline().strip() == "got it"
    waiter.wait(timeout=10)


def test_this_machine_pausing_stops_only_the_workers_python_process():
    """pausing.py finds a worker's Python process under its root (bwrap's, or itself) from
    this tree, and stops it while its siblings (a compiler it started) keep going."""
    from pytest_kernelboard.supervisor import pausing

    parent = spawn("""
        import subprocess, sys, time
        # (split, so that this parent's own command line does not name the worker's module)
        worker = [sys.executable, "-c", "import time; time.sleep(30)", "pytest_kernelboard.worker." + "main"]
        other = [sys.executable, "-c", "import time; time.sleep(30)"]
        children = [subprocess.Popen(worker), subprocess.Popen(other)]
        print(children[0].pid, flush=True)
        time.sleep(30)
    """)
    try:
        worker_pid = int(parent.stdout.readline())
        assert pausing.python_processes(parent.pid) == [worker_pid]
        with pausing.paused([parent.pid]) as stopped:
            assert stopped == [worker_pid]
            states = {pid: read_snapshot().processes[pid].state for pid in stopped}
            assert states == {worker_pid: "T"}
        # (SIGCONT, like SIGSTOP, takes effect when the process is next scheduled)
        deadline = time.monotonic() + 10
        while read_snapshot().processes[worker_pid].state == "T":
            assert time.monotonic() < deadline, "SIGCONT never showed in /proc"
            time.sleep(0.01)
    finally:
        for pid in read_snapshot().tree(parent.pid) - {parent.pid}:
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


def test_this_machine_a_forked_workers_python_process_is_found():
    """A worker forked from the zygote keeps the zygote's command line: pausing must still find
    it, or a batch would time a case while other candidates' workers run."""
    from conftest import missing_system_tool

    from pytest_kernelboard.supervisor import forked, pausing, sandbox
    from pytest_kernelboard.supervisor.client import WorkerProcess

    if not sandbox.enabled() or not forked.enabled():
        missing_system_tool("the zygote needs the sandbox", "apt-get install bubblewrap")
    worker = WorkerProcess(sandboxed=True)
    try:
        worker.ping()
        assert isinstance(worker.process, forked.ForkedProcess)
        assert pausing.python_processes(worker.process.pid) == [worker.process.pid]
    finally:
        worker.discard()


def test_this_machine_a_trees_own_children_files_give_the_tree_a_snapshot_gives(tmp_path):
    """descendants() walks a worker's tree from its root, a child started from a thread and a
    grandchild included, as a reading of every process finds it; empty for a root that is
    gone; None where the kernel lists no children (the caller reads a Snapshot)."""
    from pytest_kernelboard.supervisor.proctree import descendants

    parent = spawn("""
        import subprocess, sys, threading, time
        sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
        nested = [sys.executable, "-c", "import subprocess, sys, time; "
                  "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
                  "time.sleep(30)"]
        children = [subprocess.Popen(nested)]
        spawned = threading.Thread(target=lambda: children.append(subprocess.Popen(sleeper)))
        spawned.start(); spawned.join()
        time.sleep(1.0)  # the nested child starts its own
        print("ready", flush=True)
        time.sleep(30)
    """)
    try:
        assert parent.stdout.readline().strip() == "ready"
        tree = descendants(parent.pid)
        assert tree is not None and len(tree) == 4  # itself, two children, one grandchild
        assert tree == read_snapshot().tree(parent.pid)
    finally:
        for pid in read_snapshot().tree(parent.pid) - {parent.pid}:
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()
    assert descendants(parent.pid) == frozenset()
    fake = tmp_path / "proc"
    (fake / "7" / "task" / "7").mkdir(parents=True)  # a task without a children file
    assert descendants(7, proc=fake) is None
