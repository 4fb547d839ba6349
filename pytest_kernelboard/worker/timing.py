"""Timed calls in the worker: how one call is timed, as the judge asks for it.

The L2 flush, the stream held by the blocking kernel (worker/blocking.py) until the whole
call is queued, CUDA events around it and every stream it touched joined (StreamTracker); the
wake spin after an idle gap, the case's CPU (the judge's timing core, judge/timing_core.py, else
the fastest this worker may use, worker/cpu_choice.py), the kept input of
a case's warm calls, and the harness's own overhead (calibrate). docs/timing.md.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from pytest_kernelboard.channel import fences
from pytest_kernelboard.channel.cage import PIN_VARIABLE, TIMING_CPU_VARIABLE
from pytest_kernelboard.channel.cloning import clone_data
from pytest_kernelboard.stats.floors import aliased_bytes
from pytest_kernelboard.stats.preroll import proposed_preroll_us
from pytest_kernelboard.worker import cpu_choice

# The harness's clocks, taken before any submission is imported: patching time.perf_counter
# or torch.cuda.Event afterwards does not change what the harness measures. The torch functions
# the timed path calls are captured the same way, when the worker starts (Timer.__init__).
_clock = time.perf_counter


# The GPU spin before a timed call (time_call) that follows an idle gap: long enough to bring
# an idled GPU back to speed; back-to-back calls (calibrate's) need none, nor calls 2 ms apart,
# which ran as fast as back to back (_wake_if_idle). A host-bound case's calls come 0.6 - 0.9 ms
# apart on the judge's side (an H100, benchmarks/probes/timed_calls.py): with the worker's own
# steps, 1 ms spun 2 ms before 42% of them, a fifth of the case's time, for nothing.
WAKE_US = 2000.0
WAKE_AFTER_IDLE_S = 0.002


class StreamTracker:
    """Finds the CUDA streams a timed call uses, so the timing can fence them and wait for them.

    Work a kernel puts on a side stream would otherwise start early, during the flush and the
    pre-roll, and could end after the end event. During a call, every stream the submission
    creates (every torch.cuda.Stream object passes through __new__) or makes current
    (torch.cuda.set_stream, which `with torch.cuda.stream(s)` uses) first waits for the start
    event; at the end the timed stream waits for each of them. Only the streams a call touches
    are fenced and joined, so the cost stays as small as the streams the call uses are few.
    Streams made outside torch (CuPy, raw CUDA) are not seen: the device-wide synchronisation
    and the host-side bound cover them.
    """

    def __init__(self, torch_module: Any):
        self.torch = torch_module
        self._start: Any = None  # the start event, while a timed call runs
        self._timed: Any = None  # the stream the events are recorded on
        self._touched: dict[tuple[int, int], Any] = {}
        cuda = torch_module.cuda
        self._record = cuda.Event.record  # the harness's own, captured before any import
        self._current_stream = cuda.current_stream
        original_new, original_set_stream = cuda.Stream.__new__, cuda.set_stream
        self._set_stream = original_set_stream
        tracker = self

        def tracking_new(cls, *args, **kwargs):
            stream = original_new(cls, *args, **kwargs)
            tracker._touch(stream)
            return stream

        def tracking_set_stream(stream):
            if stream is not None:
                tracker._touch(stream)
            return original_set_stream(stream)

        cuda.Stream.__new__ = tracking_new
        cuda.set_stream = tracking_set_stream

    def _touch(self, stream: Any) -> None:
        if self._start is None:
            return
        key = (stream.device_index, stream.stream_id)
        if key in self._touched or key == (self._timed.device_index, self._timed.stream_id):
            return
        self._touched[key] = stream
        stream.wait_event(self._start)

    def begin(self, start_event: Any) -> None:
        """Record the start event on the current stream and fence the streams used from now."""
        self._touched = {}
        self._timed = self._current_stream()
        self._record(start_event, self._timed)
        self._start = start_event

    def end(self, end_event: Any) -> None:
        """Join the touched streams into the timed stream and record the end event there."""
        self._start = None
        for stream in self._touched.values():
            self._timed.wait_stream(stream)
        self._record(end_event, self._timed)
        self._set_stream(self._timed)  # a call that switched streams is undone
        self._touched = {}


class Timer:
    """One worker's timed calls: what they keep between calls (the flush buffer, the events, the
    blocking kernel, the spin rate, the case and its CPU, a warm call's kept input)."""

    def __init__(self, torch: Any, cuda: bool) -> None:
        """Made when the worker starts, before any submission is imported: what the timed path
        calls of torch is captured now, so that a submission patching it changes nothing."""
        self.torch = torch
        self.cuda = cuda
        self.streams = StreamTracker(torch) if cuda else None
        self.blocker: Any = None  # worker/blocking.py, made on the first timed call
        self.blocking = cuda  # False once a call synchronised inside the blocked window
        self.blocking_off = ""  # why blocking was turned off, reported with every timed call
        # The calls synchronise inside: each starts on an idle GPU, and its host time is its time.
        self.synced = False
        self._held_too_long = 0  # consecutive calls that outlasted the blocking kernel
        self.flush_buffer = None
        self.flush_sink = None
        self.events = None
        self._spin_rate: float | None = None
        self._last_synchronized = float("-inf")  # when the last timed call's work ended
        self._case = ""  # the case the last timed call belonged to (the judge names it)
        self._warm_input: Any = None  # a pristine copy of an earlier input of that case
        # The CPUs a GPU case's timed calls may be moved to (a CPU case's time is the judge's
        # own clock around the whole request, and its torch threads need every CPU).
        pin = cuda and os.environ.get(PIN_VARIABLE) != "0"
        self._cpus = cpu_choice.allowed_cpus() if pin else frozenset()
        # The CPU the judge keeps for timed calls (judge/timing_core.py), outside `_cpus`; None:
        # each case chooses among `_cpus`.
        kept = os.environ.get(TIMING_CPU_VARIABLE, "")
        self._kept_cpu = int(kept) if pin and kept.isdigit() else None
        self._timing_cpu: int | None = None  # where this case's timed calls run (None: anywhere)
        self.before_timed_call = None  # a rank's barrier (worker/ranks.py), else nothing
        self.device_barrier = None  # a rank's barrier on the held stream (worker/ranks.py)
        if cuda:
            self._elapsed_time = torch.cuda.Event.elapsed_time
            self._event = torch.cuda.Event
            self._record_event = torch.cuda.Event.record
            # Event.record without a stream asks torch.cuda.current_stream, which a submission
            # may patch (to answer an idle stream of its own): the harness asks this one.
            self._current_stream = torch.cuda.current_stream
            # What a submission could patch at import to skip the L2 flush (its waits go
            # through fences.py, captured the same way), and the spin that wakes the GPU.
            self._sum = torch.sum
            self._sleep = torch.cuda._sleep

    def prepare(self) -> None:
        """Compile the blocking kernel now, before the submission is imported, then load it and
        run it once (worker/blocking.py, StreamBlocker): the first timed call (the
        calibration's) would otherwise wait for Triton's compile, about half a second on an
        H100, and then for its first launch, in a batch's exclusive turn. The one run is a
        spin released at once; a batch's spare workers, which call this as they start, are
        stopped while a case is timed (supervisor/pool.py, WorkerPool.quiet)."""
        if not self.blocking:
            return
        try:
            from pytest_kernelboard.worker.blocking import compile_ahead

            compile_ahead(self.torch)
        except Exception as exc:  # the first timed call tries again, and says what failed
            print(f"kernelboard: the blocking kernel was not compiled ahead ({exc})")
            return
        self._blocker()
        self._load_flush_kernel()

    def _load_flush_kernel(self) -> None:
        """The flush's reduction kernel loaded now, by a sum over 1 MiB into a scalar as the
        flush makes: its first launch loads it lazily, 16 ms of a fresh worker's first
        calibration on an H200 (benchmarks/probes/first_timed_calls.py)."""
        torch = self.torch
        small = torch.zeros(1 << 17, dtype=torch.int64, device="cuda")
        self._sum(small, dim=0, out=torch.zeros((), dtype=torch.int64, device="cuda"))
        fences.synchronize()

    def drop_case(self) -> None:
        """The case is over: an idle worker (the submission's, while the reference is timed)
        holds nothing of it; the next timed call makes its flush buffer again."""
        self._warm_input = None
        self.flush_buffer = None

    def time_call(
        self,
        kernel: Callable[[Any], Any],
        data: Any,
        flush_bytes: int,
        preroll_us: float = 0.0,
        case: str = "",
        keep: bool = False,
        copy_input: bool = True,
        cpu: int = -1,
        wake: bool = True,
    ) -> dict:
        """One timed call: flush L2, hold the stream, events around the call, streams joined.

        The stream is held by a blocking kernel (worker/blocking.py) until the whole call is
        queued, so the events see the call's device work and none of the host's launch
        latency or jitter. Where blocking is off (no Triton, or the call synchronised inside
        itself), a GPU pre-roll of preroll_us stands in for it as before. `call_us` is the
        host time inside the call itself: the judge charges it where it exceeds the device
        time by more than the launch allowance. `dispatch_us` is the host time from the
        flush's enqueue to the call's return: what a pre-roll has to cover.

        GPU only: the first request of each `case` (the judge names it) moves the calling
        thread to the CPU the judge keeps for timed calls, else to `cpu` where the judge names
        one this worker may use, else to the fastest it may use (worker/cpu_choice.py). With
        `keep`, a pristine copy of the input
        is kept, once per case, for the `warm` requests that come before the next timed calls.
        `copy_input`: the call runs on a copy of its own (not where the inputs came through the
        inbound window, which is that copy). The reply's `output` is the call's own. `wake`:
        spin the GPU awake first where it idled (_wake_if_idle); the judge turns it off where
        the case's calls are host-bound.
        """
        if not self.cuda:
            if self.before_timed_call is not None:
                self.before_timed_call()
            gc.disable()
            try:
                start = _clock()
                output = kernel(data)
                elapsed_us = (_clock() - start) * 1e6
            finally:
                gc.enable()
            return {
                "output": output,
                "device_us": elapsed_us,
                "wall_us": elapsed_us,
                "dispatch_us": elapsed_us,
                "call_us": elapsed_us,
                "aliased_bytes": aliased_bytes(data, output),
            }
        entered = _clock()  # what comes before the call is the worker's report `pre_us`
        torch = self.torch
        if self.flush_buffer is None or self.flush_buffer.numel() != flush_bytes // 8:
            self.flush_buffer = torch.zeros(flush_bytes // 8, dtype=torch.int64, device="cuda")
            self.flush_sink = torch.zeros((), dtype=torch.int64, device="cuda")
            self.events = (
                self._event(enable_timing=True),
                self._event(enable_timing=True),
            )
        blocker = self._blocker()
        synced = self.synced  # how this call is timed (set by earlier ones; never blocked)
        start_event, end_event = self.events
        preroll_cycles = int(preroll_us * self.spin_cycles_per_us()) if preroll_us > 0 else 0
        # Time the call on the worker's own copy: memory mapped from the judge through CUDA
        # IPC is not what a kernel normally reads, and the copy leaves the judge's buffers alone.
        # Inputs that came through the inbound window are that copy already (plain device
        # memory the worker alone writes), and a second one would double the inputs' memory.
        if copy_input:
            data = clone_data(data)
        self._enter_case(case, cpu)
        if not keep:
            self._warm_input = None
        elif self._warm_input is None:
            self._warm_input = clone_data(data)  # before the call: pristine
        # The wait for the wake ends before the flush: none of it is inside the call's interval
        # or its host time.
        if wake:
            self._wake_if_idle()
        fences.synchronize()
        if self.before_timed_call is not None:
            self.before_timed_call()  # all ranks start the flush and the events together
        gc.disable()  # a collection inside the call would be charged to it
        try:
            host_start = _clock()
            # The flush reads 2x L2 of other data: the inputs just written leave the cache, and
            # the lines left behind are clean (a writing flush would leave the call's kernels
            # to pay for writing back its dirty lines).
            self._sum(self.flush_buffer, dim=0, out=self.flush_sink)
            if blocker is not None:
                blocker.block()
            elif synced:
                # A call that waits for its own work waits for a pre-roll as well: its host
                # time would include it, and its launches under the spin would go uncharged.
                fences.synchronize()
            elif preroll_cycles:
                self._sleep(preroll_cycles)
            if self.device_barrier is not None:
                self.device_barrier()  # a rank's start waits, on the device, for every rank's
            self.streams.begin(start_event)
            call_start = _clock()
            try:
                output = kernel(data)
            finally:
                call_end = _clock()
                self.streams.end(end_event)
                if blocker is not None:
                    blocker.release()
            fences.synchronize()  # device-wide: also waits for streams we do not know
            self._last_synchronized = _clock()
            wall_us = (self._last_synchronized - host_start) * 1e6
        finally:
            gc.enable()
        device_us = self._elapsed_time(start_event, end_event) * 1e3
        released = blocker is not None and not blocker.timed_out()
        self._held_too_long = self._held_too_long + 1 if blocker is not None and not released else 0
        # One slow call is expected (a kernel's module loads lazily on its first launch, which
        # waits for the device); two in a row mean the call synchronises inside itself.
        if self._held_too_long >= 2:
            self.blocking = False  # the call waited on the held stream: stop holding it
            self.blocking_off = "calls waited for the held stream (they synchronise inside)"
            self.synced = True
        return {
            "output": output,
            "device_us": device_us,
            "wall_us": wall_us,
            "dispatch_us": (call_end - host_start) * 1e6,
            "call_us": (call_end - call_start) * 1e6,
            "pre_us": (host_start - entered) * 1e6,
            "blocked": released,
            "synced": synced,
            "blocking_off": self.blocking_off,
            "aliased_bytes": aliased_bytes(data, output),
            "cpu": -1 if self._timing_cpu is None else self._timing_cpu,
        }

    def since_synchronized_us(self) -> float | None:
        """Microseconds since the last timed call's work ended (None on the CPU, where the
        judge's own clock ranks): the worker's report `post_us` of what followed the call."""
        return (_clock() - self._last_synchronized) * 1e6 if self.cuda else None

    def _enter_case(self, case: str, cpu: int = -1) -> None:
        """A new case: nothing kept from the last one, and its timed calls on the CPU the judge
        keeps for them, else on `cpu` where the judge names one this worker may use (a case
        timed in turns runs both sides on the CPU the reference's worker chose: a host-bound
        call's time depends on its CPU), else on the fastest this worker may use."""
        named = cpu if cpu in self._cpus else None
        if case == self._case and (named is None or named == self._timing_cpu):
            return
        if case != self._case:
            self._case = case
            self._warm_input = None
        # A rank's calls run beside its case's other ranks, which would share the one kept CPU.
        if self._kept_cpu is not None and self.before_timed_call is None:
            if self._pin(self._kept_cpu):
                return
            self._kept_cpu = None  # outside this process's cgroup: choose as where none is kept
        if named is not None and self._pin(named):
            return
        if self._cpus:
            self._timing_cpu, _ = cpu_choice.choose_and_pin(self._cpus)

    def _pin(self, cpu: int) -> bool:
        """The calling thread onto `cpu` for the case's timed calls; False where the process may
        not use it (a cgroup's cpuset that shrank since)."""
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            return False
        self._timing_cpu = cpu
        return True

    def leave_timing_cpu(self) -> None:
        """Back on every CPU the worker may use; the next timed call starts a case again."""
        if self._timing_cpu is not None and self._cpus:
            os.sched_setaffinity(0, self._cpus)
            self._timing_cpu = None
        self._case = ""
        self._warm_input = None

    def warm(
        self, kernel: Callable[[Any], Any], case: str, cpu: int = -1, wake: bool = True
    ) -> dict:
        """One untimed call on a fresh copy of the case's kept input, so that the timed call the
        judge sends next finds its host path as warm as in a loop of calls.

        It runs before the judge has written the next input into the worker's reach: code in
        this call cannot find that input and work on it outside the timed interval. The kept
        input was copied before its own call ran; its values are not the next input's, so a
        result cached by address, shape or content here cannot answer the timed call. Without a
        kept input (the case's first warm request) it does nothing.
        """
        self._enter_case(case, cpu)
        if self._warm_input is None or not self.cuda:
            return {"warmed": False}
        kept = clone_data(self._warm_input)
        if wake:
            self._wake_if_idle()  # the call's host path runs while the GPU spins
        kernel(kept)
        del kept
        fences.synchronize()
        self._last_synchronized = _clock()
        return {"warmed": True}

    def _wake_if_idle(self) -> None:
        """Queue a WAKE_US GPU spin where no timed or warm call has run for WAKE_AFTER_IDLE_S.

        After 20 or 200 ms idle (the judge making and sending an input) a memory-bound kernel
        ran 8% slower on an H200 (a 16384² add: 391-396 against 363 µs back to back, at the same
        SM clock; 2 ms idle cost nothing, and KernelBench L2 12's GEMM read 0.2 - 0.6% slower
        after 0.5 - 3 ms, benchmarks/probes/wake_probe.py), and 2 ms of spinning brought it back."""
        if _clock() - self._last_synchronized > WAKE_AFTER_IDLE_S:
            self._sleep(int(WAKE_US * self.spin_cycles_per_us()))

    def _blocker(self) -> Any:
        """The stream blocker, made once; None where blocking is off or cannot work here."""
        if not self.blocking:
            return None
        if self.blocker is None:
            try:
                from pytest_kernelboard.worker.blocking import StreamBlocker

                self.blocker = StreamBlocker(self.torch)
            except Exception as exc:  # no Triton, or no mapped memory: fall back to the pre-roll
                print(f"kernelboard: timing without a blocking kernel ({exc})", file=sys.stderr)
                self.blocking = False
                self.blocking_off = f"no blocking kernel: {type(exc).__name__}: {exc}"[:300]
                return None
        return self.blocker

    def event(self) -> Any:
        """A timing event, of the class bound before the submission was imported."""
        return self._event(enable_timing=True)

    def record(self, event: Any) -> None:
        """Record `event` on the stream the harness's work runs on: the current stream as torch
        answered before the submission was imported (torch's kernels run there whatever a
        patched torch.cuda.current_stream answers)."""
        self._record_event(event, self._current_stream())

    def elapsed_us(self, start: Any, end: Any) -> float:
        """Microseconds between two recorded events, through the method bound before import."""
        return self._elapsed_time(start, end) * 1e3

    def spin_cycles_per_us(self) -> float:
        """GPU clock cycles per microsecond of torch.cuda._sleep, measured once per worker.

        Through the event methods and the stream bound before the submission was imported:
        measured with a patched `elapsed_time` that reported 1000x less, each wake spin lasted
        2 s (a hostile test caught it as time outside the timed interval); with events recorded
        on the idle stream a patched `current_stream` answered, 70 - 110 ms (an H100)."""
        if self._spin_rate is None:
            start, end = self.event(), self.event()
            cycles = 1_000_000
            rates = []
            for _ in range(5):  # the first spins also bring the clocks up from idle
                self.record(start)
                self._sleep(cycles)
                self.record(end)
                fences.synchronize()
                rates.append(cycles / self.elapsed_us(start, end))
            self._spin_rate = max(rates[1:])  # the fastest clock: a spin never runs short
        return self._spin_rate

    def calibrate(self, flush_bytes: int, launch_allowance_us: float, calls: int = 30) -> dict:
        """The harness's own cost, from empty calls timed exactly like real ones.

        First without a pre-roll, to see how long the harness's own host path takes; the
        pre-roll is that (90th percentile) plus `launch_allowance_us` for the submission's own
        launches. Then with that pre-roll: the empty call's device time is the floor.
        """
        bare = [self.time_call(_empty, None, flush_bytes) for _ in range(calls)]
        dispatch = sorted(r["dispatch_us"] for r in bare)[int(0.9 * (calls - 1))]
        preroll_us = proposed_preroll_us(dispatch, launch_allowance_us)
        replies = [self.time_call(_empty, None, flush_bytes, preroll_us) for _ in range(calls)]
        device = sorted(r["device_us"] for r in replies)[calls // 2]
        gap = sorted(r["wall_us"] - r["device_us"] for r in replies)[calls // 2]
        # Blocked calls: the host's wait from the call's return to the end of the sync, less
        # the device interval (see measure.CaseTimer._unseen_us).
        tail = sorted(r["wall_us"] - r["dispatch_us"] - r["device_us"] for r in replies)
        return {
            "empty_device_us": device,
            "wall_gap_us": gap,
            "tail_gap_us": tail[calls // 2],
            "harness_dispatch_us": dispatch,
            "preroll_us": preroll_us,
            "spin_cycles_per_us": self.spin_cycles_per_us(),
        }


def _empty(data: Any) -> Any:
    """The call calibrate times: the harness's own cost, and nothing else."""
    return data
