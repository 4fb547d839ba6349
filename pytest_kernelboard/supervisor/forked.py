"""The judge's side of the zygote (worker/zygote.py): start it once, ask it for workers, and
follow each as a process, with the parts of subprocess.Popen that WorkerProcess uses.

KERNELBOARD_ZYGOTE picks the policy: `auto` (default: sandboxed workers are forked from the
zygote where it works, else started as before, with one warning line) or `off`.
"""

from __future__ import annotations

import array
import atexit
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..channel.cage import MAX_RANKS
from . import gpu_view, sandbox, scratch
from .proctree import process_tree

POLICY_VARIABLE = "KERNELBOARD_ZYGOTE"
START_TIMEOUT_S = 120.0  # the zygote's own torch import, on a busy machine
SPAWN_TIMEOUT_S = 60.0  # a fork and the worker's isolation: tens of milliseconds
KILLED = 128 + signal.SIGKILL  # what a worker reads as when its zygote is gone
REPORT_WAIT_S = 2.0  # for the zygote's word on a worker seen gone
_UCRED = struct.Struct("iII")  # pid, uid, gid


class ZygoteUnavailable(RuntimeError):
    """The zygote cannot fork this worker: the caller starts one the usual way."""


def enabled() -> bool:
    return os.environ.get(POLICY_VARIABLE, "auto").strip().lower() not in ("off", "0", "no")


