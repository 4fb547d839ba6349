"""Measurements -> result records: collect case outcomes into one results document per run."""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import TIMING_METHOD, __version__
from ..judge import devices
from ..judge.core import CaseOutcome
from ..spec.cases import BENCHMARK, TEST, Case
from ..spec.discovery import SubmissionRef
from ..spec.task import TaskSpec
from ..stats.speed_of_light import with_speed_of_light
from ..vocabulary import Lang, RankingBy
from .records import new_run, sha256_file
from .reference_runs import reference_ref, stamp_measured
from .result_model import (
    ABSENT,
    CaseKind,
    CaseRecord,
    Evaluation,
    Harness,
    Leaderboard,
    Profile,
    ReferenceRun,
    Run,
    Status,
    Submission,
    Timing,
)
from .summary import evaluation_summary

MODIFIED = "+modified"  # after a commit: the harness's files differ from it


@functools.cache
def harness_commit() -> str | None:
    """The commit of the checkout the harness runs from, when it is one."""
    return checkout_commit(Path(__file__).resolve().parent.parent)


def checkout_commit(package: Path) -> str | None:
    """HEAD of the checkout holding `package`, with MODIFIED appended where a file of the
    package differs from it or is not in it: a run from uncommitted code, or from a copy of a
    newer tree beside an older `.git`, is not that commit's to reproduce."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=package, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--", ".")
    return head + MODIFIED if changed else head


def _relative(path: Path, root: Path | None) -> str:
    if root is not None:
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            pass
    return path.as_posix()


@dataclass
class _Pending:
    """An evaluation being recorded: its cases arrive one by one; the summary comes last."""

    leaderboard: Leaderboard
    submission: Submission
    cases: list[CaseRecord] = field(default_factory=list)


def _timing(timing: dict[str, Any] | None) -> Timing | None:
    """The measurement's timing record (measure.py) in the model, with its speed of light."""
    timing = with_speed_of_light(timing)
    return None if timing is None else Timing.from_json(timing)


_CASE_KEYS = ("kind", "index", "id", "spec", "seed", "status", "message", "duration_s")
_CASE_KEYS += ("timing", "reference_timing", "speedup")


def case_record(case: Case, outcome: CaseOutcome) -> CaseRecord:
    """One case's record; the outcome's details (reference_run, profile, ...) after the rest."""
    details = dict(outcome.details)
    reference_run = details.pop("reference_run", None)
    profile = details.pop("profile", None)
    return CaseRecord(
        kind=CaseKind(case.kind),
        index=case.index,
        id=case.id,
        spec=case.arguments(0),
        seed=case.seed,
        status=Status(outcome.status),
        message=outcome.message,
        duration_s=round(outcome.duration_s, 6),
        timing=_timing(outcome.timing),
        reference_timing=_timing(outcome.reference_timing),
        speedup=outcome.speedup,
        reference_run=ABSENT if reference_run is None else ReferenceRun.from_json(reference_run),
        profile=ABSENT if profile is None else Profile.from_json(profile),
        extra=details,
        key_order=_CASE_KEYS + tuple(outcome.details),
    )


class RunRecorder:
    """Accumulates evaluations during a pytest run and writes the results document."""

    def __init__(self, mode: str, root: Path | None = None):
        self.mode = mode
        self.root = root
        self.seeds: dict[str, dict[str, int]] = {}
        self._evaluations: dict[tuple[str, str], _Pending] = {}
        self._tasks: dict[str, TaskSpec] = {}

    def evaluation(
        self, task: TaskSpec, ref: SubmissionRef, is_reference: bool = False
    ) -> _Pending:
        key = (task.name, str(ref.path))
        if key not in self._evaluations:
            self._tasks[task.name] = task
            self._evaluations[key] = _Pending(
                Leaderboard(
                    name=task.name,
                    path=_relative(task.root, self.root),
                    ranking_by=RankingBy(task.ranking_by),
                    lang=Lang(task.lang),
                ),
                Submission(
                    path=_relative(ref.path, self.root),
                    file=ref.display,
                    author=ref.author,
                    sha256=sha256_file(ref.path),
                    is_reference=is_reference,
                ),
            )
        return self._evaluations[key]

    def record(self, task: TaskSpec, ref: SubmissionRef, case: Case, outcome: CaseOutcome) -> None:
        self.evaluation(task, ref).cases.append(case_record(case, outcome))

    def record_reference(self, task: TaskSpec, case: Case, timing: dict[str, Any]) -> None:
        """A reference timing measured in this run: a case of the reference's own evaluation,
        which `kernelboard results add` files as a reference run (reference_runs.py)."""
        ref = reference_ref(task)
        self.evaluation(task, ref, is_reference=True)
        duration = timing.get("elapsed_s") or 0.0
        self.record(task, ref, case, CaseOutcome("passed", timing=timing, duration_s=duration))

    def forget(self, task: TaskSpec, ref: SubmissionRef) -> None:
        """Drop an evaluation (a batch builds its own records and keeps no document)."""
        self._evaluations.pop((task.name, str(ref.path)), None)

    @property
    def empty(self) -> bool:
        return not self._evaluations

    def run(self) -> Run:
        """The run as a typed document (reference runs not yet stamped: see document())."""
        harness = Harness(version=__version__, commit=harness_commit(), timing_method=TIMING_METHOD)
        order = {TEST: 0, BENCHMARK: 1}
        evaluations = []
        # Submissions first, reference runs after them: readers of a PR's run take evaluation 0.
        for pending in sorted(self._evaluations.values(), key=lambda e: e.submission.is_reference):
            cases = sorted(pending.cases, key=lambda c: (order[c.kind], c.index))
            task = self._tasks[pending.leaderboard.name]
            summary = evaluation_summary([c.to_json() for c in cases], task, self.mode)
            evaluations.append(
                Evaluation(pending.leaderboard, pending.submission, tuple(cases), summary)
            )
        return replace(
            new_run(self.mode, self.environment(), harness),
            seeds=self.seeds,
            evaluations=tuple(evaluations),
        )

    def document(self) -> dict[str, Any]:
        doc = self.run().to_json()
        # Filled in on the JSON: both need the finished document's run id and file names.
        stamp_measured(doc)
        from ..importers.kernelbench import run_fast_p  # KernelBench's fast_p, over problems

        if (kernelbench := run_fast_p(doc["evaluations"])) is not None:
            doc["kernelbench"] = kernelbench
        return doc

    def environment(self) -> dict[str, Any]:
        """devices.environment(), its device carrying the GPU count of a multi-GPU run
        ('H200x2'): the most ranks any case that ran used."""
        env = devices.environment()
        ranks = [
            int(case.spec.get("world_size") or 1)
            for evaluation in self._evaluations.values()
            if self._tasks[evaluation.leaderboard.name].multi_gpu
            for case in evaluation.cases
            if case.status != Status.SKIPPED
        ]
        if max(ranks, default=1) > 1:
            env = {**env, "device": devices.device_label(max(ranks), env["device"])}
        return env
