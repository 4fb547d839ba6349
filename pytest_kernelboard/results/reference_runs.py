"""Reference runs: the reference is timed once per (leaderboard, device, harness, torch) and reused.

A reference run is an ordinary evaluation whose submission is the leaderboard's reference.py
(`submission.is_reference`, author "reference"). When a run has to time the reference, that
evaluation goes into the run's own results document after the submissions' evaluations, so
`kernelboard results add RUN.json` files it as one more append-only record:

    results/<leaderboard>/<device>/<stamp>-reference-<run_id>-<index>.json

Later runs look for a filed reference run with the same identity (`ReferenceIdentity`: the
leaderboard, the device and its GPU name, the harness version and timing method, the torch
version, the reference file's sha256) and take each case's reference timing from it instead of
timing the reference again. A case is matched by kind, index and arguments without the seed: in
leaderboard mode the seeds change every run, but the reference's time does not depend on the
random values. A case with no stored timing is measured in the run (and filed with it);
`--kb-remeasure-reference` measures every case again. Each case record says in
`reference_run` which reference run its speedup came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import TIMING_METHOD, __version__
from ..spec.cases import BENCHMARK, Case
from ..spec.discovery import SubmissionRef
from ..spec.task import TaskSpec
from .records import RecordError, parse_run, sha256_file
from .result_model import Status
from .store import RESULTS_DIR, record_relpath, slug

REFERENCE_AUTHOR = "reference"
REFERENCE_MODULE = "reference.py"
MEASURED = "measured"  # timed in this run
STORED = "store"  # taken from a filed reference run
PER_CALL_FIELDS = ("samples_us", "wall_us")


def reference_file(task: TaskSpec) -> Path:
    """The leaderboard's reference.py as task.yml lists it."""
    for name, path in task.support_files():
        if name == REFERENCE_MODULE:
            return path
    return task.root / REFERENCE_MODULE


def reference_ref(task: TaskSpec) -> SubmissionRef:
    """The reference as a submission of its own leaderboard, for its evaluation record."""
    return SubmissionRef(reference_file(task), task.name, REFERENCE_AUTHOR)


def case_key(kind: str, index: int, spec: Mapping[str, Any]) -> str:
    """A case's identity for reuse: kind, index and arguments, without the (per-run) seed."""
    arguments = {k: v for k, v in spec.items() if k != "seed"}
    return json.dumps([kind, index, arguments], sort_keys=True, default=str)


