"""The results document as typed, frozen records, and the JSON schema generated from them.

One class per object of a results document (schema "kernelboard.run/1", see records.py):
`Run` > `Evaluation` > `CaseRecord` > `Timing` (> `CommSpeedOfLight`), with `Summary`,
`Leaderboard`, `Submission`, `Environment`, `Harness`, `Provenance`, `ReferenceRun` and
`Profile` beside them.

`to_json()` writes exactly the stored shape and `from_json()` reads it back, so a stored
record survives `from_json(...).to_json()` unchanged, byte for byte once dumped:
- a key that is absent stays absent: an optional field defaults to `ABSENT` (never written),
  which is not the same as `None` (written as null);
- keys this harness does not know (newer fields, per-call details) are kept in `extra`;
- a record read back keeps its keys' order (`key_order`); a record built here writes the
  declared order, which is the order the producers always wrote.

`json_schema(cls)` turns the field types into JSON schema: str/int/float/bool, enums and
Literals to `enum`, `X | None` to a nullable type, a field with a default (ABSENT) to an
optional key, nested records to nested objects, `tuple[X, ...]` to arrays and `dict[str, X]`
to `additionalProperties`. What a type cannot say (minimums, patterns, const) is carried in
`field(metadata={"schema": {...}})`.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeVar

from ..errors import KernelboardError
from ..vocabulary import Lang, RankingBy

SCHEMA_ID = "kernelboard.run/1"


class ModelError(KernelboardError, ValueError):
    """A stored object does not fit the model; the message names the key."""


class Absent(enum.Enum):
    """The type of `ABSENT`: an optional key that is not written at all (unlike None)."""

    ABSENT = "absent"

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent.ABSENT


class Mode(enum.StrEnum):
    """What a pytest run did (`--kb-mode`)."""

    TEST = "test"
    BENCHMARK = "benchmark"
    LEADERBOARD = "leaderboard"
    PROFILE = "profile"


class CaseKind(enum.StrEnum):
    TEST = "test"
    BENCHMARK = "benchmark"


class Status(enum.StrEnum):
    """A case's verdict (an evaluation's summary uses passed, failed and skipped)."""

    PASSED = "passed"  # verified
    FAILED = "failed"  # wrong output
    ERROR = "error"  # the submission (or the leaderboard's own code) raised
    CRASHED = "crashed"  # the worker died (signal or exit)
    TIMEOUT = "timeout"  # past the task's limit
    SKIPPED = "skipped"  # cannot run here (e.g. needs CUDA)
    # Not run: an earlier case timed out, or the leaderboard's own reference cannot run it
    # (the same for every submission; it counts against no one).
    NOT_RUN = "not_run"


SUMMARY_STATUSES = (Status.PASSED.value, Status.FAILED.value, Status.SKIPPED.value)


def _schema(**constraints: Any) -> dict[str, Any]:
    """Field metadata: JSON schema keywords the type alone cannot express."""
    return {"schema": constraints}


_NONNEG = _schema(minimum=0)
_NONNEG_ITEMS = _schema(items={"minimum": 0})
_NONNEG_VALUES = _schema(additionalProperties={"minimum": 0})
_PAIR = _schema(items={"minimum": 0}, minItems=2, maxItems=2)
_NONEMPTY = _schema(minLength=1)

R = TypeVar("R", bound="Record")


class Record:
    """The shared to_json/from_json of the model's dataclasses (driven by their fields)."""

    __slots__ = ()
    # Every record has these two, declared last in each class (see _bookkeeping()).
    extra: Mapping[str, Any]
    key_order: tuple[str, ...]
    _BOOKKEEPING: ClassVar[frozenset[str]] = frozenset({"extra", "key_order"})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in _data_fields(type(self)):
            value = getattr(self, f.name)
            if value is not ABSENT:
                out[f.name] = _dump(value)
        out.update(self.extra)
        if not self.key_order:
            return out
        first = {k: out[k] for k in self.key_order if k in out}
        return {**first, **{k: v for k, v in out.items() if k not in first}}

    @classmethod
    def from_json(cls: type[R], data: Any, where: str = "$") -> R:
        if not isinstance(data, Mapping):
            raise ModelError(f"{where}: expected an object, got {type(data).__name__}")
        hints = _hints(cls)
        values: dict[str, Any] = {}
        for f in _data_fields(cls):
            if f.name in data:
                values[f.name] = _load(hints[f.name], data[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING:
                raise ModelError(f"{where}: {f.name!r} is a required property")
        known = {f.name for f in _data_fields(cls)}
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, extra=extra, key_order=tuple(data))


def _bookkeeping() -> Any:
    return field(default_factory=dict, repr=False)


def _order() -> Any:
    return field(default=(), compare=False, repr=False)


@functools.cache
def _data_fields(cls: type) -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.name not in Record._BOOKKEEPING)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_dump(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _members(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _load(tp: Any, value: Any, where: str) -> Any:
    """A JSON value as type `tp`; numbers and strings stay exactly as read (1 stays 1)."""
    members = [m for m in _members(tp) if m is not Absent]
    if value is None:
        if type(None) in members or Any in members:
            return None
        raise ModelError(f"{where}: None is not allowed here")
    members = [m for m in members if m is not type(None)]
    tp = members[0] if len(members) == 1 else Any
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, Record):
        return tp.from_json(value, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            allowed = ", ".join(repr(m.value) for m in tp)
            raise ModelError(f"{where}: {value!r} is not one of {allowed}") from None
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ModelError(f"{where}: expected an array, got {type(value).__name__}")
        item = typing.get_args(tp)[0]
        return tuple(_load(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise ModelError(f"{where}: expected an object, got {type(value).__name__}")
        item = typing.get_args(tp)[1]
        return {k: _load(item, v, f"{where}.{k}") for k, v in value.items()}
    return value  # str, int, float, bool, Literal, Any: as read (the schema checks them)


# ---------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class CommSpeedOfLight(Record):
    """A multi-GPU case's communication ceiling (judge/distributed.py, stats/speed_of_light.py):
    the median of timed all-reduces of the bytes one rank reads, over the case's ranks on this
    host; bandwidths in GB/s (1e9 bytes/s) as NCCL-tests reports them."""

    collective: Literal["all_reduce"]
    backend: str
    world_size: int = field(metadata=_schema(minimum=2))
    comm_bytes: int = field(metadata=_schema(minimum=1))
    ceiling_us: float = field(metadata=_NONNEG)
    repetitions: int = field(metadata=_schema(minimum=1))
    clock: Literal["cuda_event", "host"]
    algbw_gbps: float = field(metadata=_NONNEG)
    bus_gbps: float = field(metadata=_NONNEG)  # algbw x 2(W-1)/W
    # ceiling_us / the ranking statistic: 1.0 moves the bytes as fast as NCCL's all-reduce.
    of_light: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class Timing(Record):
    """A case's timing block (measure.Measurement.to_record; times in microseconds)."""

    clock: Literal["cuda_event", "host"]
    n: int = field(metadata=_schema(minimum=1))
    mean_us: float = field(metadata=_NONNEG)
    median_us: float = field(metadata=_NONNEG)
    std_us: float = field(metadata=_NONNEG)
    min_us: float = field(metadata=_NONNEG)
    max_us: float = field(metadata=_NONNEG)
    ci95_us: tuple[float, ...] = field(metadata=_PAIR)
    samples_us: tuple[float, ...] | Absent = field(default=ABSENT, metadata=_NONNEG_ITEMS)
    wall_us: tuple[float, ...] | Absent = field(default=ABSENT, metadata=_NONNEG_ITEMS)
    # What ranks (stats/scoring.rank_us): the median and its distribution-free interval.
    statistic: Literal["median", "mean"] | Absent = ABSENT
    rank_us: float | Absent = field(default=ABSENT, metadata=_NONNEG)
    rank_ci95_us: tuple[float, ...] | Absent = field(default=ABSENT, metadata=_PAIR)
    blocked_calls: int | Absent = field(default=ABSENT, metadata=_NONNEG)
    blocking_off: str | None | Absent = ABSENT
    event_overhead_us: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    # Whose empty calls event_overhead_us and the harness's gaps came from: the timed worker's
    # own, or the median of the reference's workers' in the same run (judge/calibration.py).
    calibrated_by: Literal["own_worker", "reference_workers"] | Absent = ABSENT
    host_bound_calls: int | Absent = field(default=ABSENT, metadata=_NONNEG)
    # Calls whose tensors crossed as host copies instead of through the device windows.
    host_copied_calls: int | Absent = field(default=ABSENT, metadata=_NONNEG)
    # Calls an untimed call on an earlier input warmed first (judge/measure.py, WARM_BELOW_US).
    warm_calls: int | Absent = field(default=ABSENT, metadata=_NONNEG)
    # The CPUs the worker ran the timed calls on (worker/cpu_choice.py); empty: the scheduler's.
    cpus: tuple[int, ...] | Absent = field(default=ABSENT, metadata=_NONNEG_ITEMS)
    # A reference timed in several workers (a batch's): each one's ranking time; this block is
    # the median one's (evaluation/session.py).
    rank_us_by_worker: tuple[float, ...] | Absent = field(default=ABSENT, metadata=_NONNEG_ITEMS)
    # The relative spread (sd of log times) of those workers' times; where it is known,
    # rank_ci95_us also holds it (stats/between_workers.py) and the samples' own interval is
    # rank_ci95_within_us. A submission's timing carries its reference's.
    between_workers_rsd: float | Absent = field(default=ABSENT, metadata=_NONNEG)
    rank_ci95_within_us: tuple[float, ...] | Absent = field(default=ABSENT, metadata=_PAIR)
    wall_s: dict[str, float] | Absent = field(default=ABSENT, metadata=_NONNEG_VALUES)
    flags: tuple[str, ...] | Absent = ABSENT
    # floor_us / the ranking statistic: the share of peak DRAM bandwidth the call achieved.
    floor_us: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    speed_of_light: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    # A multi-GPU benchmark case's all-reduce ceiling; absent for single-GPU and test cases.
    comm_speed_of_light: CommSpeedOfLight | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class ReferenceRun(Record):
    """Which reference run a case's reference_timing (and speedup) came from."""

    source: Literal["store", "measured"]
    file: str | None | Absent = ABSENT
    run_id: str | None | Absent = ABSENT
    created_at: str | None | Absent = ABSENT
    harness_version: str | None | Absent = ABSENT
    timing_method: int | None | Absent = ABSENT
    torch: str | None | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class ProfileEntry(Record):
    name: str
    calls: int = field(metadata=_NONNEG)
    duration_us: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class Profile(Record):
    """Profile mode: what one profiled call launched (profiling.py); never ranked."""

    tool: Literal["ncu", "torch.profiler"]
    what: str
    calls_total: int = field(metadata=_NONNEG)
    duration_us_total: float = field(metadata=_NONNEG)
    top: tuple[ProfileEntry, ...]
    report: str | None | Absent = ABSENT
    note: str | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class CaseRecord(Record):
    """One case of an evaluation: its verdict, and its timings when it was timed."""

    kind: CaseKind
    index: int = field(metadata=_NONNEG)
    id: str
    spec: dict[str, Any]
    status: Status
    message: str
    duration_s: float = field(metadata=_NONNEG)
    seed: int | None | Absent = ABSENT
    timing: Timing | None | Absent = ABSENT
    reference_timing: Timing | None | Absent = ABSENT
    speedup: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    reference_run: ReferenceRun | Absent = ABSENT
    profile: Profile | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    # Producers write seed between spec and status.
    key_order: tuple[str, ...] = field(
        default=("kind", "index", "id", "spec", "seed"), compare=False, repr=False
    )


@dataclass(frozen=True, slots=True)
class Leaderboard(Record):
    name: str = field(metadata=_NONEMPTY)
    ranking_by: RankingBy
    path: str | Absent = ABSENT
    lang: Lang | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = field(default=("name", "path"), compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Submission(Record):
    path: str
    author: str = field(metadata=_NONEMPTY)
    sha256: str = field(metadata=_schema(pattern="^[0-9a-f]{64}$"))
    file: str | Absent = ABSENT
    is_reference: bool | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = field(default=("path", "file"), compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Summary(Record):
    """An evaluation's pass counts, score and speedup (summary.py)."""

    status: Status = field(metadata=_schema(enum=list(SUMMARY_STATUSES)))
    tests_passed: int = field(metadata=_NONNEG)
    tests_total: int = field(metadata=_NONNEG)
    benchmarks_passed: int | Absent = field(default=ABSENT, metadata=_NONNEG)
    benchmarks_total: int | Absent = field(default=ABSENT, metadata=_NONNEG)
    score_us: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    score_ci95_us: tuple[float, ...] | None | Absent = field(default=ABSENT, metadata=_NONNEG_ITEMS)
    reference_score_us: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    speedup: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)
    speedup_geomean: float | None | Absent = field(default=ABSENT, metadata=_NONNEG)  # older
    # The run's speedup interval (stats/scoring.speedup_interval): tied_with_reference is
    # lo <= 1 <= hi. Null where unbounded above (the score's interval reaches 0).
    speedup_ci95: tuple[float, ...] | None | Absent = field(default=ABSENT, metadata=_PAIR)
    tied_with_reference: bool | None | Absent = ABSENT
    # The share of benchmark cases correct and faster than p x beyond noise (the lower end of
    # the case's speedup interval above p; stats/scoring.fast_p). Records written before
    # fast_p_raw existed hold KernelBench's raw shares here.
    fast_p: dict[str, float] | None | Absent = field(default=ABSENT, metadata=_NONNEG_VALUES)
    # KernelBench's definition (the point speedup above p, noise counted as wins).
    fast_p_raw: dict[str, float] | None | Absent = field(default=ABSENT, metadata=_NONNEG_VALUES)
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class Evaluation(Record):
    """One submission judged on one leaderboard."""

    leaderboard: Leaderboard
    submission: Submission
    cases: tuple[CaseRecord, ...]
    summary: Summary
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class Environment(Record):
    """devices.environment(): the keys every record has; the rest stay in `extra`."""

    device: str = field(metadata=_NONEMPTY)
    device_kind: Literal["cuda", "cpu"]
    python: str
    gpu_name: str | None | Absent = ABSENT
    driver: str | None | Absent = ABSENT
    cuda: str | None | Absent = ABSENT
    torch: str | None | Absent = ABSENT
    triton: str | None | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = field(
        default=("device", "device_kind", "gpu_name", "gpu_count", "driver", "cuda", "torch"),
        compare=False,
        repr=False,
    )


@dataclass(frozen=True, slots=True)
class Harness(Record):
    version: str | Absent = ABSENT
    commit: str | None | Absent = ABSENT
    timing_method: int | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class Provenance(Record):
    """Added by CI when a run is filed (`kernelboard results add --pr ...`)."""

    repository: str | None | Absent = ABSENT
    pull_request: int | None | Absent = ABSENT
    commit: str | None | Absent = ABSENT
    url: str | None | Absent = ABSENT
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = _order()


@dataclass(frozen=True, slots=True)
class Run(Record):
    """A results document: one pytest run, or (filed) one evaluation of it."""

    run_id: str = field(metadata=_schema(pattern="^[0-9a-f]{32}$"))
    created_at: str = field(metadata=_schema(format="date-time"))
    mode: Mode
    environment: Environment
    evaluations: tuple[Evaluation, ...]
    schema: str = field(default=SCHEMA_ID, metadata=_schema(const=SCHEMA_ID, required=True))
    harness: Harness | Absent = ABSENT
    seeds: dict[str, Any] | Absent = ABSENT
    kernelbench: dict[str, Any] | Absent = ABSENT  # KernelBench's fast_p over problems
    provenance: Provenance | Absent = ABSENT
    evaluation_index: int | Absent = field(default=ABSENT, metadata=_NONNEG)  # filed records
    extra: Mapping[str, Any] = _bookkeeping()
    key_order: tuple[str, ...] = field(
        default=(
            "schema",
            "run_id",
            "created_at",
            "mode",
            "harness",
            "environment",
            "seeds",
            "evaluations",
        ),
        compare=False,
        repr=False,
    )


# ---------------------------------------------------------------- the schema

_SCALARS: dict[Any, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def type_schema(tp: Any) -> dict[str, Any]:
    """The JSON schema of one field type (Absent, an optional key, is the caller's matter)."""
    members = [m for m in _members(tp) if m is not Absent]
    nullable = type(None) in members
    members = [m for m in members if m is not type(None)]
    if len(members) != 1:
        raise TypeError(f"cannot express {tp!r} in JSON schema")
    (tp,) = members
    origin = typing.get_origin(tp)
    if tp is Any or origin in (dict, Mapping) and typing.get_args(tp)[1] is Any:
        schema: dict[str, Any] = {} if tp is Any else {"type": "object"}
    elif isinstance(tp, type) and issubclass(tp, Record):
        schema = json_schema(tp)
    elif isinstance(tp, type) and issubclass(tp, enum.Enum) or origin is Literal:
        values = [m.value for m in tp] if origin is not Literal else list(typing.get_args(tp))
        return {"enum": values + [None] if nullable else values}
    elif origin is tuple:
        schema = {"type": "array", "items": type_schema(typing.get_args(tp)[0])}
    elif origin in (dict, Mapping):
        schema = {"type": "object", "additionalProperties": type_schema(typing.get_args(tp)[1])}
    elif tp in _SCALARS:
        schema = {"type": _SCALARS[tp]}
    else:
        raise TypeError(f"cannot express {tp!r} in JSON schema")
    if nullable and "type" in schema:
        schema["type"] = [schema["type"], "null"]
    return schema


@functools.cache
def _object_schema(cls: type[Record]) -> dict[str, Any]:
    hints = _hints(cls)
    required, properties = [], {}
    for f in _data_fields(cls):
        constraints = dict(f.metadata.get("schema", {}))
        if f.default is dataclasses.MISSING or constraints.pop("required", False):
            required.append(f.name)
        properties[f.name] = _merge(type_schema(hints[f.name]), constraints)
    return {"type": "object", "required": required, "properties": properties}


def json_schema(cls: type[Record]) -> dict[str, Any]:
    """The JSON schema of one record class (unknown keys allowed: readers ignore them)."""
    return copy.deepcopy(_object_schema(cls))


def run_schema() -> dict[str, Any]:
    """The schema of a whole results document, "kernelboard.run/1"."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": SCHEMA_ID,
        **json_schema(Run),
    }
