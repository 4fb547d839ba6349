"""Workers forked from the zygote (worker/zygote.py): as isolated from one another and from the
judge as a worker started under bwrap of its own, followed like a process, and never a reason
for a judge to fail where the zygote cannot work (it then starts workers one by one)."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest
from conftest import missing_system_tool

from pytest_kernelboard.supervisor import forked, sandbox
from pytest_kernelboard.supervisor.client import WorkerProcess
from pytest_kernelboard.supervisor.failures import WorkerFailure

SANDBOX_INSTALL = "apt-get install bubblewrap"

# Returns what the worker sees of itself and of a sibling's folders, as JSON.
INSPECT = """
import ctypes, json, os, socket

def custom_kernel(data):
    sibling_slot, sibling_outbox, pool = data
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    unmounted = ctypes.CDLL(None, use_errno=True).umount2(b"/proc", 2) == 0  # MNT_DETACH
    try:
        os.listdir(sibling_slot)
        sibling = "visible"
    except OSError:
        sibling = "hidden"
    try:
        open(os.path.join(sibling_outbox, "planted"), "w").close()
        planted = True
    except OSError:
        planted = False
    return json.dumps({
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "hostname": socket.gethostname(),
        "cap_eff": int(status["CapEff"].strip(), 16),
        "cap_bnd": int(status["CapBnd"].strip(), 16),
        "no_new_privs": int(status["NoNewPrivs"].strip()),
        "uid": os.getuid(),
        "proc_unmounted": unmounted,
        "sibling_slot": sibling,
        "planted_in_sibling_outbox": planted,
        "pool": sorted(os.listdir(pool)),
        "argv1": __import__("sys").argv[1],
    })
