"""The zygote: one sandboxed process per judge that imports torch once and forks the workers.

A fresh worker spends about 2 s of CPU importing torch before it can take a submission (68% of
the test command's CPU, benchmarks/test_command_cpu.py); a fork of a process that has imported
it takes tens of milliseconds. The zygote runs under bwrap like a worker (supervisor/sandbox.py)
but never runs participant code and never initialises CUDA (a fork after that breaks CUDA in the
child). For each worker the judge sends, over the control socket, the worker's socket and its
log as descriptors, its environment and its folders; the zygote forks:

    zygote ── relay (new user, mount, PID, network, IPC, UTS namespaces)
                └── init, PID 1 of the new PID namespace: private folders, own /proc; reaps
                      └── worker (PID 2): setsid, no capabilities, announces itself, serves

The worker announces itself on the control socket before it closes it: the kernel stamps the
message with the worker's PID as the judge sees it (SO_PASSCRED), which the judge uses to
signal, pause and watch it. The relay exits with the worker's status (a signal death as
128 + signal, as bwrap reports it), and the zygote reports that to the judge.

The ranks of one multi-GPU case share one set of namespaces (docs/security.md, "Multi-GPU
cases"): NCCL's P2P and SHM transports, CUDA IPC and SymmetricMemory between ranks need one
PID namespace, one network namespace (NCCL passes memory descriptors over abstract Unix
sockets) and one /dev/shm. For such a request the zygote forks:

    zygote ── relay (new namespaces; its own network, loopback only)
                └── init, PID 1: every rank's folders, own /proc, loopback up; reaps
                      ├── rank 0 worker
                      └── rank 1 worker ...

init tells the relay each rank's exit status through a pipe, and the relay reports it to the
judge rank by rank; init cannot be traced or read through /proc by the ranks (not dumpable).
"""

from __future__ import annotations

import gc
import json
import os
import select
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from ..channel.cage import MAX_RANKS, SCRATCH_BYTES, gpu_devices
from . import isolation

MAX_MESSAGE = 1 << 20
STARTUP_FRAMES = 4  # the innermost frames of a failed start, written to the worker's log
MAX_FDS = 2 * MAX_RANKS  # each worker's socket and log; nothing else crosses


def preload() -> None:
    """What every worker imports before it can take a request, imported once here. Nothing
    may initialise CUDA or start threads: the children would inherit a broken state."""
    import torch  # noqa: F401
    import torch.multiprocessing  # noqa: F401

    import pytest_kernelboard.worker.main  # noqa: F401

    if not any("nvidia" in node for node in gpu_devices()):
        # Without a GPU the worker runs Triton through its interpreter, which Triton settles
        # when it is imported (worker/main.py sets the same before importing it itself).
        os.environ["TRITON_INTERPRET"] = "1"
    try:  # the blocking kernel (GPU) and the interpreter's patch (CPU) import it in every worker
        import triton  # noqa: F401 - its driver starts lazily, on first use in the worker
    except ImportError:
        pass


def serve(control: socket.socket) -> None:
    """Say whether a worker can be isolated here, then fork one for each request until the
    judge closes the control socket."""
    control.send(json.dumps({"event": "isolation", "error": _isolation_error()}).encode())
    preload()  # requests wait in the socket meanwhile
    # What is loaded now is shared with every child until written: kept out of the collector's
    # passes, which would otherwise touch (and so copy) every inherited object in each worker.
    gc.freeze()
    relays: dict[int, tuple[int, str]] = {}  # pidfd -> (relay pid, token)
    events = select.poll()  # poll, not select: no limit on descriptor numbers
    events.register(control, select.POLLIN)
    while True:
        for ready, _ in events.poll():
            if ready == control.fileno():
                received = _receive(control)
                if received is None:
                    return  # the judge is gone: its workers die with their relays
                request, fds = received
                pid = os.fork()
                if pid == 0:
                    if "members" in request:
                        _case_relay(control, request, fds)  # never returns
                    _relay(control, request, fds)  # never returns
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                relays[pidfd] = (pid, request["token"])
                events.register(pidfd, select.POLLIN)
            else:
                events.unregister(ready)
                pid, token = relays.pop(ready)
                os.close(ready)
                _, status = os.waitpid(pid, 0)
                code = isolation.exit_code(status)
                control.send(json.dumps({"event": "exited", "token": token, "code": code}).encode())


