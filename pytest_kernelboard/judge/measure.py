"""Measurement: time one case call by call, each call on a fresh input, each output verifiable.

The judge drives the loop (it owns the inputs, the stopping decision and the verification);
the worker only runs `time` requests: flush L2, events around one call, side streams joined,
device-wide synchronisation, host wall time around it all (worker/timing.py).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..spec.cases import Case
from ..stats.floors import bandwidth_floor_us, clock_drop_flag, io_bytes, plausibility_flags
from ..stats.preroll import LAUNCH_ALLOWANCE_US
from ..stats.stats import RunningMedian, summarize
from ..stats.stopping import NOISE_BOUND, StoppingRule, Warmup
from . import devices

# Verification: every timed call's output is checked (CaseTimer.measure). The ranking statistic
# is the median, which ignores the slowest and the fastest calls; that is only sound when each
# of them was right (a kernel that is fast and wrong on half its calls must not set the median).

# LAUNCH_ALLOWANCE_US (host time inside a call that is free) and the fallback pre-roll belong
# to the pre-roll policy (stats/preroll.py).
# A case whose calls spend much more wall time than device time has work the events missed
# (an unknown stream, host threads): it is then timed by the host-side bound instead.
UNACCOUNTED_MIN_US = 100.0

Progress = Callable[[str, int, float, float], None]  # (label, n, median_us, halfwidth)

# A call this short on inputs and outputs this small is timed with its host path warm: just before
# it, the worker runs it once, untimed, on an earlier input of the case (worker/timing.py, `warm`),
# as the field's loops of back-to-back calls do. Judged one round trip at a time, with the judge's work between
# calls, a launch-bound call's host time read four to five times a bare loop's on an H200 (265
# against 55 µs), and that cold part moved from process to process. The bounds keep the extra
# call's cost (device time, and a kept input, its copy and an output of device memory) small.
WARM_BELOW_US = 1000.0
WARM_MAX_BYTES = 256 << 20

# A cheat that works outside the timed interval (in the reply's pickling, say) does so in every
# call; a busy host makes the judge wake late in some. Over this share of calls, the case fails.
UNSEEN_MAJORITY = 0.5


class VerificationFailure(Exception):
    """A timed call returned a wrong output."""


@dataclass
class Measurement:
    clock: str  # "cuda_event" or "host"
    samples_us: list[float] = field(default_factory=list)
    wall_us: list[float] = field(default_factory=list)
    # Per call: wall time neither the device interval nor the harness's own overhead explains.
    unseen_us: list[float] = field(default_factory=list)
    warmup_calls: int = 0
    checked_calls: int = 0
    stop_reason: str = ""
    floor_us: float | None = None
    overhead_us: float | None = None
    preroll_us: float | None = None
    event_overhead_us: float | None = None  # an empty call's interval: the event pair's cost
    calibrated_by: str = ""  # whose empty calls those figures came from (judge/calibration.py)
    flags: list[str] = field(default_factory=list)
    rejections: list[str] = field(default_factory=list)
    clocks_before: dict[str, Any] | None = None
    clocks_after: dict[str, Any] | None = None
    elapsed_s: float = 0.0
    tail_gap_us: float = 0.0
    blocking_off: str = ""
    blocked_calls: int = 0
    host_bound_calls: int = 0
    host_copied_calls: int = 0  # timed calls whose tensors crossed as host copies
    warm_calls: int = 0  # calls (warm-up ones too) whose host path an untimed call warmed first
    cpus: set[int] = field(default_factory=set)  # the CPUs the worker ran the timed calls on
    # Where the case's wall time went (seconds): input generation, the worker's round trips
    # (transfer plus the worker's own flush, call and copies), verification, and the rest.
    # Where a request_time reports them (ROUND_TRIP_PARTS), parts of `worker` too.
    wall_s: dict[str, float] = field(
        default_factory=lambda: {"generate": 0.0, "worker": 0.0, "verify": 0.0}
    )
    details: dict[str, Any] = field(default_factory=dict)  # e.g. per-rank times (distributed.py)
    # The number the case ranks by where it is not the samples' median: a case timed in turns
    # ranks by the geometric mean of its turns' medians (evaluation/paired.py).
    rank_us: float | None = None
    # Whether the last call was warmed by an untimed call and the next would be too
    # (CaseTimer.warm_next): a later turn then needs no warm-up (TimingPlan.warm_start). A call
    # asked to be warm is not where the worker kept no input (a frugal case's). Not recorded.
    ends_warm: bool = False

    def to_record(self) -> dict[str, Any]:
        record = summarize(self.samples_us).to_dict(clock=self.clock)
        if self.rank_us is not None:
            record["rank_us"] = self.rank_us
        record.update(
            samples_us=[round(s, 4) for s in self.samples_us],
            wall_us=[round(w, 4) for w in self.wall_us],
            warmup_calls=self.warmup_calls,
            checked_calls=self.checked_calls,
            stop_reason=self.stop_reason,
            floor_us=self.floor_us,
            harness_overhead_us=self.overhead_us,
            preroll_us=self.preroll_us,
            flags=self.flags + self.rejections,
            clocks_before=self.clocks_before,
            clocks_after=self.clocks_after,
            elapsed_s=round(self.elapsed_s, 4),
            blocked_calls=self.blocked_calls,
            blocking_off=self.blocking_off or None,
            event_overhead_us=self.event_overhead_us,
            host_bound_calls=self.host_bound_calls,
            host_copied_calls=self.host_copied_calls,
            warm_calls=self.warm_calls,
            cpus=sorted(self.cpus),
            wall_s={k: round(v, 4) for k, v in self.wall_s.items()},
        )
        if self.calibrated_by:
            record["calibrated_by"] = self.calibrated_by
        record.update(self.details)
        return record

    @classmethod
    def pooled(cls, parts: list[Measurement], stop_reason: str) -> Measurement:
        """One case's timing from several timing loops of one worker (its turns,
        evaluation/paired.py): their samples together, counts and wall time summed, the first
        loop's clocks before and the last's after."""
        first, last = parts[0], parts[-1]
        pooled = cls(
            clock=first.clock,
            floor_us=first.floor_us,
            overhead_us=first.overhead_us,
            preroll_us=first.preroll_us,
            event_overhead_us=first.event_overhead_us,
            calibrated_by=first.calibrated_by,
            tail_gap_us=first.tail_gap_us,
            clocks_before=first.clocks_before,
            clocks_after=last.clocks_after,
            stop_reason=stop_reason,
            blocking_off=next((p.blocking_off for p in parts if p.blocking_off), ""),
        )
        for part in parts:
            pooled.samples_us += part.samples_us
            pooled.wall_us += part.wall_us
            pooled.unseen_us += part.unseen_us
            pooled.flags += [f for f in part.flags if f not in pooled.flags]
            pooled.rejections += [r for r in part.rejections if r not in pooled.rejections]
            pooled.cpus |= part.cpus
            for name in _SUMMED:
                setattr(pooled, name, getattr(pooled, name) + getattr(part, name))
            for key, seconds in part.wall_s.items():
                pooled.wall_s[key] = pooled.wall_s.get(key, 0.0) + seconds
            for key, value in part.details.items():
                summed = isinstance(value, int | float) and not isinstance(value, bool)
                if summed and isinstance(pooled.details.get(key), int | float):
                    pooled.details[key] += value
                else:
                    pooled.details.setdefault(key, value)
        return pooled


# What several timing loops of one case add up to (Measurement.pooled).
_SUMMED = (
    "warmup_calls",
    "checked_calls",
    "blocked_calls",
    "host_bound_calls",
    "host_copied_calls",
    "warm_calls",
    "elapsed_s",
)


@dataclass
class TimingPlan:
    rule: StoppingRule
    warmup: Warmup
    flush_bytes: int
    verify: bool = True  # every timed call's output checked (the reference's too)
    # NVML snapshots of the GPU before and after the calls (a clock drop flagged); a case timed
    # in turns takes them once around all its turns instead (evaluation/paired.py).
    snapshots: bool = True
    # The worker's GPU wake spin after an idle gap (worker/timing.py). A case timed in turns
    # runs without it: its calls are host-bound, so the GPU's clocks do not set their time,
    # and each turn's first call follows the other worker's calls, not an idle GPU.
    wake: bool = True
    # A later turn of a case timed in turns whose worker's last turn ended with its host path
    # warm (Measurement.ends_warm): no warm-up call, and its first call is warmed as every later
    # one is, by an untimed call on the input that worker kept from its last turn.
    warm_start: bool = False


# A request_time reply's key for where its round trip went, in seconds: `judge_io` (the judge
# packing the inputs into the window and reading the reply out) and `worker_handler` (the
# worker's handling of the request: flush, the call, its synchronisation). What the round trip
# holds beyond both is the worker reading the request and packing its reply, and the socket.
ROUND_TRIP_PARTS = "round_trip_s"
# A request_time reply's key: True when its tensors crossed as host copies, not windows.
HOST_COPIED = "host_copied"
# A request_time reply's key: True when an untimed call warmed the call's host path first.
WARMED = "warmed"
# A request_time reply's key: microseconds of the judge's view the host's busy CPUs explain
# (supervisor/host_waits.py), summed over a case's timed calls as `host_wait_ms` in its record.
HOST_WAIT = "host_wait_us"


def flag_clock_drop(m: Measurement) -> None:
    """Flag the measurement where the GPU slowed down between its two NVML snapshots."""
    drop = clock_drop_flag(m.clocks_before, m.clocks_after)
    if drop:
        m.flags.append(f"clocks dropped during the case: {drop}")


def default_flush_bytes() -> int:
    """Twice the L2 (at least 64 MiB), so nothing of the previous call survives in cache."""
    l2 = devices.environment().get("l2_bytes") or 0
    return max(2 * l2, 64 * 1024 * 1024)


class CaseTimer:
    """Runs the timed calls of one case through a worker; the judge supplies inputs and checks."""

    def __init__(
        self,
        generate: Callable[[Case, int], Any],
        request_time: Callable[[Any, int, float], dict[str, Any]],
        check: Callable[[Any, Any], tuple[bool, str]],
        use_cuda: bool,
        progress: Progress | None = None,
        parallel: int = 1,
        clock: Callable[[], float] = time.perf_counter,
    ):
        """parallel: the GPUs one call's inputs and outputs are spread over (its ranks); each
        moves its share, so the bandwidth floor is the per-GPU one. clock: seconds, for the
        warm-up and the stopping rule (a fake one in tests)."""
        self.generate = generate
        self.request_time = request_time
        self.check = check
        self.use_cuda = use_cuda
        self.progress = progress
        self.parallel = max(parallel, 1)
        self.clock = clock

    def _one_call(
        self,
        case: Case,
        call_index: int,
        plan: TimingPlan,
        deadline: float,
        m: Measurement,
        warm: bool = False,
    ) -> tuple[Any, dict[str, Any]]:
        """The call's pristine input and the worker's reply (output, device_us, wall_us, ...)."""
        started = self.clock()
        pristine = self.generate(case, call_index)
        generated = self.clock()
        remaining = max(deadline - generated, 0.001)
        # request_time gives the worker its own copy and returns an output the judge may keep.
        reply = self.request_time(pristine, plan.flush_bytes, remaining, warm=warm, wake=plan.wake)
        m.warm_calls += bool(reply.pop(WARMED, False))
        if reply.get("cpu", -1) >= 0:
            m.cpus.add(int(reply["cpu"]))
        m.wall_s["generate"] += generated - started
        m.wall_s["worker"] += self.clock() - generated
        for part, seconds in reply.pop(ROUND_TRIP_PARTS, {}).items():
            m.wall_s[part] = m.wall_s.get(part, 0.0) + max(float(seconds), 0.0)
        return pristine, reply

    def _verify(self, pristine: Any, output: Any, call_index: int, m: Measurement) -> None:
        started = self.clock()
        ok, message = self.check(pristine, output)
        m.wall_s["verify"] += self.clock() - started
        if not ok:
            raise VerificationFailure(f"timed call {call_index} returned a wrong output: {message}")

    def warm_next(self, sample_us: float, moved: tuple[int, int]) -> bool:
        """Whether the next call is timed with its host path warm (WARM_BELOW_US)."""
        return self.use_cuda and sample_us < WARM_BELOW_US and sum(moved) <= WARM_MAX_BYTES

    @staticmethod
    def sample_us(reply: dict[str, Any], event_overhead_us: float | None = None) -> float:
        """The call's time: its device interval, or its host time where the host was longer.

        A blocked call's interval holds device work only (worker/blocking.py), so host work
        inside the call is charged here instead: beyond LAUNCH_ALLOWANCE_US, the call's own
        host time is its time. The event pair's own cost (an empty call's interval, measured
        per worker by `calibrate`: about 1.3 us on an H100) is taken off a blocked interval,
        so a kernel reads what Nsight Compute says it takes. A call that synchronises inside
        (`synced`: started on an idle GPU, no pre-roll) is charged the same way: a pre-roll
        would have hidden the launches it made under the spin (a candidate that checked its
        output with `.item()` read half the reference's time on an H200). Other unblocked calls
        (pre-roll, host clock) already see host gaps and are left as they are.
        """
        device_us = reply["device_us"]
        if not (reply.get("blocked") or reply.get("synced")):
            return device_us
        kernel_us = max(device_us - (event_overhead_us or 0.0), 0.0)
        return max(kernel_us, reply.get("call_us", 0.0) - LAUNCH_ALLOWANCE_US)

    def measure(
        self,
        case: Case,
        plan: TimingPlan,
        timeout_s: float,
        label: str,
        overhead: dict[str, float] | None = None,
        prior_call_us: float | None = None,
        first_call: int = 1,
    ) -> Measurement:
        """Warm up, then time calls until the stopping rule is satisfied.

        prior_call_us: how long the case's correctness call took, which counts as the first
        warm-up duration (a call that compiled there disagrees with the next and is ignored).
        first_call: the index of the first call's input (a case timed in turns gives each turn
        inputs of its own, evaluation/paired.py).
        """
        started = self.clock()
        deadline = started + timeout_s
        m = Measurement(clock="cuda_event" if self.use_cuda else "host")
        if overhead:
            m.overhead_us = overhead["wall_gap_us"]
            m.preroll_us = overhead["preroll_us"]
            m.event_overhead_us = overhead["empty_device_us"]
            m.tail_gap_us = overhead.get("tail_gap_us", 0.0)
            m.calibrated_by = overhead.get("calibrated_by", "")
        m.clocks_before = devices.gpu_state() if self.use_cuda and plan.snapshots else None
        call_index = first_call  # call 0 is the correctness check's input

        # Warm-up: compilation, autotuning and first-touch stay out of the numbers. A later turn
        # whose worker is warm from its last one has none (TimingPlan.warm_start).
        warm_durations: list[float] = [prior_call_us] if prior_call_us else []
        moved = (0, 0)  # the bytes one call reads and writes, from the last warm-up call
        warm = plan.warm_start  # then decided after each call, from its time and its bytes
        while not plan.warm_start and not plan.warmup.done(warm_durations, self.clock() - started):
            pristine, reply = self._one_call(case, call_index, plan, deadline, m, warm)
            if plan.verify:
                self._verify(pristine, reply["output"], call_index, m)
            warm_durations.append(self.sample_us(reply, m.event_overhead_us))
            moved = io_bytes(pristine, reply["output"], reply.get("aliased_bytes"))
            warm = self.warm_next(warm_durations[-1], moved)
            # Let go of this call's tensors before the next input is made: never two at once.
            pristine = reply = None
            call_index += 1
        m.warmup_calls = len(warm_durations) - bool(prior_call_us)
        # The floor counts the bytes the call must move (inputs read, outputs written once).
        peak = devices.peak_bandwidth_bytes_per_s() if self.use_cuda else None
        if peak and m.warmup_calls:  # a turn without warm-up: its first turn's floor stands
            in_bytes, out_bytes = moved
            l2 = devices.environment().get("l2_bytes") or 0
            m.floor_us = bandwidth_floor_us(
                in_bytes // self.parallel, out_bytes // self.parallel, peak, l2_bytes=l2
            )

        stats = RunningMedian()
        unaccounted: list[str] = []  # the judge's clock saw work outside these calls' intervals
        host_wait_us = 0.0  # of the judge's view, what waiting for a busy host's CPUs explains
        timing_started = self.clock()
        last_progress = timing_started
        while True:
            warmed_before = m.warm_calls
            pristine, reply = self._one_call(case, call_index, plan, deadline, m, warm)
            last_warmed = m.warm_calls > warmed_before  # an untimed call really warmed it
            sample = self.sample_us(reply, m.event_overhead_us)
            warm = self.warm_next(sample, moved)
            if not math.isfinite(sample):  # the worker's replies are checked; a wrapper's too
                raise ValueError(f"timed call {call_index} measured {sample!r} us")
            m.samples_us.append(sample)
            m.wall_us.append(reply["wall_us"])
            m.unseen_us.append(self._unseen_us(reply, m))
            m.blocked_calls += bool(reply.get("blocked"))
            if reply.get("blocking_off") and not m.blocking_off:
                m.blocking_off = reply["blocking_off"]
            m.host_bound_calls += sample > reply["device_us"]
            m.host_copied_calls += bool(reply.get(HOST_COPIED))
            if reply.get("outside_unseen"):
                unaccounted.append(reply["outside_unseen"])
            host_wait_us += reply.get(HOST_WAIT, 0.0)
            stats.add(sample)
            if plan.verify:
                self._verify(pristine, reply["output"], call_index, m)
                m.checked_calls += 1
            pristine = reply = None
            timed_s = self.clock() - timing_started
            reason = plan.rule.reason(stats, timed_s)
            call_index += 1
            now = self.clock()
            if self.progress and now - last_progress > 0.5:
                self.progress(label, stats.n, stats.median, stats.relative_halfwidth())
                last_progress = now
            if reason is not None:
                m.stop_reason = reason
                if reason == NOISE_BOUND:  # what the precision would have cost, for the record
                    projected = plan.rule.projected_s(stats, timed_s)
                    m.details["precision_projected_s"] = round(projected, 3)
                break
        m.elapsed_s = self.clock() - started
        m.ends_warm = warm and last_warmed
        if host_wait_us:
            m.details["host_wait_ms"] = round(host_wait_us / 1e3, 3)
        if len(unaccounted) > UNSEEN_MAJORITY * len(m.samples_us):
            raise VerificationFailure(
                "the reported time disagrees with the judge's clock in "
                f"{len(unaccounted)} of {len(m.samples_us)} calls: {unaccounted[0]}"
            )
        m.clocks_after = devices.gpu_state() if self.use_cuda and plan.snapshots else None
        self._judge_plausibility(m)
        return m

    @staticmethod
    def _unseen_us(reply: dict[str, Any], m: Measurement) -> float:
        """Wall time of one call that its device interval does not account for.

        From the call's return to the end of the device-wide synchronisation the host waits
        for what is left of the call's device work plus the harness's own tail (calibrated on
        empty calls). A blocked call's device work all runs in that wait; an unblocked call's
        partly ran before it. Either way, a wait longer than the device interval plus that tail
        is work the events missed (an unknown stream, host threads).
        """
        tail = reply["wall_us"] - reply.get("dispatch_us", 0.0)
        return tail - reply["device_us"] - m.tail_gap_us

    def _judge_plausibility(self, m: Measurement) -> None:
        if m.clock != "cuda_event":
            return
        m.rejections = plausibility_flags(m.samples_us, m.wall_us, m.floor_us)
        flag_clock_drop(m)
        unseen = statistics.median(m.unseen_us) if m.unseen_us else 0.0
        if unseen > max(UNACCOUNTED_MIN_US, statistics.median(m.samples_us)):
            # Host-side bound: the device interval plus the wall time it does not explain.
            m.flags.append(
                f"calls spend {unseen:.1f} us more wall time than their device time explains: "
                "work outside the timed stream; timed by the host-side bound instead"
            )
            m.samples_us = [s + max(u, 0.0) for s, u in zip(m.samples_us, m.unseen_us, strict=True)]
