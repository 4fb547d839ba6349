"""Where a candidate's wall time goes in a batch: seconds per phase, kept in its record.

The phases, in the order a candidate meets them:

    worker_start     taking a sandboxed worker from the pool until it answers (a spare started
                     ahead costs nothing here; one still starting costs the rest of its start)
    import           the submission's import in that worker, its builds included
    correctness_ahead, benchmark_check_ahead
                     its correctness cases, and its timed cases' correctness calls, made ahead
                     beside the other candidates' (batch/turns.py), once its judge knows their
                     inputs are small; of each, the parts `benchmark_check` has, and
                     _release (the worker's windows and the judge's cached memory let go)
    inputs_ahead     the inputs of its timed cases' calls made ahead, as many as the case's
                     last timing used where that was ten or more and its input is small
                     (judge/inputs_ahead.py)
    prepare_wait     the judge waiting for the candidate's worker start, import and the calls
                     made ahead to finish: the part that the judging of earlier candidates did
                     not hide
    correctness      its correctness cases not made ahead (input generation, the worker's call,
                     the check)
    closing          before its timed case, waiting until the workers of the candidates judged
                     before it are gone (killed beside its correctness cases); from then no
                     new correctness call starts
    turn             then waiting for the other candidates' correctness calls in flight to
                     return (the rest of them, where they outlast the closing)
    pausing          stopping the other candidates' workers before its timed case
    calibrate        the timing calibration in its worker (empty calls timed as real ones)
    benchmark_check  the timed case's own correctness call (at full size: a KernelBench model
                     is built here, in the worker and, once per batch, in the judge) and
                     everything else of the case that is not its timing loop; of it,
                     benchmark_check_generate (the input), benchmark_check_call (the worker's
                     call as the judge saw it: the copy sent, the reply), of which
                     benchmark_check_worker (the request's round trip, the reply's crossing
                     included), benchmark_check_verify (the output checked) and
                     benchmark_check_release (the memory let go after it)
    reference        waiting for the reference's timing (the batch's first timed candidate),
                     of which reference_worker_start, reference_import, reference_calibrate,
                     reference_timing and reference_other: its workers' start, import, timing
                     calibration, timing loop and the rest (the first call's set-up, closing)
    timing           the timing loop: its calls, of which timing_generate (fresh inputs),
                     timing_worker (the requests' round trips) and timing_verify (each output
                     checked); a case timed in turns with the reference's worker
                     (evaluation/paired.py) counts the reference's turns too, as
                     timing_reference_turns
    census           the kernel census (which kernels one call launches)
    record           building the record
    paused           its worker stopped while other candidates were timed (beside the above)

`worker_start`, `import`, the `*_ahead` phases and `paused` run beside the judging of other
candidates; the others, but the parts of `benchmark_check`, `timing` and `reference`, lie on
the batch's critical path, one candidate after another. `wall` is the candidate's time from
arrival to its record.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from ..evaluation import session
from ..judge import core

# The phases that run one candidate after another on a GPU's judge (the others overlap them).
SERIAL = (
    "prepare_wait",
    "correctness",
    "closing",
    "turn",
    "pausing",
    "calibrate",
    "benchmark_check",
    "reference",
    "timing",
    "census",
    "record",
)
AHEAD = ("correctness_ahead", "benchmark_check_ahead")
OVERLAPPED = ("worker_start", "import", *AHEAD, "inputs_ahead", "paused")
TIMING_PARTS = ("timing_generate", "timing_worker", "timing_verify", "timing_reference_turns")
CHECK_PARTS = tuple(f"benchmark_check_{part}" for part in core.CHECK_PARTS)
AHEAD_PARTS = tuple(f"{phase}_{part}" for phase in AHEAD for part in core.CHECK_PARTS)
REFERENCE_PARTS = tuple(f"reference_{part}" for part in session.REFERENCE_PARTS)
ORDER = (
    "worker_start",
    "import",
    *AHEAD,
    *AHEAD_PARTS,
    "inputs_ahead",
    *SERIAL,
    *CHECK_PARTS,
    *TIMING_PARTS,
    *REFERENCE_PARTS,
    "paused",
    "wall",
)

_current = threading.local()  # the clock of the candidate this thread works for


class PhaseClock:
    """One candidate's seconds per phase."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self._lock = threading.Lock()  # `paused` is added from the judging thread

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.seconds[phase] += max(seconds, 0.0)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def timed_case(
        self,
        timing: Mapping[str, Any] | None,
        total_s: float,
        reference_s: float,
        calibrate_s: float = 0.0,
    ) -> None:
        """A benchmark case's `total_s`: its timing loop (the timing record's elapsed_s, with
        its wall_s parts), `reference_s` spent waiting for the reference, `calibrate_s` in the
        timing calibration, the rest its check."""
        loop = float((timing or {}).get("elapsed_s") or 0.0)
        reference_turns = float(((timing or {}).get("turns") or {}).get("reference_s") or 0.0)
        self.add("timing_reference_turns", reference_turns)
        loop += reference_turns
        self.add("timing", loop)
        for part, seconds in ((timing or {}).get("wall_s") or {}).items():
            if f"timing_{part}" in TIMING_PARTS:
                self.add(f"timing_{part}", float(seconds))
        self.add("calibrate", calibrate_s)
        self.add("benchmark_check", total_s - loop - reference_s - calibrate_s)

    def to_json(self) -> dict[str, float]:
        """The phases that took time, in ORDER, and the candidate's wall time."""
        with self._lock:
            seconds = dict(self.seconds)
        seconds["wall"] = time.perf_counter() - self.started
        return {p: round(seconds[p], 4) for p in ORDER if seconds.get(p)}


