"""A timed case judged in turns with the reference: the candidate's worker and a worker of the
reference's take turns of a few calls each, over the same seconds, and the speedup is theirs.

Where the reference's calls are host-bound, a case's time is the host's speed at the moment it
is timed as much as the kernel's, and a batch times the reference once, at its start: three
copies of the reference's own code read 1.49 - 1.81x faster than it on an H200 (docs/
benchmarks.md). Timed in turns, both sides see the same moments (stats/paired.py).

Each turn is a whole timing loop of its worker (SubmissionJudge.time_case): warm-up (in a later
turn one call, or none where the untimed call before each short call warms it), fresh inputs,
every output verified. The candidate's worker is stopped through the reference's turns
(SubmissionJudge.stopped): a thread it left running could otherwise load the host or the GPU
under the reference's calls and read faster. Turn pair k gives both sides the same inputs, which no earlier
call of either worker saw. The pairs go reference-candidate, candidate-reference, ... so that
neither side always runs first. Both sides time on one CPU, the one the reference's worker chose
in its first turn (the candidate's worker is told it; worker/cpu_choice.py): a host-bound call's
time depends on the CPU it runs on, and two CPUs of one host can differ by half.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

from ..judge import devices
from ..judge.core import Skip, SubmissionJudge
from ..judge.measure import (
    Measurement,
    Progress,
    TimingPlan,
    VerificationFailure,
    flag_clock_drop,
)
from ..results.reference_runs import ReferenceTiming
from ..spec.cases import Case
from ..stats.paired import PairedRatio, TurnNoise, paired_ratio
from ..stats.stopping import Warmup
from ..supervisor.failures import WorkerFailure

# Pairs of turns, and calls a turn. The turns' noise is mostly the host's from one turn to the
# next, not the calls' within one: on an H200, 30 copies of a host-bound problem's own code,
# timed in six pairs of ten calls, had a pair's log ratio spread 0.20 on each turn's first three
# calls and 0.15 on all ten. So many short turns: ten pairs of three calls give about the
# interval six of ten did, for 40 calls a side instead of 66 (warm-ups included).
PAIRS = 10
CALLS = 3
TURNS_STOP = "turns"  # a paired timing's stop_reason
# How many pairs a run times host-bound cases in; 0 turns timing in turns off.
PAIRS_VARIABLE = "KERNELBOARD_PAIRED_TURNS"
# Turn pair k's inputs start at call index 1 + k x STRIDE: no input seen twice by one worker.
STRIDE = 1000
# A turn after a side's first warms its call once: the other worker's calls ran meanwhile.
# Where that side's last turn ended with its calls warmed (short ones: judge/measure.py,
# WARM_BELOW_US), the untimed call before each of its calls warms it instead: no warm-up call.
LATER_TURN_WARMUP = Warmup(min_calls=1, max_calls=1)


def default_pairs() -> int:
    """PAIRS, or what KERNELBOARD_PAIRED_TURNS says (0: every case timed alone)."""
    text = os.environ.get(PAIRS_VARIABLE, "").strip()
    if not text:
        return PAIRS
    try:
        pairs = int(text)
    except ValueError:
        pairs = -1
    if pairs != 0 and pairs < 2:
        raise ValueError(
            f"{PAIRS_VARIABLE}: expected 0 or a whole number of at least 2, got {text!r}"
        )
    return pairs


class _ReferenceFailed(Exception):
    """The reference's worker failed a turn (its `cause`): the candidate is timed alone."""

    def __init__(self, cause: Exception):
        super().__init__(str(cause))
        self.cause = cause