"""


@pytest.fixture
def forking(monkeypatch):
    if not sandbox.enabled():
        missing_system_tool(f"needs the worker sandbox: {sandbox.probe()}", SANDBOX_INSTALL)
    monkeypatch.setenv(forked.POLICY_VARIABLE, "auto")
    workers: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        worker = WorkerProcess()
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.close()


def loaded(worker: WorkerProcess, tmp_path: Path, source: str, name: str) -> WorkerProcess:
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent(source))
    worker.load(folder, name, 60.0)
    return worker


def test_a_forked_worker_stands_apart_from_its_siblings_and_the_judge(forking, tmp_path):
    first, second = forking(), forking()
    assert isinstance(first.process, forked.ForkedProcess)
    assert isinstance(second.process, forked.ForkedProcess)
    loaded(first, tmp_path, INSPECT, "looker")
    loaded(second, tmp_path, "def custom_kernel(data):\n    return data\n", "echoer")
    pool = first.stage_slot.parent
    sibling = (str(second.stage_slot), str(second.outbox), str(pool))
    reply = first.request("call", 60.0, data=sibling)
    seen = json.loads(reply.payload["output"])
    assert seen["pid"] == 2 and seen["ppid"] == 1  # below its own init, in its own PID space
    assert seen["pids"] == [1, 2]  # its init and itself: no sibling, no judge
    assert seen["hostname"] == sandbox_hostname()
    assert seen["cap_eff"] == 0 and seen["cap_bnd"] == 0 and seen["no_new_privs"] == 1
    assert seen["uid"] == sandbox.SANDBOX_UID
    assert not seen["proc_unmounted"]  # the judge's /proc below stays covered
    assert seen["sibling_slot"] == "hidden" and not seen["planted_in_sibling_outbox"]
    # Of the pool where the judge makes every worker's folders, it sees its own two alone.
    assert seen["pool"] == sorted([first.stage_slot.name, first.outbox.name])
    assert seen["argv1"].isdigit()  # its socket, as a worker started on its own sees it
    # Its PID as the judge sees it is a process of the judge's machine, not its namespace's 2.
    assert first.process.pid not in (1, 2) and Path(f"/proc/{first.process.pid}").exists()


def sandbox_hostname() -> str:
    from pytest_kernelboard.worker import isolation

    return isolation.HOSTNAME.decode()


def test_a_forked_worker_reports_its_exit_code_and_its_killing(forking, tmp_path):
    exits = loaded(forking(), tmp_path, "import os\ndef custom_kernel(d):\n    os._exit(3)\n", "e")
    with pytest.raises(WorkerFailure, match="exited with code 3"):
        exits.request("call", 60.0, data=1)
    killed = forking()
    killed.ping()
    os.kill(killed.process.pid, 9)
    with pytest.raises(WorkerFailure, match="killed by SIGKILL"):
        killed.ping()
    assert killed.process.poll() == 128 + 9


def test_killing_a_forked_worker_takes_its_children(forking, tmp_path):
    source = """
    import subprocess
    def custom_kernel(data):
        return subprocess.Popen(["sleep", "300"]).pid
    """
    worker = loaded(forking(), tmp_path, source, "spawner")
    worker.request("call", 60.0, data=0)
    sleeping = [p for p in _children_of(worker.process.pid) if _comm(p) == "sleep"]
    assert sleeping, "the submission's child was not found under the worker"
    worker.kill()
    assert worker.process.poll() is not None
    deadline = time.monotonic() + 5
    while any(_running(pid) for pid in sleeping) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_running(pid) for pid in sleeping)


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def test_with_zygotes_off_workers_start_one_by_one(monkeypatch):
    monkeypatch.setenv(forked.POLICY_VARIABLE, "off")
    worker = WorkerProcess()
    try:
        assert not isinstance(worker.process, forked.ForkedProcess)
        assert worker.ping()["pid"] > 0
    finally:
        worker.close()


def test_a_zygote_that_cannot_fork_is_given_up_and_workers_start_as_before(forking, monkeypatch):
    """Where the kernel refuses what a forked worker needs (namespaces inside the sandbox, say),
    the judge warns once and starts every later worker under bwrap of its own."""

    def refused(self, *args, **kwargs):
        raise forked.ZygoteUnavailable("the forked worker exited with code 1 before it started")

    monkeypatch.setattr(forked.Zygote, "spawn", refused)
    with pytest.warns(UserWarning, match="not forked from a zygote.*code 1"):
        worker = forking()
    assert not isinstance(worker.process, forked.ForkedProcess)
    assert worker.ping()["pid"] > 0
    assert None in forked._zygotes.values()  # that zygote is not asked again
    forked.close_all()  # later tests in this process get a zygote again


def test_a_process_forked_from_a_judge_does_not_share_its_zygote(forking):
    forking().ping()  # this process has a zygote now
    assert any(z is not None for z in forked._zygotes.values())
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child says how many zygotes it believes it has
        os.write(writer, str(len(forked._zygotes)).encode())
        os._exit(0)
    os.close(writer)
    seen = os.read(reader, 16)
    os.waitpid(pid, 0)
    os.close(reader)
    assert seen == b"0"


def test_a_look_at_a_workers_exit_does_not_wait_for_another_threads_read():
    """exit_code (every `alive` check of a forked worker) reads what the control socket holds
    now; while another thread reads it (waiting up to 50 ms for a spare's start), it returns at
    once with what is known rather than queue behind that read."""
    import socket
    import threading

    zygote = object.__new__(forked.Zygote)  # only what exit_code and pump touch
    zygote.control, other_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    zygote._reading, zygote._closed, zygote._exited = threading.Lock(), False, {}
    reading = threading.Event()

    def another_reader() -> None:
        with zygote._reading:
            reading.set()
            time.sleep(0.5)

    thread = threading.Thread(target=another_reader)
    thread.start()
    try:
        reading.wait(5)
        started = time.monotonic()
        assert zygote.exit_code("token") is None  # not known to have exited: alive
        assert time.monotonic() - started < 0.025
    finally:
        thread.join()
        zygote.control.close()
        other_end.close()
