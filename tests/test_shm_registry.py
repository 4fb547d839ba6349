"""The judge's shared-memory registry (supervisor/shm_registry.py): what workers register their
CPU tensors' files with, in place of the judge's torch_shm_manager, which a client that hangs up
at the wrong moment ends for good."""

from __future__ import annotations

import os
import secrets
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SANDBOX_INSTALL, missing_system_tool

from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.supervisor import pickles, sandbox, shm_manager, shm_registry
from pytest_kernelboard.supervisor.proctree import read_snapshot

HOSTILE = Path(__file__).parent / "hostile"
RECORD = struct.Struct("=ib60s3x")


@pytest.fixture
def registry(tmp_path):
    """A registry of its own (not this judge's), its socket and its process."""
    path = str(Path("/tmp") / f"kb-test-{secrets.token_hex(4)}.sock")  # short: a socket path
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", shm_registry.__file__, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert process.stdout.readline() == shm_registry.READY
    yield path, process
    process.kill()
    process.wait()
    if os.path.exists(path):
        os.unlink(path)


def _client(path: str) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(path)
    return client


def _register(path: str, name: bytes, free: bool = False) -> bytes:
    client = _client(path)
    client.sendall(RECORD.pack(os.getpid(), int(free), name))
    answer = b"" if free else client.recv(2)
    client.close()
    return answer


def test_clients_that_hang_up_or_send_garbage_leave_it_answering_the_others(registry):
    path, process = registry
    for record in (
        RECORD.pack(os.getpid(), 0, b"/kb_gone_before_its_answer"),  # torch's manager: ends
        b"\1\2\3",  # a record cut short: torch's manager ends
        b"\xff" * 5000,  # garbage: 73 records that name nothing
    ):
        client = _client(path)
        client.sendall(record)
        client.close()
    flood = _client(path)  # registrations without reading one answer: dropped, not waited on
    flood.setblocking(False)
    try:
        for _ in range(20000):
            flood.send(RECORD.pack(0, 0, b"/kb_flood"))
    except OSError:
        pass
    time.sleep(0.2)
    assert _register(path, b"/kb_after_them") == b"OK"
    assert process.poll() is None
    flood.close()


def test_what_is_registered_is_unlinked_when_the_judge_exits_and_nothing_else(registry):
    path, process = registry
    marker = secrets.token_hex(6)
    kept = Path(f"/dev/shm/kb_test_{marker}_kept")  # never registered
    left = Path(f"/dev/shm/kb_test_{marker}_left")  # registered, still there at the end
    for file in (kept, left):
        file.write_bytes(b"x")
    try:
        assert _register(path, f"/{left.name}".encode()) == b"OK"
        assert _register(path, b"/../etc/passwd") == b"OK"  # answered; names nothing to remove
        process.stdin.close()  # the judge has exited
        assert process.wait(timeout=10) == 0
        assert not left.exists()
        assert kept.exists()
        assert not os.path.exists(path)  # its socket goes with it
    finally:
        for file in (kept, left):
            file.unlink(missing_ok=True)


def test_the_handles_a_judge_sends_name_its_registry_not_torchs_manager():
    import torch

    shm_manager.share_through_files()
    sent = pickles.dumps({"data": torch.ones(4)}, {})
    assert shm_manager.registry_socket().encode() in sent
    torchs = shm_manager.shm_manager_dir()
    assert torchs is not None and str(torchs).encode() not in sent
    assert not any(torchs.is_relative_to(f) for f in shm_manager.shm_manager_folders())


def _torch_managers_of_this_judge() -> list[str]:
    snapshot = read_snapshot()
    assert snapshot is not None
    return [
        p.state
        for p in snapshot.processes.values()
        if p.ppid == os.getpid() and p.name.startswith("torch_shm_man")
    ]


