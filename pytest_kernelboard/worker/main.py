"""Worker process entry point: the request loop of the process that runs a submission.

Runs as `python -m pytest_kernelboard.worker.main FD`, where FD is its end of a
private socket pair (or forked by worker/zygote.py). Every request gets exactly one reply; an
exception in participant code becomes an error reply with a traceback trimmed to their file.
Importing the submission is worker/submission.py's job, timing its calls worker/timing.py's.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from pytest_kernelboard.channel import fences, heap, scrubbing, transport, window
from pytest_kernelboard.channel.cage import WARM_TIMING_VARIABLE
from pytest_kernelboard.channel.cloning import clone_data
from pytest_kernelboard.channel.protocol import FRUGAL_KEY, ErrorKind, Op, classify, error_reply
from pytest_kernelboard.worker.census import KernelCensus, session
from pytest_kernelboard.worker.libraries import warm_blas
from pytest_kernelboard.worker.limits import apply_limits
from pytest_kernelboard.worker.ranks import all_reduce_ceiling, init_group
from pytest_kernelboard.worker.reservation import Reservation
from pytest_kernelboard.worker.submission import import_kernel, trimmed_traceback
from pytest_kernelboard.worker.timing import Timer


class Worker:
    """The request loop: each request to its handler, each reply packed and sent (its CUDA
    tensors through the judge's device windows), the windows mapped as the judge hands them."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.kernel = None
        self.stage_dir: Path | None = None
        import torch
        import torch.multiprocessing

        torch.multiprocessing.set_sharing_strategy("file_system")
        fences.capture()  # before the submission is imported: it may patch what waits
        self.torch = torch
        self.cuda = torch.cuda.is_available()
        if not self.cuda:
            os.environ["TRITON_INTERPRET"] = "1"  # Triton kernels run through its interpreter
            from pytest_kernelboard.worker.triton_compat import patch_triton_interpreter

            patch_triton_interpreter()  # runtime loop bounds under NumPy 2.4; a no-op if fixed
        context = False
        if self.cuda:
            # Create the CUDA context now, while the judge is still starting: the first
            # request would otherwise wait for it. Only an early start: on a GPU that other
            # cases fill right now it fails, and the first request, which the judge's memory
            # budget lets through once there is room, makes it instead.
            try:
                torch.zeros(1, device="cuda")
                context = True
            except RuntimeError as exc:  # torch's AcceleratorError / OutOfMemoryError too
                print(f"kernelboard: the CUDA context waits for the first request ({exc})")
        if context:
            warm_blas(torch)
        self.census = KernelCensus(torch) if self.cuda else None
        self.timer = Timer(torch, self.cuda)  # what it calls of torch is captured now
        if context and os.environ.get(WARM_TIMING_VARIABLE):
            # The blocking kernel's compile and load, not in a calibration. The profiler is not
            # started ahead: Kineto leaves CUPTI in every later CUDA call of the process
            # (worker/census.py), host-bound timed calls included.
            self.timer.prepare()
        self.windows: dict[str, window.Window] = {}  # the judge's device windows, by direction
        self._output_as_is = False  # this request's output is sent uncopied (a frugal host call)
        # A frugal call's cache segments, held again before the next (frugal needs windows,
        # which need CUDA).
        self.reservation = Reservation(torch) if self.cuda else None

    # -- requests -----------------------------------------------------------------------------
    def load(self, stage_dir: str, module: str, entry: str = "custom_kernel") -> dict:
        self.stage_dir = Path(stage_dir).resolve()
        self.kernel = import_kernel(self.stage_dir, module, entry, self.cuda)
        if not callable(self.kernel):
            return error_reply(f"{module}.py defines no callable {entry}(data)", ErrorKind.NO_ENTRY)
        return {}

    def call(self, data: Any) -> dict:
        self.timer.leave_timing_cpu()  # a check starts a case: it may build, on every CPU
        output = self.kernel(data)
        if self.cuda:
            fences.synchronize()
        return {"output": self._sendable(output)}

    def time_call(
        self,
        data: Any,
        flush_bytes: int,
        preroll_us: float = 0.0,
        case: str = "",
        keep: bool = False,
        cpu: int = -1,
        wake: bool = True,
    ) -> dict:
        """One timed call (Timer.time_call), on the worker's own copy of the inputs: memory
        mapped from the judge through CUDA IPC is not what a kernel normally reads, and the
        copy leaves the judge's buffers alone. Inputs that came through the inbound window are
        that copy already (plain device memory the worker alone writes), and a second one
        would double the inputs' memory."""
        reply = self.timer.time_call(
            self.kernel,
            data,
            flush_bytes,
            preroll_us,
            case,
            keep,
            copy_input=not self.windows,
            cpu=cpu,
            wake=wake,
        )
        reply["output"] = self._sendable(reply["output"])
        post_us = self.timer.since_synchronized_us()  # packing the output: for messages
        if post_us is not None:
            reply["post_us"] = post_us
        return reply

    def warm(self, case: str, cpu: int = -1, wake: bool = True) -> dict:
        return self.timer.warm(self.kernel, case, cpu, wake)

    def calibrate(self, flush_bytes: int, launch_allowance_us: float, calls: int = 30) -> dict:
        return self.timer.calibrate(flush_bytes, launch_allowance_us, calls)

    def profile_call(self, data: Any, trace_path: str | None = None) -> dict:
        """One call inside a profiling range.

        Without trace_path the range is cudaProfilerStart/Stop, for the Nsight Compute this
        worker was started under; with it, the torch profiler writes a chrome trace there.
        """
        torch = self.torch
        data = clone_data(data)  # the worker's own copy, as for a timed call
        if trace_path is None:
            fences.synchronize()
            torch.cuda.profiler.start()
            try:
                output = self.kernel(data)
                fences.synchronize()
            finally:
                torch.cuda.profiler.stop()
            return {"output": self._sendable(output)}
        with session(torch.autograd.profiler.profile, self.cuda) as profiler:
            output = self.kernel(data)
            if self.cuda:
                fences.synchronize()
        if self.census is not None:
            self.census.sessions += 1  # a session of its own: a census after it needs one more
        profiler.export_chrome_trace(trace_path)
        return {"output": self._sendable(output)}

    def kernels(self, data: Any) -> dict:
        """One call under torch's profiler (worker/census.py): the GPU kernels it launched,
        with their device times, for the judge to tell its own kernels from library ones."""
        if not self.windows:
            data = clone_data(data)
        output, launched = self.census.run(lambda: self.kernel(data))
        return {"output": self._sendable(output), "kernels": [list(k) for k in launched]}

    def attach_window(self, direction: str, size: int, device: int) -> dict:
        """Map the judge's new window for one direction (its descriptor followed the request)
        and let go of the one it replaces. Size 0: only let go (no descriptor follows)."""
        if size == 0:
            old = self.windows.pop(direction, None)
            released = 0
            if direction == "in":
                window.set_receiving(None)
                self.timer.drop_case()
                if self.cuda:
                    released = scrubbing.empty_cache(self.torch)
            if old is not None:
                old.close()
            return {"released_bytes": released}  # the judge waits for its scrubbing
        fd = window.receive_fd(self.conn.fileno())
        new = window.Window.attach(fd, size, device)
        old, self.windows[direction] = self.windows.get(direction), new
        if direction == "in":
            window.set_receiving(new)
        if old is not None:
            old.close()
        return {}

    def echo(self, data: Any) -> dict:
        """The transport probe (harness only, before a submission is loaded): data + 1 back."""
        return {"output": data + 1}

    # -- plumbing -----------------------------------------------------------------------------
    def _sendable(self, output: Any) -> Any:
        # A fresh copy: an output that aliases a received input cannot be re-shared by IPC.
        # Through the windows, packing the reply is the copy; a frugal call's output on the
        # host goes as it is (pickling moves it into a shared-memory file, or names the one
        # it already lies in), read in place by the judge while this process is stopped.
        return output if self.windows or self._output_as_is else clone_data(output)

    def serve(self) -> None:
        handlers = {
            Op.LOAD: self.load,
            Op.CALL: self.call,
            Op.TIME: self.time_call,
            Op.WARM: self.warm,
            Op.CALIBRATE: self.calibrate,
            Op.PROFILE: self.profile_call,
            Op.KERNELS: self.kernels,
            Op.INIT_GROUP: lambda **kw: init_group(self.timer, **kw),
            Op.CEILING: lambda **kw: all_reduce_ceiling(self.timer, **kw),
            Op.ECHO: self.echo,
            Op.WINDOW: self.attach_window,
        }
        while True:
            try:
                request = self.conn.recv()
            except EOFError:
                return
            op = request.pop("op")
            if op == Op.EXIT:
                self.conn.send({})
                return
            if op == Op.PING:
                self.conn.send({"pid": os.getpid(), "cuda": self.cuda})
                continue
            started = time.perf_counter()
            asked_frugal = bool(request.pop(FRUGAL_KEY, False))
            frugal = asked_frugal and bool(self.windows)
            # On the host, a frugal call's output is sent as it is: no copy of it first.
            self._output_as_is = asked_frugal and not self.cuda
            reply = self._run(op, handlers, request, frugal)
            reply["elapsed_s"] = time.perf_counter() - started
            try:
                if self.windows:
                    # The judge may rewrite the inbound window once it has the reply.
                    fences.synchronize()
                inbound = self.windows.get("in") if frugal else None
                data = window.dumps_reply(reply, self.windows.get("out"), inbound)
                # Packed: nothing of the request outlives its reply (an idle worker holds no
                # inputs or outputs; a shared-memory file lives while any process maps it).
                reply = request = None
                if frugal:  # its device memory goes back before the judge checks
                    self.reservation.remember()
                    self.torch.cuda.empty_cache()
                self.conn.send_bytes(data)
                if op == Op.CALL and not self.cuda:  # a case's untimed first call: what the
                    heap.trim()  # last case left in malloc's heap goes (channel/heap.py)
            except Exception as exc:
                self.conn.send(
                    error_reply(f"the output cannot be sent back: {exc}", ErrorKind.UNSENDABLE)
                )

    def _run(
        self, op: str, handlers: dict[str, Callable[..., dict]], request: dict, frugal: bool
    ) -> dict:
        """One request through its handler: its inputs onto the GPU where they crossed as host
        tensors, its device memory measured; whatever participant code raises, an error reply."""
        host_transport = request.pop("transport", None) == transport.HOST
        measured = self.cuda and op in (Op.CALL, Op.TIME)
        if frugal:
            self.reservation.hold_again()
        if measured:
            self.torch.cuda.reset_peak_memory_stats()
        try:
            if host_transport:  # inputs came as host tensors: onto the GPU, untimed
                request["data"] = transport.to_device(request["data"])
                fences.synchronize()
            reply = handlers[op](**request)  # Op members hash as their plain values
            if measured:  # what the judge's memory budget learns this case needs
                reply["peak_bytes"] = peak_reserved_bytes(self.torch)
            if host_transport and "output" in reply:
                reply["output"] = transport.to_host(reply["output"])
        except SystemExit as exc:
            reply = error_reply(f"the submission called exit({exc.code})", ErrorKind.EXIT)
        except BaseException as exc:  # participant code may raise anything
            message = trimmed_traceback(exc, self.stage_dir or Path.cwd())
            # Classified here, where the exception is: the judge decides by kind, not text.
            kind, module = classify(exc, message)
            reply = error_reply(message, kind, type(exc).__name__, module)
        return reply


def peak_reserved_bytes(torch: Any) -> int:
    """torch.cuda.max_memory_reserved(), read from the allocator's nested statistics: that
    function first flattens all of them into one sorted dict of dotted names, for the one
    number it returns (165 us a read against 27 us on an H200, on every measured call)."""
    stats = torch.cuda.memory_stats_as_nested_dict()
    return int(stats.get("reserved_bytes", {}).get("all", {}).get("peak", 0))


def main() -> None:
    apply_limits()  # before any participant code: hard limits it cannot raise again
    conn = Connection(int(sys.argv[1]))
    Worker(conn).serve()


if __name__ == "__main__":
    main()