@contextmanager
def working_for(clock: PhaseClock | None) -> Iterator[None]:
    """This thread's work is the candidate's of `clock` for the duration."""
    saved = getattr(_current, "clock", None)
    _current.clock = clock
    try:
        yield
    finally:
        _current.clock = saved


def current() -> PhaseClock | None:
    return getattr(_current, "clock", None)


def batch_account(phases: list[Mapping[str, float]]) -> dict[str, Any]:
    """Per phase, the mean seconds per candidate over a batch's records' `phases`; and the
    serial phases' sum, the candidate's share of the critical path."""
    count = len(phases)
    if not count:
        return {"candidates": 0, "mean_s": {}, "serial_s": 0.0}
    mean = {p: sum(float(ph.get(p, 0.0)) for ph in phases) / count for p in ORDER}
    return {
        "candidates": count,
        "mean_s": {p: round(s, 4) for p, s in mean.items() if s},
        "serial_s": round(sum(mean[p] for p in SERIAL), 4),
    }


def account_lines(account: Mapping[str, Any], wall_s: float | None = None) -> list[str]:
    """The batch account as lines a person reads: mean seconds per candidate, by phase."""
    mean = account["mean_s"]
    if not mean:
        return ["no phases recorded"]
    serial = account["serial_s"]
    lines = [f"per candidate, mean of {account['candidates']} (seconds):"]
    for phase in ORDER:
        if phase not in mean:
            continue
        where = (
            "serial"
            if phase in SERIAL
            else "overlapped"
            if phase in OVERLAPPED
            else "part of timing"
            if phase in TIMING_PARTS
            else "part of check"
            if phase in CHECK_PARTS
            else "part of reference"
            if phase in REFERENCE_PARTS
            else "part of ahead"
            if phase in AHEAD_PARTS
            else ""
        )
        share = (
            f"{100 * mean[phase] / serial:5.1f}% of serial" if phase in SERIAL and serial else ""
        )
        lines.append(f"  {phase:<24}{mean[phase]:9.3f}  {where:<18}{share}")
    lines.append(f"  {'serial sum':<24}{serial:9.3f}")
    if wall_s is not None and account["candidates"]:
        lines.append(f"  {'batch wall / n':<24}{wall_s / account['candidates']:9.3f}")
    return lines
