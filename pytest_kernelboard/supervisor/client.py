"""The judge's handle on one worker process: spawn, request, wait with a deadline, kill."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import os
import pickle
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from types import ModuleType
from typing import Any

from ..channel import protocol, scrubbing, transport, window
from ..channel.cage import LIMITS_VARIABLE, WARM_PROFILER_VARIABLE
from ..channel.cloning import clone_data
from ..channel.protocol import ErrorKind, Op
from . import digest, forked, pausing, pickles, sandbox, wire
from .environment import cache_dirs, default_cache_dir, worker_environment
from .host_waits import HostWaitMeter
from .pausing import resume
from .stall import ImportWatch, import_watch

LOG_TAIL_CHARS = 2000
NCCL_LOG_NAME = "nccl.log"
SEND_TIMEOUT_S = 120


class WorkerFailure(Exception):
    """A request did not produce a reply: the worker raised, died, or ran out of time.

    `status` is the case status it maps to: error, crashed or timeout. `kind` is what the
    worker's error reply said went wrong (protocol.ErrorKind), None where the judge itself
    gave the verdict (a death, a deadline, a broken protocol); `exception` the class name of
    what raised in the worker, where something did; `module` what a failed import named.
    """

    def __init__(
        self,
        status: str,
        message: str,
        kind: ErrorKind | None = None,
        exception: str | None = None,
        module: str | None = None,
    ):
        self.status = status
        self.kind = kind
        self.exception = exception
        self.module = module
        self.timeout_s: float | None = None  # a request's deadline that passed
        super().__init__(message)

    @classmethod
    def timed_out(cls, timeout_s: float) -> WorkerFailure:
        """A request that got no reply by its deadline (the evaluation names which limit)."""
        failure = cls("timeout", f"timed out after {timeout_s:g} s")
        failure.timeout_s = timeout_s
        return failure


class ImportStalled(WorkerFailure):
    """An import that made no progress for the stall window (supervisor/stall.py): a hang, told
    apart from a build that runs out of its budget."""


@dataclass
class Reply:
    payload: dict[str, Any]
    elapsed_s: float
    outside_us: float = 0.0  # the judge's clock: request sent to reply ready, in microseconds
    host_transport: bool = False  # CUDA tensors crossed as host copies (outside_us holds them)
    # The output's tensors are the judge's own (copied out of a window, or moved from the host):
    # no copy is needed to keep them. A frugal reply's output lies in the inbound window
    # instead, read in place while the worker is stopped (WorkerProcess.output_unchanged).
    owned: bool = False
    in_place: bool = False
    # Of outside_us, how long the judge's thread and the worker's threads waited for a CPU the
    # host was busy with (supervisor/host_waits.py); 0 where not measured or not explained.
    host_wait_us: float = 0.0


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _share_through_files() -> None:
    """Tensors cross to the worker as shared-memory files (CPU) or CUDA IPC handles.

    The default strategy passes descriptors through a side channel that needs a shared
    multiprocessing key; our worker is not a multiprocessing child, so it cannot use it.
    """
    import torch.multiprocessing

    torch.multiprocessing.set_sharing_strategy("file_system")


@functools.cache
def _shm_manager_folder() -> Path:
    # A short path: the manager's socket path must fit a Unix socket address (108 bytes),
    # which a deep temporary folder (pytest's, say) would overflow.
    short = "/tmp" if os.path.isdir("/tmp") else None
    folder = Path(tempfile.mkdtemp(prefix="kb-shm-", dir=short))
    atexit.register(_remove_shm_manager_folder, folder, os.getpid())
    return folder


# At the judge's exit: wait (at most 60 s) for the manager to remove its own socket folder,
# then remove the judge's. A shell, detached: the manager exits only after the judge has.
_REMOVE_WHEN_EMPTY = 'while [ -n "$(ls -A "$1")" ]; do sleep 0.05; done; rmdir "$1"'


def _remove_shm_manager_folder(folder: Path, owner: int) -> None:
    """At the judge's exit, its manager folder goes too: one left per judge run would pile up
    on a runner. The manager outlives the judge by a moment and removes the socket folder it
    made inside this one when the judge's connection closes; removed before that, its exit
    aborts ("terminate called ... No such file or directory"). So an empty folder goes now and
    one the manager still uses goes after it. A process forked from the judge leaves it to the
    judge."""
    if os.getpid() != owner:
        return
    try:
        folder.rmdir()
    except FileNotFoundError:
        return
    except OSError:  # the manager's folder is still inside
        subprocess.Popen(
            ["timeout", "60", "sh", "-c", _REMOVE_WHEN_EMPTY, "sh", str(folder)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )


def _shm_manager_home() -> Path:
    """A folder of the judge's own for its torch_shm_manager socket, made before torch is
    imported. The manager puts its socket under $TMPDIR, so a sandboxed worker can be given
    this folder at its start and the judge's torch import can overlap the worker's start-up.
    Made again if something cleaned it away before the manager started."""
    folder = _shm_manager_folder()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shm_manager_folders() -> list[Path]:
    """The judge's shared-memory manager folders a sandboxed worker must reach: the home made
    before torch, and, once torch is imported, the folder of a manager already running
    elsewhere (no import to save then)."""
    folders = [_shm_manager_home()]
    if "torch" in sys.modules:
        _share_through_files()
        manager = _shm_manager_dir()
        if manager is not None and not manager.is_relative_to(_shm_manager_home()):
            folders.append(manager)
    return folders


@functools.cache
def _shm_manager_dir() -> Path | None:
    """The folder of the judge's torch_shm_manager socket, which a sandboxed worker must reach
    to map the judge's tensors. Sharing one tiny tensor starts the manager (once per process,
    with $TMPDIR pointing into _shm_manager_home()); its socket path is in the handle."""
    from multiprocessing.reduction import ForkingPickler

    import torch

    previous = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(_shm_manager_home())
    try:
        handle = bytes(ForkingPickler.dumps(torch.zeros(1)))
    finally:
        if previous is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = previous
    found = re.search(rb"(/[^\x00]*?/torch-shm-dir-[A-Za-z0-9_]+)/manager\.sock", handle)
    return Path(found.group(1).decode()) if found else None


@dataclass(frozen=True)
class Launcher:
    """A command the worker starts under: a profiler. It runs inside the sandbox with its
    target, because across the sandbox's namespaces Nsight Compute never reaches the process
    it launched (it waits for it forever). `tool_dir` is bound read-only there, `output_dir`
    writable (where the profiler writes its report)."""

    command: tuple[str, ...]
    tool_dir: Path
    output_dir: Path


class WorkerProcess:
    """A spawned (never forked) Python process that imports and runs one submission."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        launcher: Launcher | None = None,
        sandboxed: bool | None = None,
        host_network: bool = False,
        warm_profiler: bool = False,
        device: int | None = None,
        spawn: bool = True,
    ):
        """launcher: a command the worker starts under (a profiler), or None to start plainly.
        sandboxed: None follows the session's policy (sandbox.enabled). host_network: keep the
        host's network inside the sandbox (ranks started one by one meet on its loopback).
        warm_profiler: start torch's profiler once while starting (seconds, off anyone's
        critical path), so a later kernel census costs milliseconds (the batch judge's).
        device: the GPU its CUDA tensors live on (a rank's); None: the judge's current one.
        spawn: False leaves the start to the caller (case_ranks: one sandbox for all ranks)."""
        self.host_network = host_network
        self.device = device
        self.nccl_log: Path | None = None  # a rank's NCCL log, where the judge can read it
        self.launcher = launcher
        self.cache_dir = cache_dir or default_cache_dir()
        self.home = Path(tempfile.mkdtemp(prefix="kb-worker-"))
        self.log_path = self.home / "output.log"
        self.sandboxed = sandbox.enabled() if sandboxed is None else sandboxed
        self.transport: str | None = None  # for CUDA tensors; decided on first use
        self.windows: dict[str, window.Window] = {}  # the shared device windows, by direction
        self._outbound_needed = 0  # a reply came as host copies: grow the outbound window
        self._inbound_needed = 0  # a frugal reply did not fit the inbound window: grow it
        self.peak_bytes = 0  # the most device memory its replies said it held (memory budget)
        self._stopped: list[int] = []  # the worker's processes stopped while its output is read
        self._digest: Any = None  # the in-place output's digest when it arrived
        self._inbound: window.Packer | None = None  # where the last request's tensors went
        self.sent_at = 0.0  # when the last request's bytes went out (time.perf_counter)
        self._host_waits: HostWaitMeter | None = None  # made by the first request that asks
        self.stage_slot: Path | None = None  # where load() stages inside the sandbox
        self._staged_from: Path | None = None
        self.outbox: Path | None = None  # a host folder the sandboxed worker may write to
        parent_end, child_end = socket.socketpair()
        # A worker that stops reading cannot block the judge's send for longer than this.
        parent_end.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_TIMEOUT_S, 0)
        )
        env = worker_environment(os.environ, self.home, self.cache_dir)
        env[LIMITS_VARIABLE] = "sandboxed" if self.sandboxed else "plain"
        if warm_profiler:
            env[WARM_PROFILER_VARIABLE] = "1"
        self.process: subprocess.Popen | forked.ForkedProcess | None = None
        self._env, self._child_end, self._parent_end = env, child_end, parent_end
        if spawn:
            if self.sandboxed and launcher is None:
                self.process = self._forked()
            if self.process is None:
                self._start(env, child_end)
            self._started()

    def _started(self) -> None:
        """What follows the start, however the process was started."""
        self._child_end.close()
        # Only now: this imports torch (seconds), which the worker's own start-up overlaps.
        _share_through_files()
        if self.sandboxed:
            _shm_manager_dir()  # the manager's socket goes where the sandbox already binds
        self.conn = Connection(self._parent_end.detach())
        # The leaderboard's own modules, by name: their classes cross by name both ways.
        self.trusted: dict[str, ModuleType] = {}

    @classmethod
    def case_ranks(cls, world_size: int, launcher: Launcher | None = None) -> list[WorkerProcess]:
        """The workers of one multi-GPU case, rank r's CUDA tensors on GPU r. Sandboxed, they
        are forked into one set of namespaces of their own (worker/zygote.py): what NCCL's
        fast transports and CUDA IPC between ranks need, apart from the judge and every other
        case. Where there is no zygote, each starts in a sandbox of its own on the host's
        network (collectives work; CUDA IPC between ranks does not)."""
        ranks = [cls(launcher=launcher, device=r, spawn=False) for r in range(world_size)]
        first = ranks[0]
        zygote = None
        if first.sandboxed and launcher is None:
            zygote = forked.zygote_for(
                cache_dirs(first._env), _shm_manager_folders(), first._zygote_env()
            )
        if zygote is not None:
            try:
                with contextlib.ExitStack() as logs:
                    members = [
                        dataclasses.replace(
                            rank._member(zygote),
                            log_fd=logs.enter_context(open(rank.log_path, "wb")).fileno(),
                        )
                        for rank in ranks
                    ]
                    processes = zygote.spawn_case(members)
                for rank, process in zip(ranks, processes, strict=True):
                    rank.process = process
            except forked.ZygoteUnavailable as exc:
                forked.give_up(zygote, str(exc))
                for rank in ranks:
                    rank._forget_pool_folders()
        for rank in ranks:
            if rank.process is None:
                if not rank.sandboxed:
                    rank._log_nccl_to(rank.home)
                rank.host_network = rank.sandboxed
                rank._start(rank._env, rank._child_end)
            rank._started()
        return ranks

    def _log_nccl_to(self, folder: Path) -> None:
        """NCCL's own log (which transport joins the ranks) into a file the judge can read,
        apart from the worker's output; a NCCL_DEBUG of the judge's own environment wins."""
        if "NCCL_DEBUG" not in self._env:
            self.nccl_log = folder / NCCL_LOG_NAME
            self._env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_FILE=str(self.nccl_log))

    def _zygote_env(self) -> dict[str, str]:
        return {k: v for k, v in self._env.items() if k != LIMITS_VARIABLE}

    def _member(self, zygote: forked.Zygote) -> forked.Member:
        """This worker as the zygote forks it: its slot and outbox made in the zygote's pool."""
        self.stage_slot = Path(tempfile.mkdtemp(prefix="kb-slot-", dir=zygote.pool))
        self.outbox = Path(tempfile.mkdtemp(prefix="kb-exchange-", dir=zygote.pool))
        self._env["TMPDIR"] = str(self.outbox)
        if self.device is not None:
            self._log_nccl_to(self.outbox)
        return forked.Member(
            self._child_end.fileno(), -1, self._env, self.home, self.stage_slot, self.outbox
        )

    def _forget_pool_folders(self) -> None:
        for folder in (self.stage_slot, self.outbox):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self.stage_slot = self.outbox = None

    def _forked(self) -> Any:
        """The worker forked from this judge's zygote (worker/zygote.py), in namespaces of its
        own, with its slot and outbox in the zygote's pool; None where there is no zygote."""
        caches = cache_dirs(self._env)
        zygote = forked.zygote_for(
            caches, _shm_manager_folders(), self._zygote_env(), self.host_network
        )
        if zygote is None:
            return None
        member = self._member(zygote)
        try:
            with open(self.log_path, "wb") as log:
                return zygote.spawn(dataclasses.replace(member, log_fd=log.fileno()))
        except forked.ZygoteUnavailable as exc:
            forked.give_up(zygote, str(exc))
            self._forget_pool_folders()
            return None

    def _start(self, env: dict[str, str], child_end: socket.socket) -> None:
        """The worker started as a process of its own (under bwrap where sandboxed)."""
        launcher = self.launcher
        cage = self._cage(env) if self.sandboxed else []
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    *cage,
                    *(launcher.command if launcher else ()),
                    sys.executable,
                    "-m",
                    "pytest_kernelboard.worker.main",
                    str(child_end.fileno()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.home,
                pass_fds=(child_end.fileno(),),  # the only descriptor it inherits
                start_new_session=True,  # its own process group: a kill takes its children too
            )

    def _cage(self, env: dict[str, str]) -> list[str]:
        """The bwrap prefix; the submission is staged later into a slot bound from the start."""
        self.stage_slot = Path(tempfile.mkdtemp(prefix="kb-slot-"))
        # The worker's own shm manager socket lands in its TMPDIR: a host folder the judge sees.
        self.outbox = Path(tempfile.mkdtemp(prefix="kb-exchange-"))
        env["TMPDIR"] = str(self.outbox)
        caches = cache_dirs(env)
        # The judge's shm manager socket: in a folder made now, filled once torch starts it.
        exchange = [self.outbox, *_shm_manager_folders()]
        tools = []
        if self.launcher is not None:
            tools.append(self.launcher.tool_dir)
            exchange.append(self.launcher.output_dir)
        return sandbox.bwrap_command(
            self.home, self.stage_slot, caches, exchange, self.host_network, tools
        )

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: dict[str, Any], pass_fd: int | None = None) -> None:
        """One request on the wire, pickled with the leaderboard's classes by name; its CUDA
        tensors go through the inbound window where that is the transport. `pass_fd` follows
        the frame over the socket (a window's descriptor)."""
        data = self._encode(message)
        self._go_on()  # a worker stopped while its last output was read takes the next request
        self.sent_at = time.perf_counter()  # the judge's clock opens once the bytes are ready
        self.conn.send_bytes(data)
        if pass_fd is not None:
            window.send_fd(self.conn.fileno(), pass_fd)

    def _encode(self, message: dict[str, Any]) -> bytes:
        if self.transport != transport.WINDOW or message["op"] == Op.WINDOW:
            return pickles.dumps(message, self.trusted)
        if not self.windows:  # released after a large case: new ones, sized by this request
            self._share_window("in", 0)
            self._share_window("out", 0)
        packer = window.Packer(self.windows["in"].device, "in")
        data = pickles.dumps(message, self.trusted, packer)
        needed_in = max(packer.nbytes, self._inbound_needed)
        self._inbound_needed = 0
        if needed_in > self.windows["in"].size:
            self._share_window("in", window.grown_size(needed_in, self.windows["in"].size))
        # The outbound window grows to what replies needed (a reply too large came as host
        # copies once): sized by the outputs, not the inputs, which may be far larger.
        needed = self._outbound_needed
        self._outbound_needed = 0
        if needed > self.windows["out"].size:
            self._share_window("out", window.grown_size(needed, self.windows["out"].size))
        packer.copy_into(self.windows["in"])
        self._inbound = packer
        return data

    def _stop_while_read(self, output: Any) -> None:
        """A frugal reply's output lies in memory the worker maps: stop the worker's process
        (no thread of it can launch more work) and take the output's digest, which
        output_unchanged compares once the judge has checked it."""
        self._stopped = pausing.stop(pausing.python_processes(self.process.pid))
        self._digest = digest.of(output)

    def output_unchanged(self, output: Any) -> bool:
        """Whether a frugal reply's output still has the bytes it arrived with (work the worker
        left running could have changed it while the judge read it in place)."""
        return self._digest is None or digest.of(output) == self._digest

    def _go_on(self) -> None:
        pausing.go_on(self._stopped)
        self._stopped, self._digest = [], None

    def private_copy(self, data: Any) -> Any:
        """What to send so that the worker gets inputs of its own: the data itself where the
        inbound window is the copy, else a clone (shared memory and CUDA IPC share storage)."""
        if self.transport is None and self._cuda_device() is not None and _has_cuda_tensor(data):
            self._choose_transport()
        return data if self.transport == transport.WINDOW else clone_data(data)

    def inputs_as_seen(self, data: Any) -> Any | None:
        """The worker's copy of the last request's `data` as it is now, after the call: the
        same memory where inputs are shared (CPU shared memory, CUDA IPC), views of the inbound
        window where they crossed through it, None where the worker holds a private copy."""
        if self.transport == transport.HOST:
            return None
        if self.transport != transport.WINDOW or self._inbound is None:
            return data
        return window.views_in(self.windows["in"], self._inbound, data)

    @property
    def window_bytes(self) -> int:
        """The device windows' size together (memory the judge holds for this worker)."""
        return sum(w.size for w in self.windows.values())

    def release_windows(self, above: int = 0) -> None:
        """Let go of the device windows if together they hold more than `above` bytes: the
        worker unmaps its side first, then the judge releases the memory. The next request
        with CUDA tensors makes new ones, sized for it."""
        if self.transport != transport.WINDOW or not self.windows:
            return
        if self.window_bytes <= above:
            return
        device = self.windows["in"].device
        for direction in list(self.windows):
            reply = self.request(Op.WINDOW, 120.0, direction=direction, size=0, device=device)
            scrubbing.QUEUE.released(int(reply.payload.get("released_bytes", 0)))
            self._close_window(self.windows.pop(direction))
        self._inbound = None

    def _share_window(self, direction: str, size: int) -> None:
        """A new device window of at least `size` bytes for one direction, handed to the
        worker as a descriptor; the one it replaces is unmapped once the worker has switched."""
        device = self.windows["in"].device if self.windows else self._cuda_device()
        new = window.Window.create(size, device)
        fd = new.export_fd()
        try:
            self.request(
                Op.WINDOW, 120.0, pass_fd=fd, direction=direction, size=new.size, device=device
            )
        except BaseException:
            new.close()
            raise
        finally:
            os.close(fd)
        old, self.windows[direction] = self.windows.get(direction), new
        if old is not None:
            self._close_window(old)

    @staticmethod
    def _close_window(old: window.Window) -> None:
        old.close()
        scrubbing.QUEUE.released(old.size)  # the worker has unmapped it: the memory is freed

    def request(
        self,
        op: Op,
        timeout_s: float,
        *,
        pass_fd: int | None = None,
        frugal: bool = False,
        watch: ImportWatch | None = None,
        host_waits: bool = False,
        **payload: Any,
    ) -> Reply:
        """Send one request and wait for its reply; on any failure the worker is dead after.

        frugal: the inputs and outputs are large; the worker returns its cached memory before
        replying and puts the output over the consumed inputs in the inbound window, where it
        is read in place (no second copy) while the worker stays stopped, until the next
        request (see output_unchanged).
        watch: asked while waiting whether the worker still gets on (an import's).
        host_waits: measure how long the request waited for CPUs of a busy host (a timed
        call's, for the judge's clock check)."""
        # On the host (no CUDA: no transport), CPU tensors cross as shared-memory files.
        frugal = frugal and self._transport_for(payload) in (transport.WINDOW, None)
        if frugal:
            payload[protocol.FRUGAL_KEY] = True
        host_transport = self.outgoing(payload)
        trace_path = self._trace_through_outbox(payload)
        meter = self._host_wait_meter() if host_waits else None
        if meter is not None:
            meter.start()
        started = time.perf_counter()
        try:
            self.send({"op": Op(op).value, **payload}, pass_fd)
        except BlockingIOError:  # SO_SNDTIMEO: the worker stopped reading
            self.kill()
            raise WorkerFailure(
                "error", f"the worker stopped reading requests ({SEND_TIMEOUT_S} s)"
            ) from None
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise self._died() from None
        except WorkerFailure:  # handing over a grown window failed
            self.kill()
            raise
        except Exception as exc:  # the input cannot be shared (e.g. /dev/shm is full)
            self.kill()
            raise WorkerFailure(
                "error", f"the input could not be sent to the worker: {type(exc).__name__}: {exc}"
            ) from None
        sent = self.sent_at
        if meter is not None:
            meter.sent()
        deadline = started + timeout_s
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                self.kill()
                raise WorkerFailure.timed_out(timeout_s)
            try:
                ready = self.conn.poll(min(remaining, 0.5))
            except (OSError, EOFError):
                raise self._died() from None
            if ready:
                ready_at = time.perf_counter()
                if meter is not None:
                    meter.stop()
                reply = self._receive(op, deadline, timeout_s, frugal)
                break
            if not self.alive:
                raise self._died()
            stalled = watch.check() if watch is not None else None
            if stalled:
                self.kill()
                raise ImportStalled("timeout", stalled)
        elapsed = time.perf_counter() - started
        self.peak_bytes = max(self.peak_bytes, int(reply.get("peak_bytes", 0)))
        if frugal:  # it gave its cache back before replying: at most what it held
            scrubbing.QUEUE.released(int(reply.get("peak_bytes", 0)))
        if "error" in reply:
            # The worker only ever reports "error": crashed and timeout are the judge's verdicts.
            raise failure_of(reply, self._judge_paths(reply["error"]) + self._log_note())
        self.incoming(reply, host_transport)
        if trace_path is not None:
            shutil.move(payload["trace_path"], trace_path)
        # A reply too large for the outbound window came as host copies: the judge's clock
        # holds those copies, as it does on the host transport.
        copied = host_transport or self._outbound_needed > 0 or self._inbound_needed > 0
        in_place = frugal and "output" in reply and not copied
        if in_place:
            self._stop_while_read(reply["output"])
        owned = self.transport in (transport.WINDOW, transport.HOST) and not in_place
        waited = meter.explained_us(float(reply.get("wall_us", 0.0))) if meter else 0.0
        return Reply(reply, elapsed, (ready_at - sent) * 1e6, copied, owned, in_place, waited)

    def _receive(
        self, op: Op, deadline: float, timeout_s: float, frugal: bool = False
    ) -> dict[str, Any]:
        """One reply, read as untrusted data: by the deadline, capped, data-only unpickling,
        checked keys."""
        try:
            data = wire.read_frame(self.conn.fileno(), deadline)
        except (EOFError, OSError):
            raise self._died() from None
        except wire.FrameTimeout:
            self.kill()
            raise WorkerFailure.timed_out(timeout_s) from None
        except wire.ProtocolError as exc:
            self.kill()
            raise WorkerFailure("error", f"the worker broke the protocol: {exc}") from None
        refused = (
            wire.ProtocolError,
            pickles.RefusedGlobal,
            pickle.UnpicklingError,
            window.WindowError,
        )
        try:
            # Data only, plus the leaderboard's own classes (transport.py); then checked keys.
            # CUDA tensors in the outbound window are checked and copied out as they are read.
            with window.receiving(self.windows, copy_out=not frugal):
                reply = pickles.loads(data, self.trusted)
                if frugal:
                    self._inbound_needed = window.host_bytes_received()
                else:
                    self._outbound_needed = window.host_bytes_received()
            return protocol.validate(op, reply)
        except Exception as exc:  # any failure to read them: a worker's bytes are not trusted
            self.kill()
            detail = str(exc) if isinstance(exc, refused) else f"{type(exc).__name__}: {exc}"
            raise WorkerFailure("error", f"the worker broke the protocol: {detail}") from None

    def outgoing(self, payload: dict[str, Any]) -> bool:
        """Ready a request's payload for this worker's CUDA transport (chosen on the first
        CUDA input); True where its CUDA tensors travel as host copies, so the reply's do too
        (see incoming). Every request to a worker goes through here, a rank's too."""
        self._transport_for(payload)
        return self._host_transport(payload)

    def incoming(self, reply: dict[str, Any], host_transport: bool) -> None:
        """A reply's output back on this worker's GPU where it crossed as host copies."""
        if host_transport and "output" in reply:
            reply["output"] = transport.to_device(reply["output"], f"cuda:{self._cuda_device()}")

    def _transport_for(self, payload: dict[str, Any]) -> str | None:
        if self.transport is None and "data" in payload and self._cuda_device() is not None:
            self._choose_transport()
        return self.transport

    def _cuda_device(self) -> int | None:
        """The GPU this worker's CUDA tensors live on; None where the judge has no CUDA."""
        judge = _judge_device()
        if judge is None:
            return None
        return self.device if self.device is not None else judge

    def _choose_transport(self) -> None:
        """Device windows where the GPU can share memory as descriptors (both ways, across
        the sandbox); else CUDA IPC, or host copies in a sandbox where IPC fails."""
        wanted = os.environ.get("KERNELBOARD_CUDA_TRANSPORT", "auto")
        device = self._cuda_device()
        if wanted in ("auto", transport.WINDOW):
            if window.cuda_vmm.supported(device):
                self.transport = transport.WINDOW
                try:
                    self._share_window("in", 0)
                    self._share_window("out", 0)
                    return
                except (window.cuda_vmm.CudaDriverError, OSError) as exc:
                    print(
                        f"kernelboard: device windows failed ({exc}); using CUDA IPC or copies",
                        file=sys.stderr,
                    )
                    self._close_windows()
        if wanted == transport.HOST:
            self.transport = transport.HOST
        elif self.sandboxed and wanted != transport.IPC:
            self.transport = session_transport()
        else:
            self.transport = transport.IPC

    def _close_windows(self) -> None:
        for shared in self.windows.values():
            try:
                self._close_window(shared)
            except Exception:  # the device may be gone with the worker; nothing to keep
                pass
        self.windows = {}

    def _host_transport(self, payload: dict[str, Any]) -> bool:
        """In the sandbox, CUDA inputs cross as host tensors where CUDA IPC does not work."""
        if "data" not in payload or not _has_cuda_tensor(payload["data"]):
            return False
        if self.transport != transport.HOST:
            return False
        payload["data"] = transport.to_host(payload["data"])
        payload["transport"] = transport.HOST
        return True

    def _trace_through_outbox(self, payload: dict[str, Any]) -> str | None:
        """A sandboxed worker writes a profiler trace into its outbox; the judge moves it out.
        Returns where the judge wants it (None when nothing is to move)."""
        wanted = payload.get("trace_path")
        if not self.sandboxed or not wanted:
            return None
        payload["trace_path"] = str(self.outbox / "trace.json")
        return wanted

    def _judge_paths(self, message: str) -> str:
        """Paths inside the sandbox's stage slot, as the judge's staged folder."""
        if self.stage_slot is not None and self._staged_from is not None:
            return message.replace(str(self.stage_slot), str(self._staged_from))
        return message

    def ping(self, timeout_s: float = 120.0) -> dict[str, Any]:
        return self.request(Op.PING, timeout_s).payload

    def load(
        self, stage_dir: Path, module: str, timeout_s: float, entry: str = "custom_kernel"
    ) -> None:
        try:
            watch = import_watch(self.process.pid, timeout_s)  # a hang fails before the budget
        except ValueError as exc:  # a malformed stall window: the run's set-up, named
            self.kill()
            raise WorkerFailure("error", str(exc)) from None
        stage_dir = self.stage(stage_dir)
        self.request(
            Op.LOAD, timeout_s, watch=watch, stage_dir=str(stage_dir), module=module, entry=entry
        )

    def stage(self, stage_dir: Path) -> Path:
        """Where this worker sees the staged files: the sandbox's slot (bound read-only from
        its start, filled now), or the staged folder itself."""
        if self.stage_slot is None:
            return Path(stage_dir)
        shutil.copytree(stage_dir, self.stage_slot, dirs_exist_ok=True)
        self._staged_from = Path(stage_dir)
        return self.stage_slot

    def _died(self) -> WorkerFailure:
        try:
            returncode = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            returncode = self.process.returncode
        if returncode is not None and self.sandboxed and returncode > 128:
            returncode = 128 - returncode  # bwrap reports a signal death as 128 + signal
        if returncode is not None and returncode < 0:
            what = f"the worker was killed by {_signal_name(returncode)}"
        else:
            what = f"the worker exited with code {returncode}"
        note = self._log_note()
        self.kill()
        return WorkerFailure("crashed", what + note)

    def output_tail(self) -> str:
        """The log's last lines; only its tail is read, however much the worker wrote."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(max(log.seek(0, os.SEEK_END) - 4 * LOG_TAIL_CHARS, 0))
                text = log.read().decode(errors="replace")
        except OSError:
            return ""
        return self._judge_paths(text[-LOG_TAIL_CHARS:].strip())

    def _log_note(self) -> str:
        tail = self.output_tail()
        return f"\n--- worker output (last lines) ---\n{tail}" if tail else ""

    def _host_wait_meter(self) -> HostWaitMeter:
        """This worker's meter of host waits: it keeps the tree's /proc files open."""
        if self._host_waits is None:
            self._host_waits = HostWaitMeter(self.process.pid)
        return self._host_waits

    def kill(self) -> None:
        """Stop the worker and everything it started; safe to call twice."""
        if self.process.poll() is None:
            if isinstance(self.process, forked.ForkedProcess):
                self.process.kill()  # PID 2 of its namespace: every process in it goes too
            else:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self.process.kill()
            self.process.wait()
        self.conn.close()
        self._close_windows()
        if self._host_waits is not None:
            self._host_waits.close()
            self._host_waits = None
        # The sandbox's stage slot and outbox are of no use once the worker is gone.
        for folder in (self.stage_slot, self.outbox):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the worker. Only a worker under a launcher (a profiler that writes its report
        when its target exits) is asked to exit first; any other is killed at once, which
        spares the wall time of Python's and torch's shutdown (half a second on an H100)."""
        if self.alive and self.launcher:
            try:
                self.send({"op": Op.EXIT.value})
                self.process.wait(timeout=timeout_s)
            except Exception:  # a polite exit only; the kill below is what counts
                pass
        self.discard()

    def discard(self) -> None:
        """Kill the worker and remove its home: for a worker that is done with, its failure (and
        the log tail in its home) already reported. Killed and dropped, each left a folder."""
        self.kill()
        shutil.rmtree(self.home, ignore_errors=True)


