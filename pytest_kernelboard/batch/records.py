"""A candidate's record: the verdict a program that writes kernels acts on.

One `CandidateRecord` per candidate (schema "kernelboard.candidate/1", generated from the
fields like the results document's): the verdict, the speedup and whether it is tied, flags
that a reward function must not trust blindly, what kind of error it was, and feedback per case
(the check's message, the max error, the time and its interval). Built from the evaluation's
case outcomes and its summary; nothing here measures or judges.

"Faster than p x" means beyond noise: the lower end of the speedup's interval (`speedup_ci95`,
the interval that decides `tied`) above p. `fast_p` and the judge's "faster" count use it;
`fast_p_raw` keeps KernelBench's definition (the point speedup above p) for comparison with
published numbers. A record written before `speedup_ci95` existed is read by its speedup, the
run-to-run tolerance around it and its `tied` (records are never rewritten).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..channel.protocol import ErrorKind
from ..judge.core import CaseOutcome
from ..results.result_model import (
    ABSENT,
    Absent,
    CaseKind,
    Record,
    Status,
    _bookkeeping,
    _order,
    json_schema,
)
from ..spec.cases import Case
from ..stats.between_workers import host_bound
from ..stats.scoring import (
    TIE_TOLERANCE,
    case_speedup_interval,
    fast_p,
    fast_p_raw,
    faster_than,
    rank_us,
)

SCHEMA_ID = "kernelboard.candidate/1"
FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)  # the batch's fast_p, at KernelBench's thresholds
DEFAULT_EXCESSIVE_SPEEDUP = 10.0  # KernelBench's threshold for a speedup too good to trust


class Verdict(enum.StrEnum):
    PASSED = "passed"  # every case that ran was right (and timed, in benchmark mode)
    FAILED = "failed"  # it ran and a result was wrong
    ERROR = "error"  # it could not be judged: did not build or import, raised, hung, crashed


class ErrorKindName(enum.StrEnum):
    """What went wrong, for a program to act on (docs/agents.md explains each)."""

    COMPILE_ERROR = "compile_error"
    IMPORT_ERROR = "import_error"
    MISSING_MODULE = "missing_module"
    NO_ENTRY = "no_entry"
    RUNTIME_ERROR = "runtime_error"
    EXIT = "exit"
    UNSENDABLE = "unsendable"
    INCORRECT_STRUCTURE = "incorrect_structure"
    INCORRECT_SHAPE = "incorrect_shape"
    INCORRECT_DTYPE = "incorrect_dtype"
    INCORRECT_NUMERICAL = "incorrect_numerical"
    MUTATES_INPUTS = "mutates_inputs"
    IMPLAUSIBLE_TIMING = "implausible_timing"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    HARNESS_ERROR = "harness_error"  # the judge itself failed on it: kernelboard's bug


class Flag(enum.StrEnum):
    EXCESSIVE_SPEEDUP = "excessive_speedup"  # above the threshold: check it before trusting it
    MUTATES_INPUTS = "mutates_inputs"  # wrote into an input the reference leaves alone
    ONLY_LIBRARY_KERNELS = "only_library_kernels"  # launched none of its own kernels


@dataclass(frozen=True, slots=True)
class CaseFeedback(Record):
    kind: CaseKind
    id: str
    status: Status
    message: str
    time_us: float | None = None  # the ranking statistic (median per call)
    ci95_us: tuple[float, ...] | None = None
    # The interval of this worker's samples alone (ci95_us also holds the spread between workers
    # where the reference's workers measured it).
    ci95_within_us: tuple[float, ...] | None = None
    reference_us: float | None = None
    speedup: float | None = None
    # The speedup's interval (stats/scoring.speedup_interval): faster than p beyond noise
    # where its lower end is above p.
    speedup_ci95: tuple[float, ...] | None | Absent = ABSENT
    stop_reason: str | None = None
    # The timed calls time_us rests on (the warm-up's not counted): what stop_reason let run.
    calls: int | Absent = ABSENT
    # On a GPU: most timed calls were charged their host time (launches, Python), not their
    # device time. Such a time moves with the process far more than its own samples show (in a
    # batch, ci95_us holds that spread as the reference's workers measured it).
    host_bound: bool | None = None
    # The case's time moves this much (sd of log time) from one worker to the next, measured by
    # the reference's workers; ci95_us holds it (stats/between_workers.py).
    between_workers_rsd: float | None = None
    # Where the candidate's own case was timed in several fresh workers (host-bound, or
    # --candidate-workers): each worker's time, in order; time_us is their median.
    time_us_by_worker: tuple[float, ...] | Absent = ABSENT
    # The CPUs its timed calls ran on: the judge's timing core where it keeps one
    # (judge/timing_core.py); absent on a CPU, where the scheduler places them.
    cpus: tuple[int, ...] | Absent = ABSENT
    # Whose empty calls the harness's own cost was calibrated on (judge/calibration.py): the
    # candidate's own worker, or the reference's workers' in the same run; absent on a CPU.
    calibrated_by: Literal["own_worker", "reference_workers"] | Absent = ABSENT
    # Where the case was timed in turns with a worker of the reference's (its reference's
    # timing host-bound, evaluation/paired.py): each turn pair's ratio, reference over
    # candidate; speedup and speedup_ci95 are those turns', reference_us their reference time,
    # unless turns_not_used says why not (its calls were the GPU's: evaluation/submission.py).
    turn_ratios: tuple[float, ...] | Absent = ABSENT
    # Its part of speedup_ci95's half-width (log units) for what moves a speedup in turns from
    # one run to the next and its pairs do not see (stats/paired.run_to_run_half_log).
    run_to_run_half_log: float | Absent = ABSENT
    turns_not_used: str | Absent = ABSENT
    mismatch: dict[str, Any] | None | Absent = ABSENT
    mutated_inputs: tuple[str, ...] | Absent = ABSENT
    # A passed timed case without a speedup: why the reference could not be timed on it.
    reference_error: str | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class CandidateRecord(Record):
    id: str
    leaderboard: str
    mode: str
    status: Verdict
    correct: bool
    speedup: float | None  # the reference's score over this one's (null when not timed)
    tied: bool | None  # within noise of the reference (null when not timed)
    flags: tuple[Flag, ...]
    error_kind: ErrorKindName | None
    message: str  # the first failure's message: the compiler's, the check's, ...
    # The first failure's case, by its id as cases[].id reads it ("size=1-seed=3"); records
    # written before read "test[size=1-seed=3]" (kind[id]), which stays a valid string here.
    failed_case: str | None
    # this candidate's part of the batch's fast_p: correct and faster than p x beyond noise
    fast_p: dict[str, bool] | None
    cases: tuple[CaseFeedback, ...]
    duration_s: float = field(metadata={"schema": {"minimum": 0}})
    # The speedup's interval; tied is lo <= 1 <= hi (null when not timed, or unbounded above).
    speedup_ci95: tuple[float, ...] | None | Absent = ABSENT
    # KernelBench's definition: correct and the point speedup above p (noise counted as wins).
    fast_p_raw: dict[str, bool] | None | Absent = ABSENT
    profile: dict[str, Any] | Absent = ABSENT
    # Where the candidate's wall time went, seconds per phase (batch/phases.py names them).
    phases: dict[str, float] | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


def record_schema() -> dict[str, Any]:
    """The JSON schema of a candidate's record, generated from CandidateRecord."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": SCHEMA_ID,
        **json_schema(CandidateRecord),
    }


