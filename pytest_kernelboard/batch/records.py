"""A candidate's record: the verdict a program that writes kernels acts on.

One `CandidateRecord` per candidate (schema "kernelboard.candidate/1", generated from the
fields like the results document's): the verdict, the speedup and whether it is tied, flags
that a reward function must not trust blindly, what kind of error it was, and feedback per case
(the check's message, the max error, the time and its interval). Built from the evaluation's
case outcomes and its summary; nothing here measures or judges.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from ..stats.scoring import fast_p, rank_us
from ..worker.protocol import ErrorKind

SCHEMA_ID = "kernelboard.candidate/1"
FAST_P_THRESHOLDS = (0.0, 1.0, 1.5, 2.0)  # the batch's fast_p, as KernelBench reports it
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
    stop_reason: str | None = None
    # On a GPU: most timed calls were charged their host time (launches, Python), not their
    # device time. Such a time moves with the process far more than its own samples show (in a
    # batch, ci95_us holds that spread as the reference's workers measured it).
    host_bound: bool | None = None
    # The case's time moves this much (sd of log time) from one worker to the next, measured by
    # the reference's workers; ci95_us holds it (stats/between_workers.py).
    between_workers_rsd: float | None = None
    mismatch: dict[str, Any] | None | Absent = ABSENT
    mutated_inputs: tuple[str, ...] | Absent = ABSENT
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
    failed_case: str | None  # "test[size=1-seed=3]" of the first failure
    fast_p: dict[str, bool] | None  # this candidate's share of the batch's fast_p
    cases: tuple[CaseFeedback, ...]
    duration_s: float = field(metadata={"schema": {"minimum": 0}})
    profile: dict[str, Any] | Absent = ABSENT
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
        stop_reason=(timing or {}).get("stop_reason"),
        host_bound=host_bound(timing),
        between_workers_rsd=(timing or {}).get("between_workers_rsd"),
        mismatch=outcome.details.get("mismatch", ABSENT),
        mutated_inputs=tuple(outcome.details.get("mutated_inputs") or ()) or ABSENT,
    )


def _interval(timing: Mapping[str, Any] | None, key: str) -> tuple[float, ...] | None:
    return tuple(timing[key]) if timing and timing.get(key) else None


def host_bound(timing: Mapping[str, Any] | None) -> bool | None:
    """Whether most of a GPU timing's calls took their host time as their sample (null for a
    host clock, where every time is the host's, and for an untimed case)."""
    if not timing or timing.get("clock") != "cuda_event":
        return None
    return 2 * int(timing.get("host_bound_calls") or 0) > int(timing["n"])


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
    shares = fast_p([correct], [speedup], FAST_P_THRESHOLDS)
    timed = mode != "test"
    return CandidateRecord(
        id=candidate_id,
        leaderboard=leaderboard,
        mode=mode,
        status=status,
        correct=correct,
        speedup=speedup,
        tied=summary.get("tied_with_reference") if correct and timed else None,
        flags=tuple(dict.fromkeys(flags)),
        error_kind=kind,
        message=first[1].message if first else "",
        failed_case=f"{first[0].kind}[{first[0].id}]" if first else None,
        fast_p={
            key.removeprefix("fast_"): bool(share)
            for key, share in shares.items()
            if timed or key == "fast_0"
        },
        cases=tuple(case_feedback(c, o) for c, o in outcomes),
        duration_s=round(duration_s, 3),
        profile=ABSENT if profile is None else profile,
    )


def batch_fast_p(records: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """KernelBench's fast_p over a batch: the share of candidates correct and faster than p
    times the reference (p = 0: correct at all). None where the batch was not timed."""
    if not records:
        return {}
    timed = any(r["mode"] != "test" for r in records)
    shares = fast_p(
        [r["correct"] for r in records], [r["speedup"] for r in records], FAST_P_THRESHOLDS
    )
    return {
        key.removeprefix("fast_"): (share if timed or key == "fast_0" else None)
        for key, share in shares.items()
    }