def failure_of(reply: dict[str, Any], message: str) -> WorkerFailure:
    """The WorkerFailure of a validated error reply. The worker only ever reports "error":
    crashed and timeout are the judge's verdicts; the reply's kind says what the error was."""
    kind = protocol.error_kind(reply)
    return WorkerFailure("error", message, kind, reply.get("exception"), reply.get("module"))


def _has_cuda_tensor(obj: Any) -> bool:
    if isinstance(obj, (list, tuple)):
        return any(_has_cuda_tensor(v) for v in obj)
    if isinstance(obj, dict):
        return any(_has_cuda_tensor(v) for v in obj.values())
    return bool(getattr(obj, "is_cuda", False))


def _judge_device() -> int | None:
    """The judge's CUDA device, or None where the judge has none (or has not imported torch)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda.current_device()


_SESSION_TRANSPORT: str | None = None


def session_transport() -> str:
    """How CUDA tensors cross into a sandboxed worker here: probed once per session."""
    global _SESSION_TRANSPORT
    if _SESSION_TRANSPORT is None:
        probe = WorkerProcess(sandboxed=True)
        probe.transport = transport.IPC  # the probe itself sends by IPC
        try:
            _SESSION_TRANSPORT = transport.probe_ipc(probe)
        finally:
            probe.close()
    return _SESSION_TRANSPORT


class WorkerPool:
    """Keeps spare workers starting in the background, so their Python and torch start-up
    overlaps with the judge's own work instead of adding to every submission's wall time.
    One spare serves a pytest run; a batch keeps a few (its judge imports candidates ahead).

    Every worker is spawned by one thread of the pool's own that lives as long as the pool: a
    sandboxed worker dies with the thread that started it (bwrap's --die-with-parent is a
    parent-death signal, which Linux sends when that thread ends), and a batch takes workers
    from short-lived threads."""

    def __init__(self, launcher: Launcher | None = None, spares: int = 1) -> None:
        self.launcher = launcher
        self.spares = spares
        # Workers the run will still take, where it knows (None: keep `spares` ready). A spare
        # nobody takes costs a Python and torch start-up (seconds of CPU) for nothing.
        self.demand: int | None = None
        self.warm_profiler = False  # workers start torch's profiler while they start
        self._spare: list[WorkerProcess] = []
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-spawn")

    def _spawn(self) -> WorkerProcess:
        return self._spawner.submit(
            WorkerProcess, launcher=self.launcher, warm_profiler=self.warm_profiler
        ).result()

    def expect(self, takes: int) -> None:
        """The run will take about this many more workers: keep no more spares than that (the
        ones over it are stopped now, part way through their start-up)."""
        with self._lock:
            self.demand = max(takes, 0)
            unwanted, self._spare = self._spare[self.demand :], self._spare[: self.demand]
        for worker in unwanted:
            worker.close(timeout_s=1.0)

    def _drop_dead_spares(self) -> None:
        for worker in [w for w in self._spare if not w.alive]:
            self._spare.remove(worker)
            worker.discard()

    def prestart(self) -> None:
        with self._lock:
            self._drop_dead_spares()
            wanted = self.spares if self.demand is None else min(self.spares, self.demand)
            while len(self._spare) < wanted:
                self._spare.append(self._spawn())

    def take(self) -> WorkerProcess:
        with self._lock:
            self._drop_dead_spares()
            worker = self._spare.pop(0) if self._spare else self._spawn()
            if self.demand is not None:
                self.demand = max(self.demand - 1, 0)
        resume(worker.process.pid)  # a spare may be paused while another case is timed
        self.prestart()
        return worker

    def spare_workers(self) -> list[WorkerProcess]:
        with self._lock:
            return list(self._spare)

    def close(self) -> None:
        with self._lock:
            spares, self._spare = self._spare, []
        for worker in spares:
            worker.close(timeout_s=1.0)  # also removes its folders
        # Workers taken from the pool die with the spawning thread: only once they are closed.
        self._spawner.shutdown(wait=False)