class Zygote:
    """One zygote process and its control socket (SOCK_SEQPACKET: one message per send, so
    the zygote and each worker can write to it without interleaving)."""

    def __init__(
        self,
        cache_dirs: list[Path],
        exchange: list[Path],
        env: dict[str, str],
        host_network: bool = False,
    ):
        self.pool = scratch.make_folder("kb-pool-")
        self.host_network = host_network
        # The GPUs `env` names (a single-GPU worker's own; the judge's, for multi-GPU ranks,
        # which lease theirs among them): the only ones whose nodes the cage holds.
        self.gpus = gpu_view.env_view(env)
        self.log_path = self.pool / "zygote.log"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        binds = sandbox.zygote_binds(self.pool, cache_dirs, exchange)
        # What each worker covers, and binds back besides its own folders: the same for all.
        self._covered = [str(p) for p in sandbox.temporary_folders()]
        self._shared_binds = [
            (str(p), ro) for p, ro in sandbox.binds_under_covers(binds, self.pool)
        ]
        prefix = sandbox.zygote_command(self.pool, binds, host_network, self.gpus)
        if self.gpus is not None:  # the zygote never starts CUDA; its children read their own
            env = {**env, gpu_view.VARIABLE: self.gpus.visible}
        command = [*prefix, sys.executable, "-m", "pytest_kernelboard.worker.zygote"]
        with open(self.log_path, "wb") as log:
            # bwrap's --die-with-parent fires when the thread that started it ends: the zygote
            # is started by a thread that lives as long as this process.
            self.process = _STARTER.submit(
                subprocess.Popen,
                [*command, str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**env, "HOME": str(self.pool), "TMPDIR": str(self.pool)},
                cwd=self.pool,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
            ).result()
        theirs.close()
        self.control = ours
        self._reading = threading.Lock()  # one reader of the control socket at a time
        self._sending = threading.Lock()
        self._checked = False  # the zygote said whether workers can be isolated here
        self._isolation_error: str | None = None
        self._closed = False
        self._started: dict[str, int] = {}  # token -> the worker's PID
        self._exited: dict[str, int] = {}  # token -> its exit code (128 + signal if killed)

    # -- workers -----------------------------------------------------------------------------
    def _caged_env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with its CUDA_VISIBLE_DEVICES as it reads inside this cage (gpu_view.py)."""
        if self.gpus is None:
            return env
        caged = dict(env)
        if gpu_view.narrow(caged, within=self.gpus) is None:
            raise ZygoteUnavailable(
                f"a worker's GPUs ({gpu_view.VARIABLE}={env.get(gpu_view.VARIABLE)!r}) lie "
                f"outside its zygote's cage ({self.gpus.visible!r})"
            )
        return caged

    def spawn(self, member: Member) -> ForkedProcess:
        """A worker forked with `member`'s socket to the judge and log as its output, in its
        own namespaces, with a tmpfs home at its `cwd`, its `slot` (read-only) and `outbox`
        (both made in the pool) as its only folders of the pool. Returns at once: the zygote
        forks it once its own imports are done, which overlap the judge's."""
        token = uuid.uuid4().hex
        request = {
            "token": token,
            "host_network": self.host_network,
            "env": self._caged_env(member.env),
            "cwd": str(member.cwd),
            "covered": self._covered,
            "binds": [*member.binds(), *self._shared_binds],
        }
        self._send(request, [member.conn_fd, member.log_fd])
        return ForkedProcess(self, token)

    def spawn_case(self, members: list[Member]) -> list[ForkedProcess]:
        """The ranks of one multi-GPU case, forked into one set of namespaces of their own
        (worker/zygote.py): each with its own socket, log, home, slot and outbox, all of
        them sharing processes, network (loopback only), IPC and files with each other alone."""
        if not 0 < len(members) <= MAX_RANKS:
            raise ZygoteUnavailable(f"a case of {len(members)} ranks (at most {MAX_RANKS})")
        tokens = [uuid.uuid4().hex for _ in members]
        request = {
            "token": uuid.uuid4().hex,
            "members": [
                {"token": token, "env": self._caged_env(m.env), "cwd": str(m.cwd)}
                for token, m in zip(tokens, members, strict=True)
            ],
            "covered": self._covered,
            "binds": [*(b for m in members for b in m.binds()), *self._shared_binds],
        }
        self._send(request, [fd for m in members for fd in (m.conn_fd, m.log_fd)])
        return [ForkedProcess(self, token) for token in tokens]

    def _send(self, request: dict[str, Any], fds: list[int]) -> None:
        self._wait(lambda: self._checked, START_TIMEOUT_S, "start")
        if self._isolation_error is not None:
            raise ZygoteUnavailable(
                f"a forked worker cannot isolate itself here: {self._isolation_error}"
            )
        with self._sending:
            try:
                self.control.sendmsg(
                    [json.dumps(request).encode()],
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))],
                )
            except OSError as exc:
                raise ZygoteUnavailable(f"the zygote is gone ({exc})") from None

    def pid_of(self, token: str) -> int:
        """The worker's PID as the judge sees it, once it has announced itself."""
        announced = lambda: token in self._started or token in self._exited  # noqa: E731
        self._wait(announced, START_TIMEOUT_S + SPAWN_TIMEOUT_S, "fork the worker")
        if token not in self._started:
            raise ZygoteUnavailable(
                f"the forked worker exited with code {self._exited[token]} before it started"
            )
        return self._started[token]

    def exit_code(self, token: str) -> int | None:
        self.pump(0.0)
        if token in self._exited:
            return self._exited[token]
        return KILLED if self._closed else None  # its relay died with the zygote

    # -- the control socket ------------------------------------------------------------------
    def _wait(self, done: Any, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            if self._closed:
                raise ZygoteUnavailable(f"the zygote exited: {self._log_tail()}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ZygoteUnavailable(f"the zygote did not {what} within {timeout_s:.0f} s")
            self.pump(min(remaining, 0.05))

    def pump(self, timeout_s: float) -> None:
        """Read the messages that arrive within `timeout_s` (threads take turns). A look that
        may not wait (timeout 0: `exit_code`, asked by every check of a worker's life) does not
        queue behind another thread's read, which records what arrives for everyone: it waited
        for that read's 50 ms select, 20 ms of each of a batch's correctness cases on an H200."""
        if timeout_s <= 0:
            if not self._reading.acquire(blocking=False):
                return
        elif not self._reading.acquire(timeout=timeout_s + 0.05):
            return  # another thread is reading; it records what arrives for everyone
        try:
            wait = timeout_s
            while not self._closed and select.select([self.control], [], [], wait)[0]:
                self._read_one()
                wait = 0.0
        finally:
            self._reading.release()

    def _read_one(self) -> None:
        try:
            data, ancillary, _, _ = self.control.recvmsg(1 << 16, socket.CMSG_SPACE(_UCRED.size))
        except OSError:
            data, ancillary = b"", []
        if not data:
            self._closed = True
            return
        message = json.loads(data)
        event = message.get("event")
        if event == "isolation":
            self._checked, self._isolation_error = True, message.get("error")
        elif event == "exited":
            self._exited[message["token"]] = int(message["code"])
        elif event == "started":
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                    pid, _, _ = _UCRED.unpack(payload[: _UCRED.size])
                    self._started[message["token"]] = pid

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:].strip() or "no output"
        except OSError:
            return "no log"

    def close(self) -> None:
        self._closed = True
        try:
            self.control.close()
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self.pool, ignore_errors=True)


@dataclass(frozen=True)
class Member:
    """One worker the zygote is asked for: its end of the judge's socket, its log, its
    environment, and its folders (home, and the slot and outbox made in the pool)."""

    conn_fd: int
    log_fd: int
    env: dict[str, str]
    cwd: Path
    slot: Path
    outbox: Path

    def binds(self) -> list[tuple[str, bool]]:
        """Its folders of the pool, bound back over the covered ones: (path, read_only)."""
        return [(str(self.slot), True), (str(self.outbox), False)]