def _isolation_error() -> str | None:
    """Whether the kernel lets a forked worker isolate itself here (namespaces, mounts, /proc,
    capabilities), tried once before torch is imported: None, or why not. The judge falls
    back to one bwrap per worker at once rather than after a worker has failed."""
    try:  # how the zygote follows its children (Linux 5.3)
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError) as exc:
        return f"no pidfd_open here ({exc})"
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        try:
            isolation.die_with_parent()
            isolation.unshare_namespaces()
            init = os.fork()
            if init == 0:
                try:
                    home = Path("/tmp/kb-isolation-check")
                    isolation.set_up_namespace([Path("/tmp")], [], [home], 1 << 20)
                    isolation.bring_up_loopback()  # a multi-GPU case's ranks meet there
                    isolation.drop_privileges()
                except BaseException as exc:  # noqa: BLE001
                    os.write(writer, str(exc).encode()[:4000])
                    os._exit(1)
                os._exit(0)
            _, status = os.waitpid(init, 0)
            if status != 0:
                raise OSError(f"the namespace's set-up failed ({isolation.exit_code(status)})")
        except BaseException as exc:  # noqa: BLE001 - any failure is the answer
            os.write(writer, str(exc).encode()[:4000])
            os._exit(1)
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        said = pipe.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if status == 0:
        return None
    return said or f"the isolation check exited with code {isolation.exit_code(status)}"


def _receive(control: socket.socket) -> tuple[dict[str, Any], list[int]] | None:
    data, ancillary, _, _ = control.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(MAX_FDS * 4))
    if not data:
        return None
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(memoryview(payload).cast("i"))
    return json.loads(data), fds