class PairedTiming:
    """Times one case in turns of `calls` between a candidate's judge and the reference's, in
    `pairs` pairs; called in place of the candidate's time_case (SubmissionJudge.benchmark_case).
    Afterwards `reference` holds the reference's timing of the same turns and `ratio` the pair's
    speedup; where the reference's worker failed a turn, both are None, `unpaired` says why,
    and the candidate was timed alone as usual."""

    def __init__(
        self,
        candidate: SubmissionJudge,
        reference: SubmissionJudge,
        reference_timeout_s: float,
        pairs: int = PAIRS,
        calls: int = CALLS,
        noise: TurnNoise | None = None,
        run: ReferenceTiming | None = None,
    ):
        if pairs < 2 or calls < 1:
            raise ValueError(f"need at least 2 pairs of at least 1 call: {pairs}, {calls}")
        self.candidate = candidate
        self.reference_judge = reference
        self.reference_timeout_s = reference_timeout_s
        self.pairs = pairs
        self.calls = calls
        self.noise = noise  # the run's pooled turn noise on this case (stats/paired.py)
        self.run = run  # the run's own timing of the reference, which said the case is host-bound
        self.reference: dict[str, Any] | None = None
        self.ratio: PairedRatio | None = None
        self.unpaired = ""

    def __call__(
        self, case: Case, plan: TimingPlan, timeout_s: float, progress: Progress | None = None
    ) -> Measurement:
        started = time.perf_counter()
        mine: list[Measurement] = []
        theirs: list[Measurement] = []
        cpu: int | None = None  # the CPU the reference's worker times on, once it has
        try:
            self._reference_ready()  # its worker started before the turns, not inside one
            before = self._snapshot()
            with self.candidate.pool.quiet():  # the spares stay paused from turn to turn
                for pair in range(self.pairs):
                    first_call = 1 + pair * STRIDE
                    for candidate_turn in (False, True) if pair % 2 == 0 else (True, False):
                        side = mine if candidate_turn else theirs
                        turn_plan = self._turn_plan(plan, timeout_s, side[-1] if side else None)
                        if candidate_turn:
                            left = max(timeout_s - (time.perf_counter() - started), 0.001)
                            mine.append(
                                self.candidate.time_case(
                                    case, turn_plan, left, progress, first_call, cpu
                                )
                            )
                        else:
                            theirs.append(self._reference_turn(case, turn_plan, first_call))
                            if len(theirs) == 1:  # its first turn chose the CPU
                                cpu = _only(theirs[0].cpus)
        except _ReferenceFailed as failed:
            return self._alone(case, plan, timeout_s, progress, failed.cause, started)
        snapshots = (before, self._snapshot())
        self.reference_judge.release_cached_memory(windows=True)
        return self._pooled(mine, theirs, snapshots)

    def _snapshot(self) -> dict[str, Any] | None:
        """The GPU's state (devices.gpu_state), taken once before the first turn and once after
        the last, not around each of the twenty: eight NVML queries a snapshot, where a turn's
        three calls of a host-bound case take a millisecond."""
        return devices.gpu_state() if self.candidate.use_cuda else None

    def _reference_ready(self) -> None:
        try:
            self.reference_judge.worker()
        except (WorkerFailure, Skip) as exc:
            raise _ReferenceFailed(exc) from exc

    def _reference_turn(self, case: Case, plan: TimingPlan, first_call: int) -> Measurement:
        """One turn of the reference's, the candidate's worker stopped meanwhile: it cannot load
        the host or the GPU under the reference's calls."""
        try:
            with self.candidate.stopped():
                return self.reference_judge.time_case(
                    case, plan, self.reference_timeout_s, None, first_call
                )
        except (WorkerFailure, Skip, VerificationFailure) as exc:
            raise _ReferenceFailed(exc) from exc

    def _pooled(
        self,
        mine: list[Measurement],
        theirs: list[Measurement],
        snapshots: tuple[dict[str, Any] | None, dict[str, Any] | None],
    ) -> Measurement:
        """The candidate's timing of its turns, with the pair's account (`turns`) and the
        GPU's state before the first turn and after the last (a drop flags both sides); the
        reference's and the ratio are kept on self."""
        self.ratio = paired_ratio(
            [m.samples_us for m in mine], [m.samples_us for m in theirs], self.noise
        )
        reference = Measurement.pooled(theirs, TURNS_STOP)
        pooled = Measurement.pooled(mine, TURNS_STOP)
        for side in (reference, pooled):
            side.clocks_before, side.clocks_after = snapshots
            if side.clock == "cuda_event":
                flag_clock_drop(side)
        reference.rank_us = self.ratio.reference_us
        self.reference = reference.to_record()
        pooled.rank_us = self.ratio.candidate_us
        pooled.details["turns"] = {
            "pairs": self.pairs,
            "calls": self.calls,
            "ratios": [round(r, 4) for r in self.ratio.ratios],
            "reference_s": round(reference.elapsed_s, 4),  # the reference's turns' timing loops
            "sd_log": round(self.ratio.sd_log, 5),
            "pooled_sd_log": _rounded(self.ratio.pooled_sd_log),
            "half_log": round(self.ratio.half_log, 5),
        }
        return pooled

    def _turn_plan(
        self, plan: TimingPlan, timeout_s: float, last_turn: Measurement | None
    ) -> TimingPlan:
        """A turn: `calls` calls after its warm-up, within its share of the case's time. A
        side's first turn (`last_turn` None) warms up as any timing does; a later one warms its
        call once, or not at all where its last turn ended warm (LATER_TURN_WARMUP)."""
        rule = replace(
            plan.rule,
            min_time_s=0.0,
            min_samples=self.calls,
            max_samples=self.calls,
            budget_s=max(timeout_s / (2 * self.pairs), 0.001),
            projection_min_samples=self.calls + 1,
        )
        warmup = plan.warmup if last_turn is None else LATER_TURN_WARMUP
        warm_start = last_turn is not None and last_turn.ends_warm
        return replace(
            plan, rule=rule, warmup=warmup, snapshots=False, wake=False, warm_start=warm_start
        )

    def _alone(
        self,
        case: Case,
        plan: TimingPlan,
        timeout_s: float,
        progress: Progress | None,
        failure: Exception,
        started: float,
    ) -> Measurement:
        """The reference's worker failed: the candidate is timed alone, as without turns."""
        self.unpaired = str(failure) or type(failure).__name__
        self.reference_judge.close()
        left = max(timeout_s - (time.perf_counter() - started), 0.001)
        return self.candidate.time_case(case, plan, left, progress)


def _only(cpus: set[int]) -> int | None:
    """The one CPU a timing ran on; None where it ran on none in particular or on several."""
    return next(iter(cpus)) if len(cpus) == 1 else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 5)
