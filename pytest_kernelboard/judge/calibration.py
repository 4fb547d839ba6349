"""The harness's own cost on the judge's GPU, measured in the reference's workers and used by
every candidate's worker of the same session.

A worker times empty calls exactly like real ones before its first timed case (worker/timing.py,
`Timer.calibrate`): the event pair's own interval, taken off every blocked sample, the
wall-minus-device gaps the host-side bound allows for, and the fallback pre-roll. Those are the
cost of the harness's code on this GPU and timing CPU, the same in every worker; measured in
each candidate's fresh worker, 60 empty calls took 40 ms of the exclusive turn a candidate
(KernelBench L2 12 on an H200), and they ran after the candidate's import, where threads of the
candidate's could lengthen them. So a session keeps what the reference's own workers measured
(code the judge trusts), and a candidate's worker makes only WARM_UP_CALLS of each kind: enough
to allocate its flush buffer, load the blocking kernel and measure its GPU's spin rate, which
stays its own. Where no reference worker has calibrated yet (the first candidate of a batch, a
run that reuses a filed reference timing), a worker calibrates in full, and its
record says so (`calibrated_by`).
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Mapping
from typing import Any

# The figures a calibration shares; the rest (the spin rate) are the worker's own.
SHARED_FIGURES = (
    "empty_device_us",
    "wall_gap_us",
    "tail_gap_us",
    "harness_dispatch_us",
    "preroll_us",
)
FULL_CALLS = 30  # of each kind (bare, then behind the pre-roll): Timer.calibrate's default
WARM_UP_CALLS = 2  # of each kind, where the figures come from the reference's workers
OWN_WORKER = "own_worker"
REFERENCE_WORKERS = "reference_workers"


class SharedCalibration:
    """The reference's workers' calibrations in one session, by flush size (a case's flush
    reads twice the GPU's L2: one size a GPU). Several judging threads read and add."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._measured: dict[int, list[Mapping[str, Any]]] = {}

    def add(self, flush_bytes: int, calibration: Mapping[str, Any]) -> None:
        """A reference worker's own calibration (its pre-roll already bounded by the judge)."""
        figures = {name: float(calibration[name]) for name in SHARED_FIGURES}
        with self._lock:
            self._measured.setdefault(flush_bytes, []).append(figures)

    def figures(self, flush_bytes: int) -> dict[str, float] | None:
        """Each figure's median over the reference's workers so far; None before the first."""
        with self._lock:
            measured = list(self._measured.get(flush_bytes, ()))
        if not measured:
            return None
        return {name: statistics.median(m[name] for m in measured) for name in SHARED_FIGURES}


def with_shared_figures(own: Mapping[str, Any], shared: Mapping[str, float]) -> dict[str, Any]:
    """A candidate worker's warm-up calibration with the reference's figures in place of its
    own few calls' (its spin rate kept)."""
    return {**own, **shared, "calibrated_by": REFERENCE_WORKERS}