class ForkedProcess:
    """A forked worker as WorkerProcess sees a process: pid, poll, wait, kill, returncode.
    Its exit code is the zygote's report (128 + signal for a signal death, as bwrap's)."""

    def __init__(self, zygote: Zygote, token: str):
        self.zygote, self.token = zygote, token
        self.args = ["forked worker", token]
        self.returncode: int | None = None
        self._pid: int | None = None
        self._pidfd: int | None = None

    @property
    def pid(self) -> int:
        """Known once the worker has announced itself (waited for here)."""
        if self._pid is None:
            self._pid = self.zygote.pid_of(self.token)
            try:  # a handle on this very process: its PID may be reused once it has gone
                self._pidfd = os.pidfd_open(self._pid)
            except OSError:
                self._pidfd = None
        return self._pid

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_code(self.token)
            if self.returncode is None and self._exited():
                # Gone already; its code follows from the zygote within milliseconds (its init
                # and relay exit after it). Until then it reads as killed, not as alive.
                deadline = time.monotonic() + REPORT_WAIT_S
                while self.returncode is None and time.monotonic() < deadline:
                    self.zygote.pump(0.01)
                    self.returncode = self.zygote.exit_code(self.token)
                if self.returncode is None:
                    self.returncode = KILLED
            if self.returncode is not None and self._pidfd is not None:
                os.close(self._pidfd)
                self._pidfd = None
        return self.returncode

    def _exited(self) -> bool:
        """Whether the process has ended (its pidfd reads ready), before the zygote says so."""
        if self._pidfd is None:
            return False
        return bool(select.select([self._pidfd], [], [], 0)[0])

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.zygote.pump(0.05)
        return self.returncode

    def kill(self) -> None:
        """SIGKILL: PID 2 of its namespace, whose init then exits and takes every process of
        the namespace with it."""
        if self.poll() is not None:
            return
        try:
            pid = self.pid
            if self.poll() is not None:
                return
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, ZygoteUnavailable):
            pass


# -- one zygote per judge process and cache folder ------------------------------------------------
_STARTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-zygote")
_zygotes: dict[tuple[str, ...], Zygote | None] = {}
_lock = threading.Lock()


def zygote_for(
    cache_dirs: list[Path], exchange: list[Path], env: dict[str, str], host_network: bool = False
) -> Zygote | None:
    """This process's zygote for these folders, network and GPUs (`env`'s), started on first
    use; None where zygotes are off or one failed to start here (the caller starts workers the
    usual way)."""
    if not enabled():
        return None
    key = (
        str(host_network),
        str(gpu_view.env_view(env)),  # workers of other GPUs need a cage of their own
        *(str(p) for p in (*cache_dirs, *exchange)),
    )
    with _lock:
        if key not in _zygotes:
            try:
                _zygotes[key] = Zygote(cache_dirs, exchange, env, host_network)
            except OSError as exc:
                warn_unavailable(str(exc))
                _zygotes[key] = None
        return _zygotes[key]


def zygote_pids() -> list[int]:
    """Every process of this judge's zygotes (bwrap, the zygote, the relays and workers it
    forked), for a judge that keeps its timing core from all it starts (judge/timing_core.py):
    a zygote started before the judge kept it (launch.prestart_zygote) runs on every CPU, and
    its workers would inherit that."""
    with _lock:
        zygotes = [z for z in _zygotes.values() if z is not None]
    pids: set[int] = set()
    for zygote in zygotes:
        pids |= process_tree(zygote.process.pid)
    return sorted(pids)


def give_up(zygote: Zygote, reason: str) -> None:
    """A zygote that failed to fork a worker is not asked again in this process."""
    warn_unavailable(reason)
    with _lock:
        for key, known in list(_zygotes.items()):
            if known is zygote:
                _zygotes[key] = None
    zygote.close()


def warn_unavailable(reason: str) -> None:
    warnings.warn(
        f"kernelboard: workers start one by one, not forked from a zygote ({reason})",
        stacklevel=3,
    )


def _forget_in_child() -> None:
    """A process forked from a judge starts without its zygotes: their control sockets are
    the parent's conversation, and their exit would end the parent's workers."""
    global _lock
    _zygotes.clear()
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def close_all() -> None:
    """Stop this process's zygotes and remove their pools (a pytest session's end; exit)."""
    with _lock:
        zygotes = list(_zygotes.values())
        _zygotes.clear()
    for zygote in zygotes:
        if zygote is not None:
            zygote.close()
