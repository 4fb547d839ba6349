"""The pre-roll policy: what GPU pre-roll a timed call gets, decided in one place.

A timed call is normally queued behind a blocking kernel that holds the stream until the whole
call is enqueued (worker/blocking.py); the worker falls back to a GPU pre-roll (a spin of
`preroll_us` before the start event) only where it cannot hold the stream: no Triton, or calls
that synchronise inside themselves (worker/timing.py, Timer.time_call). The pre-roll has to
cover the host's launch path so the start event is not recorded on an idle GPU:

1. the worker's `calibrate` proposes the harness's own measured host path (the 90th
   percentile dispatch of empty calls) plus LAUNCH_ALLOWANCE_US for the submission's launches
   (`proposed_preroll_us`);
2. the judge bounds that proposal by MAX_PREROLL_US, since it is host time the events do not
   see, and every timed call of the worker gets the bounded value (`preroll_for`); without a
   calibration (CPU, where calls are timed by the host clock) there is no pre-roll.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Host time inside a call is free up to this allowance, the grace a kernel gets when launched
# into a busy stream; beyond it the host time is the call's time (measure.CaseTimer.sample_us).
# The fallback pre-roll covers the harness's own measured host path plus this much of the
# submission's.
LAUNCH_ALLOWANCE_US = 30.0
# The judge never lets a pre-roll exceed this.
MAX_PREROLL_US = 200.0


def proposed_preroll_us(harness_dispatch_us: float, launch_allowance_us: float) -> float:
    """The worker's proposal: its own host path on empty calls plus the launch allowance."""
    return harness_dispatch_us + launch_allowance_us


def preroll_for(calibration: Mapping[str, Any] | None) -> float:
    """The pre-roll every timed call of a worker (or of a group of ranks) gets: the calibrated
    proposal bounded by MAX_PREROLL_US; 0 without a calibration."""
    if not calibration:
        return 0.0
    return min(float(calibration["preroll_us"]), MAX_PREROLL_US)