def _relay(control: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the zygote's child: new namespaces, then init below them; exit as the worker did."""
    code = 1
    try:
        isolation.die_with_parent()
        isolation.unshare_namespaces(bool(request.get("host_network")))
        init = os.fork()
        if init == 0:
            _init(control, request, fds)
        _close_all_but(())
        _, status = os.waitpid(init, 0)
        code = isolation.exit_code(status)
    except BaseException as exc:  # noqa: BLE001 - reported through the exit code and the log
        _report(fds[1:2], f"kernelboard: the worker could not be isolated: {exc}")
    os._exit(code)


def _init(control: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """PID 1 of the worker's namespace: its folders and /proc, then the worker; reaps."""
    code = 1
    try:
        isolation.die_with_parent()
        isolation.set_up_namespace(
            [Path(p) for p in request["covered"]],
            [(Path(p), bool(ro)) for p, ro in request["binds"]],
            [Path(request["cwd"])],  # its home, a tmpfs of its own
            SCRATCH_BYTES,
        )
        worker = os.fork()
        if worker == 0:
            _worker(control, request, fds)
        _close_all_but((fds[1],))  # the log stays until nothing can fail here any more
        isolation.drop_privileges()
        os.close(fds[1])
        while True:  # orphans of the worker's own children land here: reap them all
            pid, status = os.wait()
            if pid == worker:
                code = isolation.exit_code(status)
                break
    except BaseException as exc:  # noqa: BLE001
        _report(fds[1:2], f"kernelboard: the worker's namespace could not be set up: {exc}")
    os._exit(code)


def _case_relay(control: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    """In the zygote's child: one set of new namespaces for all ranks of a case, then their
    init; reports each rank's exit, as init tells it, to the judge."""
    members = request["members"]
    code = 1
    try:
        isolation.die_with_parent()
        isolation.unshare_namespaces()
        reader, writer = os.pipe()
        init = os.fork()
        if init == 0:
            os.close(reader)
            _case_init(control, request, fds, writer)
        os.close(writer)
        _close_all_but((control.fileno(), reader))
        reported: set[int] = set()
        with os.fdopen(reader, "rb") as exits:
            for line in exits:  # "<rank> <code>" per rank that ended
                index, _, status = line.decode(errors="replace").partition(" ")
                if index.isdigit() and int(index) < len(members) and int(index) not in reported:
                    reported.add(int(index))
                    _send_exit(control, members[int(index)]["token"], _code(status))
        _, status = os.waitpid(init, 0)
        for index, member in enumerate(members):
            if index not in reported:  # init died before it could say
                _send_exit(control, member["token"], 128 + 9)
        code = isolation.exit_code(status)
    except BaseException as exc:  # noqa: BLE001 - reported through the ranks' logs
        _report(fds[1::2], f"kernelboard: the case's ranks could not be isolated: {exc}")
    os._exit(code)


def _case_init(control: socket.socket, request: dict[str, Any], fds: list[int], exits: int) -> None:
    """PID 1 of a case's namespace: every rank's folders, /proc and loopback, then the ranks."""
    code = 1
    logs = fds[1::2]
    try:
        isolation.die_with_parent()
        isolation.set_up_namespace(
            [Path(p) for p in request["covered"]],
            [(Path(p), bool(ro)) for p, ro in request["binds"]],
            [Path(member["cwd"]) for member in request["members"]],
            SCRATCH_BYTES,
        )
        isolation.bring_up_loopback()  # the ranks meet there, and reach nothing else
        ranks: dict[int, int] = {}  # pid -> rank
        for index, member in enumerate(request["members"]):
            pid = os.fork()
            if pid == 0:
                _worker(control, member, fds[2 * index : 2 * index + 2])
            ranks[pid] = index
        _close_all_but((exits, *logs))  # the logs stay until nothing can fail here any more
        isolation.drop_privileges()
        isolation.not_dumpable()
        for log in logs:
            os.close(log)
        while ranks:  # orphans of the ranks' own children land here too: reap them all
            pid, status = os.wait()
            if pid in ranks:
                os.write(exits, f"{ranks.pop(pid)} {isolation.exit_code(status)}\n".encode())
        code = 0
    except BaseException as exc:  # noqa: BLE001
        _report(logs, f"kernelboard: the case's namespace could not be set up: {exc}")
    os._exit(code)


def _send_exit(control: socket.socket, token: str, code: int) -> None:
    control.send(json.dumps({"event": "exited", "token": token, "code": code}).encode())


def _code(text: str) -> int:
    text = text.strip()
    return int(text) if text.isdigit() else 1


def _worker(control: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    try:
        isolation.die_with_parent()
        os.setsid()  # its own process group, which the judge kills as one
        isolation.drop_privileges()
        conn_fd, log_fd = fds
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(null)
        os.close(log_fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # The kernel stamps this with our PID as the judge sees it; then the channel is closed:
        # participant code must never reach the zygote.
        control.send(json.dumps({"event": "started", "token": request["token"]}).encode())
        control.close()
        _close_all_but((0, 1, 2, conn_fd))
        sys.argv[1:] = [str(conn_fd)]  # as a worker started on its own sees its socket
        from multiprocessing.connection import Connection

        from pytest_kernelboard.worker.limits import apply_limits
        from pytest_kernelboard.worker.main import Worker

        apply_limits()
        Worker(Connection(conn_fd)).serve()
    except BaseException as exc:  # noqa: BLE001
        # Where it failed, too: the judge shows the log's tail, and a message alone ("No CUDA
        # GPUs are available") does not say which step of the start raised it.
        frames = "".join(traceback.format_tb(exc.__traceback__, limit=-STARTUP_FRAMES))
        os.write(2, f"kernelboard: the forked worker failed to start: {exc!r}\n{frames}".encode())
        os._exit(1)
    os._exit(0)


def _close_all_but(kept: tuple[int, ...]) -> None:
    """Close every descriptor but `kept`. (os.closerange on an empty range closes from its
    start upwards on some Pythons: empty ranges are skipped.)"""
    highest = os.sysconf("SC_OPEN_MAX")
    start = 0
    for fd in sorted(kept):
        if fd > start:
            os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, highest)


def _report(logs: list[int], message: str) -> None:
    """A set-up failure goes to the workers' logs, where the judge reads why they died."""
    for log in logs:
        try:
            os.write(log, (message + "\n").encode())
        except OSError:
            pass


def main(argv: list[str]) -> None:
    serve(socket.socket(fileno=int(argv[0])))


if __name__ == "__main__":  # python -m pytest_kernelboard.worker.zygote FD (supervisor/forked.py)
    main(sys.argv[1:])
