"""The evaluation of one submission against one leaderboard: build, correctness cases, timed
cases with the reference's timings reused, profiles, and the records.

The pytest plugin turns each case into a test item that calls `run(case)`; the batch judge
calls it for every case of every candidate. Both get the same `CaseOutcome`, recorded the same
way; only what they show differs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..judge.core import CaseOutcome, SubmissionJudge, outcome_speedup
from ..judge.distributed import make_judge
from ..judge.evalpy import EvalPyJudge, is_evalpy_task
from ..results.reference_runs import ReferenceTiming
from ..spec.cases import TEST, Case, task_cases, with_run_seed
from ..spec.discovery import SubmissionRef
from ..spec.task import TaskSpec
from ..stats import between_workers
from ..stats.between_workers import combined_workers
from ..stats.paired import run_to_run_half_log, split_interval
from ..stats.scoring import rank_us
from ..supervisor.client import WorkerProcess
from ..supervisor.pool import WorkerPool
from .messages import explain
from .paired import PairedTiming

if TYPE_CHECKING:
    from .session import JudgingSession


# Turns pair two host-bound times so that the host's speed at the moment cancels in their
# ratio. A candidate whose timed calls were the GPU's has no host time to cancel it with: its
# pair ratios would carry one reference worker's host time at that moment (on an H200, a hack
# that spends 1.05 ms on the GPU read 0.176x and 0.119x in two runs, its turns' reference 185
# and 124 µs, the batch's five reference workers 209 and 216 µs). Its speedup is taken against
# the run's timing of the reference in several workers instead, as a case timed alone is, where
# the run has one: their spread then says how far the reference's host time moves. A run that
# timed the reference in one worker knows that only from the turns, and keeps their ratio.
TURNS_NOT_USED = (
    "its calls were the GPU's, not the host's: the speedup is against the reference's timing "
    "in the run's workers, not the turns' ratio"
)


def _device_bound(outcome: CaseOutcome) -> bool:
    """Whether a passed timing's calls were mostly the GPU's (between_workers.host_bound False;
    a host clock's, where every time is the host's, is not)."""
    return outcome.passed and between_workers.host_bound(outcome.timing) is False


def _turns_cancel_nothing(outcome: CaseOutcome, run: ReferenceTiming | None) -> bool:
    """Whether a case timed in turns takes the run's reference timing instead of the turns'
    ratio: its calls were the GPU's, and the run timed the reference in several workers."""
    several = run is not None and between_workers.measured_spread(run.timing) is not None
    return several and _device_bound(outcome)