@dataclass(frozen=True)
class ReferenceIdentity:
    """What a reference timing depends on; a stored reference run is reused only on a match."""

    leaderboard: str
    device: str
    gpu_name: str | None
    harness_version: str
    timing_method: int
    torch: str | None
    reference_sha256: str

    @classmethod
    def current(cls, task: TaskSpec, environment: Mapping[str, Any]) -> ReferenceIdentity:
        """This run's identity for `task` (environment: devices.environment())."""
        return cls(
            leaderboard=task.name,
            device=environment["device"],
            gpu_name=environment.get("gpu_name"),
            harness_version=__version__,
            timing_method=TIMING_METHOD,
            torch=environment.get("torch"),
            reference_sha256=sha256_file(reference_file(task)),
        )

    def matches(self, run: Mapping[str, Any], evaluation: Mapping[str, Any]) -> bool:
        environment = run.get("environment") or {}
        harness = run.get("harness") or {}
        submission = evaluation.get("submission") or {}
        return (
            submission.get("is_reference") is True
            and (evaluation.get("leaderboard") or {}).get("name") == self.leaderboard
            and submission.get("sha256") == self.reference_sha256
            and environment.get("device") == self.device
            and environment.get("gpu_name") == self.gpu_name
            and environment.get("torch") == self.torch
            and harness.get("version") == self.harness_version
            and harness.get("timing_method") == self.timing_method
        )

    def provenance(
        self, source: str, file: str | None = None, run: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The `reference_run` field of a case record."""
        return {
            "source": source,
            "file": file,
            "run_id": (run or {}).get("run_id"),
            "created_at": (run or {}).get("created_at"),
            "harness_version": self.harness_version,
            "timing_method": self.timing_method,
            "torch": self.torch,
        }


@dataclass(frozen=True)
class ReferenceTiming:
    """One case's reference timing record and where it came from."""

    timing: dict[str, Any]
    provenance: dict[str, Any]

    @property
    def summary(self) -> dict[str, Any]:
        """The timing without its per-call lists, for a submission's case record: the
        reference run (`provenance.file`) keeps every sample once."""
        return {k: v for k, v in self.timing.items() if k not in PER_CALL_FIELDS}


def stored_reference_timings(root: Path, identity: ReferenceIdentity) -> dict[str, ReferenceTiming]:
    """Case key -> the newest matching stored timing of a passed reference case.

    Only records named like a reference run are read; each must be a valid results document.
    Several matching reference runs (say, one filed partially) merge, the newest winning.
    """
    folder = Path(root) / RESULTS_DIR / slug(identity.leaderboard) / slug(identity.device)
    if not folder.is_dir():
        return {}
    runs = []
    for path in folder.glob(f"*-{slug(REFERENCE_AUTHOR)}-*.json"):
        try:
            run = parse_run(json.loads(path.read_text()))
        except (OSError, ValueError, RecordError):
            continue  # not a filed record (results add validates everything it files)
        runs.append((run.created_at, path.relative_to(root).as_posix(), run))
    found: dict[str, ReferenceTiming] = {}
    for _, rel, run in sorted(runs, key=lambda item: (item[0], item[1])):
        as_json = run.to_json()  # identity.matches and provenance read the stored shape
        for evaluation, stored in zip(run.evaluations, as_json["evaluations"], strict=True):
            if not identity.matches(as_json, stored):
                continue
            for case in evaluation.cases:
                if case.kind != BENCHMARK or case.status != Status.PASSED or not case.timing:
                    continue
                key = case_key(case.kind, case.index, case.spec)
                found[key] = ReferenceTiming(
                    case.timing.to_json(), identity.provenance(STORED, file=rel, run=as_json)
                )
    return found


class ReferenceUnavailable(Exception):
    """The reference could not be timed on a case; the message says why."""


# Several cases' reference timings in one go: per case a timing, None, or why it has none.
MeasureMany = Callable[
    [TaskSpec, Sequence[Case]], Sequence["dict[str, Any] | None | ReferenceUnavailable"]
]


class ReferenceTimings:
    """Per pytest run: each case's reference timing, from the store or measured once here.

    `measure(task, case)` times the reference in this run (None, or ReferenceUnavailable with
    the reason, when it cannot be timed); `on_measured(task, case, timing)` records a fresh
    measurement in the run's document. `measure_many(task, cases)`, where given, times several
    cases in one go (per case a timing, None, or ReferenceUnavailable): each of the reference's
    fresh workers times them all, so a run that times the reference in three workers starts
    three for a leaderboard, not three for each of its cases.
    """

    def __init__(
        self,
        environment: Callable[[], Mapping[str, Any]],
        measure: Callable[[TaskSpec, Case], dict[str, Any] | None],
        on_measured: Callable[[TaskSpec, Case, dict[str, Any]], None],
        store_root: Callable[[TaskSpec], Path | None],
        remeasure: bool = False,
        measure_many: MeasureMany | None = None,
    ):
        self._environment = environment
        self._measure = measure
        self._measure_many = measure_many
        self._on_measured = on_measured
        self._store_root = store_root
        self.remeasure = remeasure
        self._identities: dict[str, ReferenceIdentity] = {}
        self._stored: dict[str, dict[str, ReferenceTiming]] = {}
        self._timings: dict[tuple[str, str], ReferenceTiming | None] = {}
        self._failures: dict[tuple[str, str], str] = {}  # why a case's reference is untimed
        self.measured_cases = 0  # reference cases timed in this run

    def identity(self, task: TaskSpec) -> ReferenceIdentity:
        if task.name not in self._identities:
            self._identities[task.name] = ReferenceIdentity.current(task, self._environment())
        return self._identities[task.name]

    def _stored_for(self, task: TaskSpec) -> dict[str, ReferenceTiming]:
        if task.name not in self._stored:
            root = self._store_root(task)
            self._stored[task.name] = (
                {}
                if self.remeasure or root is None
                else stored_reference_timings(root, self.identity(task))
            )
        return self._stored[task.name]

    def get(
        self, task: TaskSpec, case: Case, alongside: Sequence[Case] = ()
    ) -> ReferenceTiming | None:
        """The case's reference timing: stored if a matching reference run has it, else timed
        now (once per run and case). Where it is timed now, so are the cases of `alongside`
        that nothing has settled yet (the other timed cases the run will judge), in the same
        workers (`measure_many`)."""
        key = self.key(task, case)
        if key not in self._timings:
            stored = self._stored_for(task).get(key[1])
            if stored is not None:
                self._timings[key] = stored
            else:
                together = {key: case}
                for other in alongside:
                    if other.kind == case.kind and not self.settled(task, other):
                        together.setdefault(self.key(task, other), other)
                self._measure_now(task, list(together.values()))
        return self._timings[key]

    def _measure_now(self, task: TaskSpec, cases: list[Case]) -> None:
        """Time the reference on `cases` in this run and keep each case's timing or failure."""
        results: list[dict[str, Any] | None | ReferenceUnavailable]
        if self._measure_many is not None and len(cases) > 1:
            results = list(self._measure_many(task, cases))
        else:
            results = []
            for case in cases:
                try:
                    results.append(self._measure(task, case))
                except ReferenceUnavailable as exc:
                    results.append(exc)
        for case, result in zip(cases, results, strict=True):
            key = self.key(task, case)
            self._timings[key] = None
            if isinstance(result, ReferenceUnavailable):
                self._failures[key] = str(result)
            elif result is not None:
                self.measured_cases += 1
                self._on_measured(task, case, result)
                self._timings[key] = ReferenceTiming(
                    result, self.identity(task).provenance(MEASURED)
                )

    def settled(self, task: TaskSpec, case: Case) -> bool:
        """Whether the case's reference timing is known without timing it now (found in a
        stored run, or timed, or failed, in this one)."""
        key = self.key(task, case)
        return key in self._timings or key[1] in self._stored_for(task)

    def failure(self, task: TaskSpec, case: Case) -> str | None:
        """Why the reference could not be timed on `case` in this run, if it could not."""
        return self._failures.get(self.key(task, case))

    @staticmethod
    def key(task: TaskSpec, case: Case) -> tuple[str, str]:
        """A case's identity in a run: its leaderboard and case_key (no per-run seed)."""
        return task.name, case_key(case.kind, case.index, case.arguments(0))


def stamp_measured(doc: dict[str, Any]) -> None:
    """Point the cases of a finished results document at the reference runs measured in it.

    Run id, date and the file `kernelboard results add` will give the reference evaluation are
    only known once the document exists.
    """
    files = {}
    for index, evaluation in enumerate(doc["evaluations"]):
        if evaluation["submission"].get("is_reference"):
            files[evaluation["leaderboard"]["name"]] = record_relpath(doc, index).as_posix()
    for evaluation in doc["evaluations"]:
        for case in evaluation["cases"]:
            provenance = case.get("reference_run")
            if provenance and provenance.get("source") == MEASURED:
                provenance.update(
                    run_id=doc["run_id"],
                    created_at=doc["created_at"],
                    file=files.get(evaluation["leaderboard"]["name"]),
                )