def case_feedback(case: Case, outcome: CaseOutcome) -> CaseFeedback:
    timing = outcome.timing or None
    reference = outcome.reference_timing or None
    run_to_run = ((timing or {}).get("turns") or {}).get("run_to_run_half_log")
    return CaseFeedback(
        kind=CaseKind(case.kind),
        id=case.id,
        status=Status(outcome.status),
        message=outcome.message,
        time_us=rank_us(timing) if timing else None,
        ci95_us=_interval(timing, "rank_ci95_us"),
        ci95_within_us=_interval(timing, "rank_ci95_within_us")
        or _interval(timing, "rank_ci95_us"),
        reference_us=rank_us(reference) if reference else None,
        speedup=outcome.speedup,
        speedup_ci95=_case_interval(case, outcome),
        stop_reason=(timing or {}).get("stop_reason"),
        calls=len((timing or {}).get("samples_us") or ()) or ABSENT,
        host_bound=host_bound(timing),
        between_workers_rsd=(timing or {}).get("between_workers_rsd"),
        time_us_by_worker=tuple((timing or {}).get("rank_us_by_worker") or ()) or ABSENT,
        cpus=tuple((timing or {}).get("cpus") or ()) or ABSENT,
        calibrated_by=(timing or {}).get("calibrated_by") or ABSENT,
        turn_ratios=tuple(((timing or {}).get("turns") or {}).get("ratios") or ()) or ABSENT,
        run_to_run_half_log=ABSENT if run_to_run is None else run_to_run,
        turns_not_used=outcome.details.get("turns_not_used") or ABSENT,
        mismatch=outcome.details.get("mismatch", ABSENT),
        mutated_inputs=tuple(outcome.details.get("mutated_inputs") or ()) or ABSENT,
        reference_error=outcome.details.get("reference_error") or ABSENT,
    )