class SubmissionEvaluation:
    """One submission judged against one leaderboard; owns the worker for its cases."""

    def __init__(self, session: JudgingSession, task: TaskSpec, ref: SubmissionRef):
        self.session = session
        self.task = task
        self.ref = ref
        self._judge: SubmissionJudge | EvalPyJudge | None = None
        self.first_failure: tuple[Case, CaseOutcome] | None = None  # for "same as ..." notes

    @property
    def judge(self) -> SubmissionJudge | EvalPyJudge:
        if self._judge is None and is_evalpy_task(self.task):  # its own eval.py judges it
            self._judge = EvalPyJudge(
                self.task,
                self.ref.path,
                self.session.use_cuda,
                self.session.mode,
                self.session.seeds_for(self.task),
            )
        if self._judge is None:
            self._judge = make_judge(
                self.task,
                self.session.modules(self.task),
                self.ref.path,
                self.session.use_cuda,
                self.session.pool,
                reference_ranks=self.session.reference_ranks(self.task),
            )
            self._judge.stop_at_first_crash = self.session.stop_at_first_crash
        return self._judge

    def prepare(self) -> None:
        """Start the worker and import the submission (its builds included) now, ahead of the
        first case; a failure here is reported by that case, as it would be anyway."""
        judge = self.judge
        if isinstance(judge, SubmissionJudge):
            judge.preload()

    def workers(self) -> list[WorkerProcess]:
        """The live workers this evaluation holds (none before its first case)."""
        judge = self._judge
        worker = getattr(judge, "_worker", None)
        return [worker] if worker is not None and worker.alive else []

    def cases(self) -> list[Case]:
        """The cases this mode runs, with this run's seeds (leaderboard mode draws fresh ones)."""
        seeds = self.session.seeds_for(self.task)
        return [with_run_seed(case, seeds) for case in task_cases(self.task)]

    def run(self, case: Case, checked: CaseOutcome | None = None) -> CaseOutcome:
        """Judge one case as the session's mode asks, record it, and return its outcome.
        checked: a timed case's correctness call, made earlier by correctness() and passed."""
        if case.kind == TEST:
            outcome = self.correctness(case)
        elif self.session.mode == "profile":
            outcome = self._profile(case)
        else:
            outcome = self._benchmark(case, checked)
        return self.settled(case, outcome)

    def correctness(self, case: Case) -> CaseOutcome:
        """The case's correctness call on its own input, not yet explained or recorded
        (settled() does that): a test case's whole judging; for a timed case, its check made
        ahead of its timing (the batch makes it beside other candidates' work), which, passed,
        goes to run(case, checked)."""
        return self.judge.check_case(case, self.session.timeout(self.task, case.kind))

    def settled(self, case: Case, outcome: CaseOutcome) -> CaseOutcome:
        """The case's outcome explained and recorded."""
        outcome = explain(self, case, outcome)
        self.session.recorder.record(self.task, self.ref, case, outcome)
        if not outcome.passed and outcome.status != "skipped" and self.first_failure is None:
            self.first_failure = (case, outcome)
        return outcome

    def _benchmark(self, case: Case, checked: CaseOutcome | None = None) -> CaseOutcome:
        session, task = self.session, self.task
        paired = None
        if self._may_pair():
            # The check first, as a batch makes it: the reference is timed (where this run times
            # it) after a passed output taught its workers the reply's size, and a case that
            # fails its check needs no reference.
            checked = checked or self.correctness(case)
            paired = self._paired_for(case) if checked.passed else None
        outcome = self._timed_once(case, checked, paired)
        if paired is not None and paired.ratio is not None:
            if not _turns_cancel_nothing(outcome, paired.run):
                return self._in_turns(case, outcome, paired)
            outcome.details["turns_not_used"] = TURNS_NOT_USED
        if paired is not None and paired.unpaired:
            outcome.details["turns_unpaired"] = paired.unpaired
        workers, why = self._workers_for(outcome) if outcome.passed else (1, "")
        if workers > 1:
            outcome = self._timed_in_workers(case, outcome, workers, why)
        found = self._reference_found(case) if outcome.reference_timing else None
        if found is not None:  # which reference run the speedup came from; it keeps the samples
            outcome.reference_timing = found.summary
            outcome.details["reference_run"] = dict(found.provenance)
            if outcome.timing and "rank_us_by_worker" not in outcome.timing:
                # One worker's time: the reference's workers say how far it moves.
                outcome.timing = between_workers.one_worker(outcome.timing, found.summary)
        failure = session.references.failure(task, case)
        if outcome.passed and found is None and failure:
            outcome.details["reference_error"] = failure
        return outcome

    def _timed_once(
        self, case: Case, checked: CaseOutcome | None = None, paired: PairedTiming | None = None
    ) -> CaseOutcome:
        """The case checked (unless `checked`) and timed in this evaluation's worker (in turns
        with the reference's where `paired`)."""
        session, task = self.session, self.task
        return self.judge.benchmark_case(
            case,
            session.timeout(task, case.kind),
            session.plan(task),
            progress=session._progress_for(task, case, reference=False),
            reference=self._reference_timing,
            checked=checked,
            timer=paired,
        )

    def _may_pair(self) -> bool:
        """Whether a timed case of this evaluation may be timed in turns with the reference:
        the session asks for turns (`paired_turns`), the judge is kernelboard's own for one GPU
        (not a multi-GPU case's rank groups, not an eval.py's), and calls can be host-bound
        (a GPU; on a CPU every time is the host's) or the session pairs every case."""
        session = self.session
        if not session.paired_turns or self.task.multi_gpu:
            return False
        if not isinstance(self.judge, SubmissionJudge):
            return False
        return session.pair_every_case or session.use_cuda

    def _paired_for(self, case: Case) -> PairedTiming | None:
        """The timing in turns with the reference, where the reference's timing of the case is
        host-bound (or the session pairs every case); None where the case is timed alone."""
        session, task = self.session, self.task
        judge = self.judge
        assert isinstance(judge, SubmissionJudge)  # _may_pair
        found = self._reference_found(case)
        if found is None:
            return None
        if not (session.pair_every_case or between_workers.host_bound(found.summary)):
            return None
        return PairedTiming(
            judge,
            session.reference_judge(task),
            session.timeout(task, case.kind),
            pairs=session.paired_turns,
            calls=session.calls_per_turn,
            noise=session.turn_noise(task, case),
            run=found,
        )

    def _in_turns(self, case: Case, outcome: CaseOutcome, paired: PairedTiming) -> CaseOutcome:
        """A case timed in turns: the reference's timing is that of the same turns, each
        timing's interval half the pair's, so the speedup's interval is the pair's, widened
        where the run timed the reference in several workers by what moves a speedup in turns
        from one run to the next (stats/paired.run_to_run_half_log)."""
        assert paired.ratio is not None and paired.reference is not None
        if not outcome.passed:
            return outcome
        half = paired.ratio.half_log
        between_runs = self._between_runs(case, outcome, paired)
        if between_runs is not None:
            half = math.hypot(half, between_runs)
        outcome.timing = split_interval(outcome.timing, half)
        outcome.reference_timing = split_interval(paired.reference, half)
        outcome.speedup = outcome_speedup(outcome)
        # The reference's time is of these turns, not of the run's timing it was paired on.
        run = {"timed_in_turns": True}
        if paired.run is not None:
            run = {**paired.run.provenance, **run, "run_us": round(rank_us(paired.run.summary), 4)}
        outcome.details["reference_run"] = run
        return outcome

    def _between_runs(self, case: Case, outcome: CaseOutcome, paired: PairedTiming) -> float | None:
        """The run-to-run part of a speedup in turns (log half-width), noted in the timing's
        `turns` account with the reference's spread it rests on; None where the run timed the
        reference in one worker, which says nothing of how far its time moves."""
        assert paired.ratio is not None and outcome.timing is not None
        if paired.run is None or between_workers.measured_spread(paired.run.summary) is None:
            return None
        workers_us = paired.run.summary["rank_us_by_worker"]
        spread = self.session.reference_spread(self.task, case, workers_us)
        spread.add(paired.ratio.reference_us)
        measured = spread.measured
        if measured is None:
            return None
        sd, df = measured
        between_runs = run_to_run_half_log(paired.ratio.speedup, sd, df)
        outcome.timing["turns"] = {
            **outcome.timing.get("turns", {}),
            "reference_spread": round(sd, 5),
            "reference_spread_df": df,
            "run_to_run_half_log": round(between_runs, 5),
        }
        return between_runs

    def _reference_found(self, case: Case) -> ReferenceTiming | None:
        """The reference's timing of the case (ReferenceTimings.get). Where the run times it
        now, it times the run's other timed cases of this evaluation with it (the reference's
        workers start once for all, session.timed_alongside), and this evaluation's worker is
        stopped meanwhile (SubmissionJudge.stopped): nothing of the submission runs beside the
        reference's calls to slow them."""
        references, judge = self.session.references, self._judge
        if references.settled(self.task, case) or not isinstance(judge, SubmissionJudge):
            return references.get(self.task, case)
        alongside = self.session.timed_alongside(self.task, self.cases())
        with judge.stopped():
            return references.get(self.task, case, alongside)

    def _workers_for(self, outcome: CaseOutcome) -> tuple[int, str]:
        """How many fresh workers time a passed case in all, and why more than one: the
        session's candidate_workers, or, where most of its calls were host-bound and the run
        times the reference in several workers, as many as the reference's. A host-bound
        call's time is its host time, which moves from one worker to the next by more than one
        worker's samples show (identity's 1 M-element copy, the reference's own code, read 10.3
        µs in one worker against 4.8 in the reference's three on an H100): the submission gets
        the reference's treatment, the median of as many workers, so identical code ties."""
        if self.task.multi_gpu or is_evalpy_task(self.task):
            return 1, ""  # a multi-rank case's time is each rank's; an eval.py times its own
        session = self.session
        if session.host_bound_workers > session.candidate_workers and between_workers.host_bound(
            outcome.timing
        ):
            return session.host_bound_workers, "as its first worker's calls were host-bound"
        return session.candidate_workers, f"one of {session.candidate_workers} workers"

    def _timed_in_workers(
        self, case: Case, first: CaseOutcome, workers: int, why: str
    ) -> CaseOutcome:
        """The case timed in fresh workers until `workers` have timed it, combined as the
        reference's workers are (between_workers.combined_workers); the first failure stands."""
        timings = [first.timing]
        for _ in range(workers - 1):
            self.judge.close()  # the next timing starts a fresh worker
            again = self._timed_once(case)
            if not again.passed:
                again.message = f"timed again in a fresh worker, {why}: {again.message}"
                return again
            timings.append(again.timing)
        first.timing, _ = combined_workers(timings)
        first.speedup = outcome_speedup(first)
        return first

    def _reference_timing(self, case: Case):
        found = self._reference_found(case)
        return found.timing if found else None

    def _profile(self, case: Case) -> CaseOutcome:
        """One profiled call; under Nsight Compute in a worker of its own, started under ncu."""
        session = self.session
        profiler = session.profiler
        report = profiler.report_path(self.task.name, self.ref.display, case.id)
        launcher = None if is_evalpy_task(self.task) else profiler.launcher(report)
        judge = self.judge
        if launcher is not None:
            modules = session.modules(self.task)
            judge = make_judge(
                self.task, modules, self.ref.path, True, WorkerPool(launcher=launcher)
            )
        try:
            return judge.profile_case(case, session.timeout(self.task, case.kind), profiler, report)
        finally:
            if judge is not self.judge:
                judge.close()

    def close(self) -> None:
        if self._judge is not None:
            self._judge.close()
            self._judge = None