@pytest.mark.parametrize("hostile", ["shm_manager_hangup", "stalled_shm_manager"])
def test_a_worker_that_attacks_the_managers_harms_no_later_case(
    hostile, addone_task, addone_modules, worker_pool, tmp_path
):
    """The hostile submission passes (its output is right), and so does a plain one after it in
    the same judge, its CPU tensors crossing both ways; the judge's torch manager still runs."""
    if not sandbox.enabled():  # raises under KERNELBOARD_SANDBOX=require, as in CI
        missing_system_tool(f"needs the worker sandbox: {sandbox.probe()}", SANDBOX_INSTALL)
    source = (HOSTILE / f"{hostile}.py").read_text().replace("@MARKER@", secrets.token_hex(6))
    plain = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"
    case = Case(TEST, 0, addone_task.tests[0])
    for name, text in ((hostile, source), ("plain", plain)):
        submission = tmp_path / name / "submission.py"
        submission.parent.mkdir()
        submission.write_text(text)
        judge = SubmissionJudge(addone_task, addone_modules, submission, False, pool=worker_pool)
        try:
            outcome = judge.check_case(case, 60.0)
        finally:
            judge.close()
        assert outcome.status == "passed", f"{name}: {outcome.message}"
    import torch

    torch.ones(7).share_memory_()  # the judge's own tensors are still shared through torch's
    states = _torch_managers_of_this_judge()
    assert states and "Z" not in states, states


def test_a_judge_forked_from_a_judge_starts_a_registry_of_its_own():
    """A nested judge forked from this one (tests/forked_pytest.py) shares its socket folder:
    its registry must not need the parent's socket path."""
    parent = shm_manager.registry_socket()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the forked judge: its own registry, answering
        os.close(read)
        try:
            path = shm_manager.registry_socket()
            ok = path != parent and _register(path, b"/kb_forked") == b"OK"
            os.write(write, b"ok" if ok else b"no")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 2)
    os.waitpid(child, 0)
    assert answer == b"ok"
    assert _register(parent, b"/kb_parent") == b"OK"


def test_a_registry_killed_from_outside_is_replaced_at_a_path_of_its_own():
    """In a judge process of its own: this one's storages stay registered with its registry."""
    judge = (
        "from pytest_kernelboard.supervisor import shm_manager\n"
        "import os\n"
        "first = shm_manager.registry_socket()\n"
        "process, _ = shm_manager._registries[os.getpid()]\n"
        "process.kill(); process.wait()\n"
        "second = shm_manager.registry_socket()\n"
        "import socket, struct\n"
        "client = socket.socket(socket.AF_UNIX); client.connect(second)\n"
        "client.sendall(struct.pack('=ib60s3x', os.getpid(), 0, b'/kb_after_a_kill'))\n"
        "print(first, second, client.recv(2).decode())\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", judge], capture_output=True, text=True, check=True, timeout=60
    )
    first, second, answer = ran.stdout.split()
    assert answer == "OK"
    assert second != first  # torch keeps its broken connection to the first by path
    assert Path(second).parent == Path(first).parent


def _cpu_ticks(pid: int) -> int:
    """User and system clock ticks the process has used (/proc/PID/stat utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_out_of_descriptors_it_waits_for_a_client_to_go_without_spinning():
    import resource

    path = str(Path("/tmp") / f"kb-test-{secrets.token_hex(4)}.sock")
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", shm_registry.__file__, path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32)),
    )
    clients = []
    try:
        assert process.stdout.readline() == shm_registry.READY
        for _ in range(60):  # past its 32 descriptors: the rest wait in the backlog
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.connect(path)
            clients.append(client)
        time.sleep(0.3)
        before = _cpu_ticks(process.pid)
        time.sleep(1.0)
        assert _cpu_ticks(process.pid) - before <= 10, "the registry spins while out of descriptors"
        for client in clients[:40]:  # clients go: it accepts again
            client.close()
        assert _register(path, b"/kb_after_the_flood") == b"OK"
        assert process.poll() is None
    finally:
        for client in clients:
            client.close()
        process.kill()
        process.wait()
        if os.path.exists(path):
            os.unlink(path)