def _case_interval(case: Case, outcome: CaseOutcome) -> tuple[float, ...] | None | Absent:
    """A timed benchmark case's speedup interval; absent for a case without a speedup."""
    if outcome.speedup is None:
        return ABSENT
    bounds = case_speedup_interval(
        {
            "timing": outcome.timing or None,
            "reference_timing": outcome.reference_timing or None,
            "speedup": outcome.speedup,
        }
    )
    return tuple(bounds) if bounds and math.isfinite(bounds[1]) else None


def _interval(timing: Mapping[str, Any] | None, key: str) -> tuple[float, ...] | None:
    return tuple(timing[key]) if timing and timing.get(key) else None


def error_kind(outcome: CaseOutcome) -> ErrorKindName | None:
    """The protocol's and the judge's facts about a failed case, as one kind."""
    if outcome.status == "timeout":
        return ErrorKindName.TIMEOUT
    if outcome.status == "crashed":
        return ErrorKindName.CRASHED
    if outcome.status == "failed":
        if outcome.details.get("mutated_inputs") and not outcome.details.get("mismatch"):
            return ErrorKindName.MUTATES_INPUTS
        if outcome.implausible_timing:
            return ErrorKindName.IMPLAUSIBLE_TIMING
        mismatch = outcome.details.get("mismatch") or {}
        return {
            "structure": ErrorKindName.INCORRECT_STRUCTURE,
            "shape": ErrorKindName.INCORRECT_SHAPE,
            "dtype": ErrorKindName.INCORRECT_DTYPE,
        }.get(mismatch.get("kind"), ErrorKindName.INCORRECT_NUMERICAL)
    if outcome.status != "error":
        return None
    by_kind = {
        ErrorKind.NO_ENTRY: ErrorKindName.NO_ENTRY,
        ErrorKind.EXIT: ErrorKindName.EXIT,
        ErrorKind.UNSENDABLE: ErrorKindName.UNSENDABLE,
        ErrorKind.MISSING_MODULE: ErrorKindName.MISSING_MODULE,
    }
    if outcome.error_kind in by_kind:
        return by_kind[outcome.error_kind]
    if outcome.during_import:
        return ErrorKindName.COMPILE_ERROR if _compiling(outcome) else ErrorKindName.IMPORT_ERROR
    # A Triton kernel compiles at its first launch: its front-end's errors come from a call.
    return ErrorKindName.COMPILE_ERROR if _compiling(outcome) else ErrorKindName.RUNTIME_ERROR


# What raises when source does not compile: Python's parser, a `lang: cu` or load_inline build
# (torch wraps nvcc's and ninja's output), Triton's front-end.
COMPILE_EXCEPTIONS = {
    "SyntaxError",
    "IndentationError",
    "TabError",
    "BuildError",
    "CompilationError",
}


def _compiling(outcome: CaseOutcome) -> bool:
    return outcome.exception in COMPILE_EXCEPTIONS or "Error building extension" in outcome.message


def candidate_record(
    candidate_id: str,
    leaderboard: str,
    mode: str,
    outcomes: Sequence[tuple[Case, CaseOutcome]],
    summary: Mapping[str, Any],
    duration_s: float,
    excessive_speedup: float = DEFAULT_EXCESSIVE_SPEEDUP,
    extra_flags: Sequence[Flag] = (),
    profile: dict[str, Any] | None = None,
    phases: dict[str, float] | None = None,
) -> CandidateRecord:
    """The record of one candidate from its cases' outcomes and its evaluation's summary."""
    failures = [(c, o) for c, o in outcomes if o.status not in ("passed", "skipped", "not_run")]
    first = failures[0] if failures else None
    status = Verdict.PASSED
    if first is not None:
        kind = error_kind(first[1])
        failed = first[1].status == "failed"
        status = Verdict.FAILED if failed else Verdict.ERROR
    else:
        kind = None
    ran = [o for _, o in outcomes if o.status not in ("skipped", "not_run")]
    correct = status is Verdict.PASSED and bool(ran)
    speedup = summary.get("speedup") if correct else None
    flags = list(extra_flags)
    if any(o.details.get("mutated_inputs") for _, o in outcomes):
        flags.append(Flag.MUTATES_INPUTS)
    if speedup is not None and speedup > excessive_speedup:
        flags.append(Flag.EXCESSIVE_SPEEDUP)
    timed = mode != "test"
    tie = summary.get("tied_with_reference") if correct and timed else None
    bounds = summary.get("speedup_ci95") if speedup is not None else None
    interval = speedup_bounds(speedup, bounds, tie)
    shares = fast_p([correct], [interval], FAST_P_THRESHOLDS)
    raw = fast_p_raw([correct], [speedup], FAST_P_THRESHOLDS)
    return CandidateRecord(
        id=candidate_id,
        leaderboard=leaderboard,
        mode=mode,
        status=status,
        correct=correct,
        speedup=speedup,
        tied=tie,
        flags=tuple(dict.fromkeys(flags)),
        error_kind=kind,
        message=first[1].message if first else "",
        failed_case=first[0].id if first else None,
        fast_p=_flags(shares, timed),
        cases=tuple(case_feedback(c, o) for c, o in outcomes),
        duration_s=round(duration_s, 3),
        speedup_ci95=tuple(bounds) if bounds else None,
        fast_p_raw=_flags(raw, timed),
        profile=ABSENT if profile is None else profile,
        phases=ABSENT if phases is None else phases,
    )


