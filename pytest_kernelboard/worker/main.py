"""Worker process entry point: import the submission, run calls the judge asks for.

Runs as `python -m pytest_kernelboard.worker.main FD`, where FD is its end of a
private socket pair. Every request gets exactly one reply; an exception in
participant code becomes an error reply with a traceback trimmed to their file.
"""

from __future__ import annotations

import copy
import importlib
import os
import sys
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any


def trimmed_traceback(exc: BaseException, keep_under: Path) -> str:
    """The traceback without harness frames: only frames from files under `keep_under`."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if Path(frame.filename).resolve().is_relative_to(keep_under)
    ]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


class StreamRegistry:
    """Remembers every distinct CUDA stream the submission creates, so timing can wait on them.

    Work a kernel hides on a side stream would otherwise finish after the end event. Every
    torch.cuda.Stream object passes through __new__ (current_stream() builds one too), so
    streams are kept once per (device, id): the list stays as short as the streams are few.
    """

    def __init__(self, torch_module: Any):
        self.torch = torch_module
        self.streams: dict[tuple[int, int], Any] = {}
        stream_class = torch_module.cuda.Stream
        original_new = stream_class.__new__
        registry = self

        def tracking_new(cls, *args, **kwargs):
            stream = original_new(cls, *args, **kwargs)
            registry.streams.setdefault((stream.device_index, stream.stream_id), stream)
            return stream

        stream_class.__new__ = tracking_new

    def join(self) -> None:
        """Make the current stream wait for all work queued on the submission's streams."""
        current = self.torch.cuda.current_stream()
        for key, stream in self.streams.items():
            if key != (current.device_index, current.stream_id):
                current.wait_stream(stream)


class Worker:
    def __init__(self, conn: Connection):
        self.conn = conn
        self.kernel = None
        self.stage_dir: Path | None = None
        import torch
        import torch.multiprocessing

        torch.multiprocessing.set_sharing_strategy("file_system")
        self.torch = torch
        self.cuda = torch.cuda.is_available()
        if not self.cuda:
            os.environ["TRITON_INTERPRET"] = "1"  # Triton kernels run through its interpreter
            from pytest_kernelboard.worker.triton_compat import patch_triton_interpreter

            patch_triton_interpreter()  # runtime loop bounds under NumPy 2.4; a no-op if fixed
        self.streams = StreamRegistry(torch) if self.cuda else None
        self.flush_buffer = None
        self.events = None

    # -- requests -----------------------------------------------------------------------------
    def load(self, stage_dir: str, module: str, entry: str = "custom_kernel") -> dict:
        self.stage_dir = Path(stage_dir).resolve()
        sys.path.insert(0, str(self.stage_dir))
        os.chdir(self.stage_dir)
        loaded = importlib.import_module(module)
        self.kernel = getattr(loaded, entry, None)
        if not callable(self.kernel):
            return {"error": f"{module}.py defines no callable {entry}(data)", "kind": "error"}
        return {}

    def call(self, data: Any) -> dict:
        output = self.kernel(data)
        if self.cuda:
            self.torch.cuda.synchronize()
        return {"output": self._sendable(output)}

    def time_call(self, data: Any, flush_bytes: int) -> dict:
        """One timed call: flush L2, events around the call, side streams joined, host wall too."""
        if not self.cuda:
            start = time.perf_counter()
            output = self.kernel(data)
            elapsed_us = (time.perf_counter() - start) * 1e6
            return {
                "output": self._sendable(output),
                "device_us": elapsed_us,
                "wall_us": elapsed_us,
            }
        torch = self.torch
        if self.flush_buffer is None or self.flush_buffer.numel() != flush_bytes:
            self.flush_buffer = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
            self.events = (
                torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True),
            )
        start_event, end_event = self.events
        # Time the call on the worker's own copy: memory mapped from the judge through CUDA
        # IPC is not what a kernel normally reads, and the copy leaves the judge's buffers alone.
        data = copy.deepcopy(data)
        torch.cuda.synchronize()
        self.flush_buffer.zero_()  # evicts the inputs the judge just wrote from L2
        start_event.record()
        wall_start = time.perf_counter()
        output = self.kernel(data)
        self.streams.join()
        end_event.record()
        torch.cuda.synchronize()  # device-wide: also waits for streams we do not know
        wall_us = (time.perf_counter() - wall_start) * 1e6
        device_us = start_event.elapsed_time(end_event) * 1e3
        return {"output": self._sendable(output), "device_us": device_us, "wall_us": wall_us}

    def profile_call(self, data: Any, trace_path: str | None = None) -> dict:
        """One call inside a profiling range.

        Without trace_path the range is cudaProfilerStart/Stop, for the Nsight Compute this
        worker was started under; with it, the torch profiler writes a chrome trace there.
        """
        torch = self.torch
        data = copy.deepcopy(data)  # the worker's own copy, as for a timed call
        if trace_path is None:
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            try:
                output = self.kernel(data)
                torch.cuda.synchronize()
            finally:
                torch.cuda.profiler.stop()
            return {"output": self._sendable(output)}
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as profiler:
            output = self.kernel(data)
            if self.cuda:
                torch.cuda.synchronize()
        profiler.export_chrome_trace(trace_path)
        return {"output": self._sendable(output)}

    def calibrate(self, flush_bytes: int, calls: int = 30) -> dict:
        """The harness's own cost: an empty call timed exactly like a real one."""
        kernel, self.kernel = self.kernel, lambda data: data
        try:
            replies = [self.time_call(None, flush_bytes) for _ in range(calls)]
        finally:
            self.kernel = kernel
        device = sorted(r["device_us"] for r in replies)[calls // 2]
        gap = sorted(r["wall_us"] - r["device_us"] for r in replies)[calls // 2]
        return {"empty_device_us": device, "wall_gap_us": gap}

    # -- plumbing -----------------------------------------------------------------------------
    def _sendable(self, output: Any) -> Any:
        # A fresh copy: an output that aliases a received input cannot be re-shared by IPC.
        return copy.deepcopy(output)

    def serve(self) -> None:
        handlers = {
            "load": self.load,
            "call": self.call,
            "time": self.time_call,
            "calibrate": self.calibrate,
            "profile": self.profile_call,
        }
        while True:
            try:
                request = self.conn.recv()
            except EOFError:
                return
            op = request.pop("op")
            if op == "exit":
                self.conn.send({})
                return
            if op == "ping":
                self.conn.send({"pid": os.getpid(), "cuda": self.cuda})
                continue
            started = time.perf_counter()
            try:
                reply = handlers[op](**request)
            except SystemExit as exc:
                reply = {"error": f"the submission called exit({exc.code})", "kind": "error"}
            except BaseException as exc:  # participant code may raise anything
                reply = {
                    "error": trimmed_traceback(exc, self.stage_dir or Path.cwd()),
                    "kind": "error",
                    "exception": type(exc).__name__,
                }
            reply["elapsed_s"] = time.perf_counter() - started
            try:
                self.conn.send(reply)
            except Exception as exc:
                self.conn.send({"error": f"the output cannot be sent back: {exc}", "kind": "error"})


def main() -> None:
    conn = Connection(int(sys.argv[1]))
    Worker(conn).serve()


if __name__ == "__main__":
    main()
