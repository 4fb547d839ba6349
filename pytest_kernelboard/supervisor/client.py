"""The judge's handle on one worker process: a request with its deadline, its reply read as
untrusted data, kill. How the process starts is supervisor/launch.py's."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..channel import protocol, scrubbing, transport, window
from ..channel.protocol import Op
from . import aside, failures, forked, pickles, wire
from .crossing import TensorCrossing
from .failures import ImportStalled, WorkerFailure, failure_of
from .host_waits import HostWaitMeter
from .launch import SEND_TIMEOUT_S, Launcher, WorkerLaunch, start_case
from .stall import ImportWatch, import_watch


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
    # CPU time the worker's process tree ran during the request, by the judge's reading of
    # /proc (None where not measured): where the unseen time of a flagged call went.
    worker_cpu_us: float | None = None


class WorkerProcess:
    """The judge's handle on one worker process, which imports and runs one submission: started
    on construction (supervisor/launch.py), then talked to by requests until killed."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        launcher: Launcher | None = None,
        sandboxed: bool | None = None,
        host_network: bool = False,
        warm_timing: bool = False,
        device: int | None = None,
        *,
        timing_cpu: int | None = None,
        launched: WorkerLaunch | None = None,
    ):
        """launcher: a command the worker starts under (a profiler), or None to start plainly.
        sandboxed: None follows the session's policy (sandbox.enabled). host_network: keep the
        host's network inside the sandbox (ranks started one by one meet on its loopback).
        warm_timing: make the blocking kernel while starting (off anyone's critical path), so
        the first timed call (its calibration) does not compile a kernel (the batch judge's).
        device: the GPU its CUDA tensors live on (a rank's); None: the judge's current one.
        timing_cpu: the CPU its timed calls run on, which the judge keeps for them
        (judge/timing_core.py); None: each case's fastest (worker/cpu_choice.py).
        launched: a worker already started (a case's rank, case_ranks); it has the others."""
        if launched is None:
            launched = WorkerLaunch(
                cache_dir, launcher, sandboxed, host_network, warm_timing, device, timing_cpu
            )
            launched.start()
        self.launcher = launched.launcher
        self.sandboxed = launched.sandboxed
        self.device = launched.device
        self.process, self.conn = launched.process, launched.conn
        self.home, self.log_path = launched.home, launched.log_path
        self.stage_slot = launched.stage_slot  # where load() stages inside the sandbox
        self.outbox = launched.outbox  # a host folder the sandboxed worker may write to
        self.nccl_log = launched.nccl_log  # a rank's NCCL log, where the judge can read it
        # How its tensors cross: the CUDA transport, the device windows, in-place replies.
        self.crossing = TensorCrossing(self.device, self.sandboxed, self.request, session_transport)
        # The leaderboard's own modules, by name: their classes cross by name both ways.
        self.trusted: dict[str, ModuleType] = {}
        self.peak_bytes = 0  # the most device memory its replies said it held (memory budget)
        self.sent_at = 0.0  # when the last request's bytes went out (time.perf_counter)
        self._host_waits: HostWaitMeter | None = None  # made by the first request that asks
        self._staged_from: Path | None = None

    @classmethod
    def case_ranks(cls, world_size: int, launcher: Launcher | None = None) -> list[WorkerProcess]:
        """The workers of one multi-GPU case, rank r's CUDA tensors on GPU r, started together
        (launch.start_case: one sandbox for all ranks where there is a zygote)."""
        return [cls(launched=rank) for rank in start_case(world_size, launcher)]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    # -- its tensors, as the judge sees them (supervisor/crossing.py) ---------------------------
    @property
    def transport(self) -> str | None:
        return self.crossing.transport

    @property
    def windows(self) -> dict[str, window.Window]:
        return self.crossing.windows

    @property
    def window_bytes(self) -> int:
        return self.crossing.window_bytes

    def release_windows(self, above: int = 0) -> None:
        self.crossing.release_windows(above)

    def private_copy(self, data: Any) -> Any:
        return self.crossing.private_copy(data)

    def expect_reply(self, nbytes: int) -> None:
        """The next reply will need `nbytes` of the outbound window (TensorCrossing)."""
        self.crossing.expect_reply(nbytes)

    @property
    def reply_outgrew(self) -> int:
        """The bytes the last reply needed beyond its outbound window (0 where it fit)."""
        return self.crossing.outbound_needed

    def inputs_as_seen(self, data: Any) -> Any | None:
        return self.crossing.inputs_as_seen(data)

    def output_unchanged(self, output: Any) -> bool:
        return self.crossing.output_unchanged(output)

    def outgoing(self, payload: dict[str, Any]) -> bool:
        return self.crossing.outgoing(payload)

    def incoming(self, reply: dict[str, Any], host_transport: bool) -> None:
        self.crossing.incoming(reply, host_transport)

    def send(self, message: dict[str, Any], pass_fd: int | None = None) -> None:
        """One request on the wire, pickled with the leaderboard's classes by name; its CUDA
        tensors go through the inbound window where that is the transport. `pass_fd` follows
        the frame over the socket (a window's descriptor)."""
        data = self.crossing.encode(message, self.trusted)
        self.crossing.go_on()  # a worker stopped while its last output was read takes the next request
        self.sent_at = time.perf_counter()  # the judge's clock opens once the bytes are ready
        self.conn.send_bytes(data)
        if pass_fd is not None:
            window.send_fd(self.conn.fileno(), pass_fd)

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
        frugal = frugal and self.crossing.transport_for(payload) in (transport.WINDOW, None)
        if frugal:
            payload[protocol.FRUGAL_KEY] = True
        host_transport = self.crossing.outgoing(payload)
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
            raise self.died() from None
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
        # The batch judge may stop the worker while it waits (aside.py).
        holder = aside.current() or aside.NEVER
        stopped_before = holder.stopped_s()
        holder.begin(self.process.pid)
        try:
            ready_at = self._await_reply(
                started + timeout_s - stopped_before, timeout_s, holder, watch
            )
        finally:
            holder.end()
        if meter is not None:
            meter.stop()
        stopped_s = holder.stopped_s() - stopped_before
        reply = self.receive(op, started + timeout_s + stopped_s, timeout_s, frugal)
        elapsed = time.perf_counter() - started
        self.peak_bytes = max(self.peak_bytes, int(reply.get("peak_bytes", 0)))
        if frugal:  # it gave its cache back before replying: at most what it held
            scrubbing.QUEUE.released(int(reply.get("peak_bytes", 0)))
        if "error" in reply:
            # The worker only ever reports "error": crashed and timeout are the judge's verdicts.
            raise failure_of(reply, self._judge_paths(reply["error"]) + self.log_note())
        self.crossing.incoming(reply, host_transport)
        if trace_path is not None:
            shutil.move(payload["trace_path"], trace_path)
        # A reply too large for the outbound window came as host copies: the judge's clock
        # holds those copies, as it does on the host transport.
        copied = self.crossing.copied_back(host_transport)
        in_place = frugal and "output" in reply and not copied
        if in_place:
            self.crossing.stop_while_read(reply["output"], self.process.pid)
        owned = self.crossing.owns_output(in_place)
        waited = meter.explained_us(float(reply.get("wall_us", 0.0))) if meter else 0.0
        ran = meter.ran_us() if meter else None
        return Reply(reply, elapsed, (ready_at - sent) * 1e6, copied, owned, in_place, waited, ran)

    def _await_reply(
        self,
        deadline: float,
        timeout_s: float,
        holder: aside.Holder,
        watch: ImportWatch | None,
    ) -> float:
        """When the reply began to arrive (time.perf_counter()). Each second the worker spends
        stopped while its call is set aside moves the deadline on by one (`deadline` is net of
        those before the call); the worker is killed only once it is no longer set aside
        (holder.end())."""
        while True:
            stopped_s = holder.stopped_s()
            remaining = deadline + stopped_s - time.perf_counter()
            if remaining <= 0:
                holder.end()  # it may have been stopped meanwhile: then it has time left
                if holder.stopped_s() > stopped_s:
                    holder.begin(self.process.pid)
                    continue
                self.kill()
                raise WorkerFailure.timed_out(timeout_s)
            try:
                ready = self.conn.poll(min(remaining, 0.5))
            except (OSError, EOFError):
                raise self.died() from None
            if ready:
                return time.perf_counter()
            if not self.alive:
                raise self.died()
            stalled = watch.check() if watch is not None else None
            if stalled:
                holder.end()
                self.kill()
                raise ImportStalled("timeout", stalled)

    def receive(
        self, op: Op, deadline: float, timeout_s: float, frugal: bool = False
    ) -> dict[str, Any]:
        """One reply, read as untrusted data: by the deadline, capped, data-only unpickling,
        checked keys."""
        try:
            data = wire.read_frame(self.conn.fileno(), deadline)
        except (EOFError, OSError):
            raise self.died() from None
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
            # Data only, plus the leaderboard's own classes; then checked keys.
            reply = self.crossing.decode(data, self.trusted, frugal)
            return protocol.validate(op, reply)
        except Exception as exc:  # any failure to read them: a worker's bytes are not trusted
            self.kill()
            detail = str(exc) if isinstance(exc, refused) else f"{type(exc).__name__}: {exc}"
            raise WorkerFailure("error", f"the worker broke the protocol: {detail}") from None

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

    def died(self) -> WorkerFailure:
        """The failure of a worker that is gone (or is made so): its exit and its last output
        lines. A rank group reads its ranks' deaths through here too."""
        try:
            returncode = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            returncode = self.process.returncode
        note = self.log_note()
        self.kill()
        return failures.died(returncode, self.sandboxed, note)

    def output_tail(self) -> str:
        """The log's last lines, with the sandbox's paths as the judge's."""
        return self._judge_paths(failures.output_tail(self.log_path))

    def log_note(self) -> str:
        """The worker's last output lines, to append to a failure's message ("" if none)."""
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
        self.crossing.close_windows()
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


_SESSION_TRANSPORT: str | None = None


def session_transport() -> str:
    """How CUDA tensors cross into a sandboxed worker here: probed once per session."""
    global _SESSION_TRANSPORT
    if _SESSION_TRANSPORT is None:
        probe = WorkerProcess(sandboxed=True)
        probe.crossing.transport = transport.IPC  # the probe itself sends by IPC
        try:
            _SESSION_TRANSPORT = transport.probe_ipc(probe)
        finally:
            probe.close()
    return _SESSION_TRANSPORT
