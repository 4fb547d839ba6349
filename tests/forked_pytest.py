"""Nested `pytest` runs forked from a process that has already imported torch.

Each `pytester.runpytest_subprocess` starts a fresh Python for the nested judge, and the first
thing that judge does is `import torch` (1.7 s of CPU on a 2-core machine); the suite makes about
sixty such runs. Here one server process per test process imports torch and numpy once, in the
environment the suite started with, and forks one child per nested run. The child takes the
run's working folder, environment, arguments and output files, runs pytest as `python -m pytest`
would, and exits with its code: a separate judge process with a session of its own, as before,
that only skipped the import. Nothing of kernelboard is loaded before the fork, so the variables
it reads when imported take the run's values.

A run whose environment changes a variable that Python, torch or numpy read when they start runs
as a plain subprocess instead, and so does any run the server cannot take.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

# Read when the interpreter starts or torch and numpy are imported, so fixed in the server
# (PYTHONPATH is rebuilt per run; PYTHONBREAKPOINT is read at each breakpoint()). `import torch`
# loads neither inductor nor dynamo, so their variables (which inductor itself writes into the
# test process's environment) are read by the child as in a fresh process.
START_UP_VARIABLES = re.compile(
    r"^(PYTHON(?!PATH$|BREAKPOINT$)|TORCH_|PYTORCH_|CUDA|NVIDIA|OMP_|MKL_|OPENBLAS|NPY_|LD_|MALLOC)"
)
MESSAGE_BYTES = 1 << 20
SUITE_ENVIRONMENT = dict(os.environ)  # this module is imported by conftest, before any test


class ForkedRun:
    """The part of `subprocess.Popen` that `Pytester.run` uses, for a run the server forked."""

    stdin = None

    def __init__(self, server: _Server, cmdargs: Sequence[str]) -> None:
        self._server = server
        self._cmdargs = list(cmdargs)
        self.pid: int = server.receive()["pid"]
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = self._server.receive(timeout)["returncode"]
            except TimeoutError:
                raise subprocess.TimeoutExpired(self._cmdargs, timeout) from None
            finally:
                if self.returncode is not None:
                    self._server.lock.release()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 9)
            except ProcessLookupError:
                pass


class _Server:
    """One torch-loaded server process per test process, started on first use."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=SUITE_ENVIRONMENT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        theirs.close()
        self.socket = ours
        self.owner = os.getpid()
        self.lock = threading.Lock()

    def start(self, request: dict[str, Any], stdout: int, stderr: int) -> None:
        socket.send_fds(self.socket, [json.dumps(request).encode()], [stdout, stderr])

    def receive(self, timeout: float | None = None) -> dict[str, Any]:
        self.socket.settimeout(timeout)
        data = self.socket.recv(MESSAGE_BYTES)
        if not data:
            raise ConnectionError("the pytest fork server is gone")
        return json.loads(data)

    def close(self) -> None:
        self.socket.close()  # the server reads end-of-file and exits
        if os.getpid() == self.owner:  # a fork's copy of the socket is all it has to close
            self.process.wait(timeout=30)


_server: _Server | None = None


def _usable_server() -> _Server:
    """This process's server; a new one where there is none yet, it died, or this process is a
    fork of the one that started it (the socket is the parent's conversation)."""
    global _server
    if _server is None or _server.owner != os.getpid() or _server.process.poll() is not None:
        _server = _Server()
        atexit.register(_server.close)
    return _server


def _forkable(cmdargs: Sequence[str], env: dict[str, str]) -> bool:
    if list(cmdargs[:2]) != [sys.executable, "-mpytest"]:
        return False
    changed = {
        name
        for name in env.keys() | SUITE_ENVIRONMENT.keys()
        if env.get(name) != SUITE_ENVIRONMENT.get(name)
    }
    return not any(START_UP_VARIABLES.match(name) for name in changed)


def popen(plain_popen: Callable[..., Any], cmdargs: Sequence[str], stdout, stderr, stdin, **kw):
    """`Pytester.popen` for `python -mpytest` runs into files: forked where it can be."""
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
    closed_stdin = stdin is getattr(plain_popen.__self__, "CLOSE_STDIN", object())
    if not (closed_stdin and not kw and hasattr(stdout, "fileno") and _forkable(cmdargs, env)):
        return plain_popen(cmdargs, stdout=stdout, stderr=stderr, stdin=stdin, **kw)
    server = _usable_server()
    if not server.lock.acquire(blocking=False):
        return plain_popen(cmdargs, stdout=stdout, stderr=stderr, stdin=stdin, **kw)
    request = {"args": [os.fspath(a) for a in cmdargs[2:]], "cwd": os.getcwd(), "env": env}
    try:
        server.start(request, stdout.fileno(), stderr.fileno())
        return ForkedRun(server, cmdargs)
    except BaseException:
        server.lock.release()
        raise


# --- the server process -----------------------------------------------------------------------


def _serve(connection: socket.socket) -> None:
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch  # noqa: F401

    own = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    base_path = [p for p in sys.path[1:] if p not in own]
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(connection, MESSAGE_BYTES, 2)
        except OSError:
            return
        if not data:
            return  # the test process closed its end
        request = json.loads(data)
        child = os.fork()
        if child == 0:
            connection.close()
            _run_pytest(request, fds, base_path)  # never returns
        for fd in fds:
            os.close(fd)
        connection.send(json.dumps({"pid": child}).encode())
        _, status = os.waitpid(child, 0)
        connection.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())


def _run_pytest(request: dict[str, Any], fds: list[int], base_path: list[str]) -> None:
    """In the forked child: become `python -m pytest ARGS` in the run's folder and environment."""
    code: Any = 1
    try:
        import importlib
        import runpy
        import tempfile

        import numpy

        null = os.open(os.devnull, os.O_RDONLY)
        for target, fd in ((0, null), (1, fds[0]), (2, fds[1])):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # TMPDIR is read on first use, which may have been the server's
        numpy.random.seed()  # a fresh process seeds from the OS (`random` reseeds after fork)
        extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [request["cwd"], *extra, *base_path]
        importlib.invalidate_caches()
        sys.argv = ["-m", *request["args"]]  # run_module puts pytest's __main__.py first
        runpy.run_module("pytest", run_name="__main__", alter_sys=True)  # raises SystemExit
    except SystemExit as exit_:
        code = exit_.code
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        # What interpreter shutdown does before the process ends (threads, then atexit), and
        # never a return into the server's loop.
        try:
            threading._shutdown()  # type: ignore[attr-defined]
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else (0 if code is None else 1))


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])))