def harness_error_record(
    candidate_id: str, leaderboard: str, mode: str, error: Exception, duration_s: float
) -> CandidateRecord:
    """The record of a candidate the judge itself failed on (a bug of kernelboard's, not the
    candidate's): an error naming the exception, no cases. The batch goes on with the next
    candidate; one candidate's odd timings once ended every GPU's judge of a batch."""
    timed = mode != "test"
    return CandidateRecord(
        id=candidate_id,
        leaderboard=leaderboard,
        mode=mode,
        status=Verdict.ERROR,
        correct=False,
        speedup=None,
        tied=None,
        flags=(),
        error_kind=ErrorKindName.HARNESS_ERROR,
        message=(
            f"the judge failed on this candidate (kernelboard's fault, not the candidate's): "
            f"{type(error).__name__}: {error}; its traceback is on the judge's stderr"
        ),
        failed_case=None,
        fast_p=_flags(fast_p([False], [None], FAST_P_THRESHOLDS), timed),
        cases=(),
        duration_s=round(duration_s, 3),
        fast_p_raw=_flags(fast_p_raw([False], [None], FAST_P_THRESHOLDS), timed),
    )


def _flags(shares: Mapping[str, float], timed: bool) -> dict[str, bool]:
    return {
        key.removeprefix("fast_"): bool(share)
        for key, share in shares.items()
        if timed or key == "fast_0"
    }


def speedup_bounds(
    speedup: float | None, bounds: Sequence[float] | None, tie: bool | None
) -> tuple[float, float] | None:
    """A candidate's speedup interval: its stored `speedup_ci95`, else (a record older than it,
    or an interval unbounded above) the run-to-run tolerance around the speedup, reaching down
    to 1 where the record says tied. None without a speedup."""
    if speedup is None:
        return None
    if bounds and len(bounds) == 2:
        return float(bounds[0]), float(bounds[1])
    lo, hi = speedup * (1 - TIE_TOLERANCE), speedup * (1 + TIE_TOLERANCE)
    if tie:
        lo, hi = min(lo, 1.0), max(hi, 1.0)
    return lo, hi


def record_interval(record: Mapping[str, Any]) -> tuple[float, float] | None:
    """The speedup interval of a candidate's record as written (or read back): see
    speedup_bounds. None when it is not correct or not timed."""
    if not record.get("correct"):
        return None
    return speedup_bounds(record.get("speedup"), record.get("speedup_ci95"), record.get("tied"))


def faster(record: Mapping[str, Any], p: float = 1.0) -> bool:
    """Whether a candidate's record is correct and faster than p x the reference beyond noise
    (its speedup interval above p): what the judge's progress counts as "faster"."""
    return faster_than(record_interval(record), p)


def batch_fast_p(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """fast_p over a batch, noise-aware: the share of candidates correct and faster than p
    times the reference beyond noise (their speedup interval above p; `faster`). p = 0: correct
    at all. None where the batch was not timed. Identical code tied with the reference counts
    for no p >= 1, however its point speedups fell."""
    if not records:
        return {}
    shares = fast_p(
        [bool(r["correct"]) for r in records],
        [record_interval(r) for r in records],
        FAST_P_THRESHOLDS,
    )
    return _batch_shares(records, shares)


def batch_fast_p_raw(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """KernelBench's fast_p over a batch, raw: the share of candidates correct and whose point
    speedup is above p (noise counted as wins: identical code reads faster about half the
    time). For comparison with published numbers; reward and report by batch_fast_p."""
    if not records:
        return {}
    shares = fast_p_raw(
        [bool(r["correct"]) for r in records], [r["speedup"] for r in records], FAST_P_THRESHOLDS
    )
    return _batch_shares(records, shares)


def _batch_shares(
    records: Sequence[Mapping[str, Any]], shares: Mapping[str, float]
) -> dict[str, float | None]:
    timed = any(r["mode"] != "test" for r in records)
    return {
        key.removeprefix("fast_"): (share if timed or key == "fast_0" else None)
        for key, share in shares.items()
    }
