"""What one judging run shares across its submissions: the mode, the worker pool, the recorder,
each leaderboard's modules, the reference's timings and judges, the per-run seeds.

Both front-ends drive it: the pytest plugin (one session per pytest run) and the batch judge
(one per GPU for a whole batch of candidates). Nothing here knows pytest.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from ..judge import devices
from ..judge.core import Skip, SubmissionJudge
from ..judge.distributed import ReferenceRanks, make_judge
from ..judge.measure import TimingPlan, VerificationFailure, default_flush_bytes
from ..judge.profiling import CaseProfiler
from ..judge.reference_loader import LeaderboardModules
from ..presentation import fmt_us
from ..results.recorder import RunRecorder
from ..results.reference_runs import ReferenceTimings, ReferenceUnavailable
from ..spec.cases import BENCHMARK, Case, draw_run_seeds
from ..spec.discovery import SubmissionRef, find_repo_root
from ..spec.task import TaskSpec
from ..stats.between_workers import combined_workers, mostly_host_bound
from ..stats.paired import ReferenceSpread, TurnNoise
from ..stats.scoring import rank_us
from ..stats.stopping import StoppingRule, Warmup, budget_for_case
from ..supervisor.failures import WorkerFailure
from ..supervisor.pool import WorkerPool
from .limits import Limits
from .paired import CALLS, default_pairs
from .progress import Progress

DEFAULT_PRECISION = 0.005
# Where a reference worker's seconds go (time_reference's account): its start (taken from the
# pool, first answer), its import, the timing calibration, the timing loop, and the rest (the
# first call's set-up outside the loop, closing the worker before it, pausing others).
REFERENCE_PARTS = ("worker_start", "import", "calibrate", "timing", "other")


class JudgingSession:
    """Per run: the shared state every submission's evaluation uses."""

    def __init__(
        self,
        mode: str,
        root: Path | None = None,
        *,
        precision: float = DEFAULT_PRECISION,
        limits: Limits | None = None,
        replayed_seeds: dict[str, dict[str, int]] | None = None,
        remeasure_reference: bool = False,
        report_dir: Path | None = None,
        progress: Progress | None = None,
        reference_workers: int = 1,
        host_bound_reference_workers: int = 0,
        host_bound_workers: int = 1,
        candidate_workers: int = 1,
        measure_reference: Callable[[TaskSpec, Case], dict[str, Any] | None] | None = None,
        pool: WorkerPool | None = None,
        stop_at_first_crash: bool = False,
        paired_turns: int | None = None,
        calls_per_turn: int = CALLS,
        pair_every_case: bool = False,
    ):
        """reference_workers: how many fresh workers time the reference on a case, the one with
        the median time kept (_measure_reference). host_bound_reference_workers: how many in all
        time it on a case whose calls most of those workers found host-bound (0: no more than
        reference_workers; time_references). host_bound_workers: how many fresh workers
        time a submission's case whose calls were mostly host-bound in its first worker
        (SubmissionEvaluation, the same rule as the reference's). candidate_workers: how many
        fresh workers time every timed case of a submission, host-bound or not, combined as
        the reference's are (a sweep that asks whether identical code ties across processes).
        measure_reference: where a case's reference timing comes from instead (a batch's judges
        on several GPUs share one). pool: where workers come from (a batch's keeps an account
        of their start). stop_at_first_crash: a submission whose worker died on a case gets
        no fresh worker for its later cases (not run, saying which case crashed), as a batch
        judges (pytest judges each case whatever the others did). paired_turns: a timed case
        whose reference timing is host-bound is timed in this many pairs of turns of
        `calls_per_turn` calls with a worker of the reference's, which give its speedup
        (evaluation/paired.py; None: KERNELBOARD_PAIRED_TURNS, else PAIRS; 0: never).
        pair_every_case: every timed case is (tests on a CPU, where no timing is host-bound)."""
        self.mode = mode
        self.root = root
        self.precision = precision
        self.limits = limits or Limits()
        self.replayed_seeds = replayed_seeds or {}
        self.report_dir = report_dir
        self.progress = progress
        self.reference_workers = max(1, reference_workers)
        self.host_bound_reference_workers = host_bound_reference_workers
        self.host_bound_workers = max(1, host_bound_workers)
        self.candidate_workers = max(1, candidate_workers)
        self.stop_at_first_crash = stop_at_first_crash
        self.paired_turns = default_pairs() if paired_turns is None else paired_turns
        self.calls_per_turn = calls_per_turn
        self.pair_every_case = pair_every_case
        self._turn_noise: dict[tuple[str, str], TurnNoise] = {}
        self._reference_spread: dict[tuple[str, str], ReferenceSpread] = {}
        self.pool = pool or WorkerPool()
        self.recorder = RunRecorder(mode, root=root)
        self._modules: dict[Path, LeaderboardModules] = {}
        self._lock = threading.Lock()
        self._reference_judges: dict[str, SubmissionJudge] = {}
        self._reference_ranks: dict[str, ReferenceRanks] = {}
        self.references = ReferenceTimings(
            devices.environment,
            measure_reference or self._measure_reference,
            self.recorder.record_reference,
            lambda task: find_repo_root(task.root),
            remeasure=remeasure_reference,
            measure_many=None if measure_reference else self.measure_references,
        )
        # Per leaderboard, the timed cases (ReferenceTimings.key) this run will judge, where
        # the front-end knows them (pytest without xdist): the reference is timed on them
        # together, its workers started once for all. None: each case's on its own.
        self.timed_cases: dict[str, set[tuple[str, str]]] | None = None

    @property
    def use_cuda(self) -> bool:
        return devices.has_cuda()

    @functools.cached_property
    def profiler(self) -> CaseProfiler:
        return CaseProfiler.for_machine(
            self.report_dir or Path("kernelboard-profiles"), self.use_cuda
        )

    def evaluation(self, task: TaskSpec, ref: SubmissionRef):
        """The evaluation of one submission against one leaderboard in this session."""
        from .submission import SubmissionEvaluation

        return SubmissionEvaluation(self, task, ref)

    # -- per leaderboard -----------------------------------------------------------------------
    def modules(self, task: TaskSpec) -> LeaderboardModules:
        # A batch makes judges from threads that import ahead; one import of reference.py each.
        with self._lock:
            if task.path not in self._modules:
                self._modules[task.path] = LeaderboardModules(task)
            return self._modules[task.path]

    def timeout(self, task: TaskSpec, kind: str) -> float:
        return self.limits.timeout(task, kind, self.mode)

    def plan(self, task: TaskSpec) -> TimingPlan:
        budget = budget_for_case(self.timeout(task, BENCHMARK), max(len(task.benchmarks), 1))
        return TimingPlan(
            rule=StoppingRule(precision=self.precision, budget_s=budget),
            warmup=Warmup(),
            flush_bytes=default_flush_bytes() if self.use_cuda else 0,
        )

    def turn_noise(self, task: TaskSpec, case: Case) -> TurnNoise:
        """The run's pooled noise of the turns timed on the case (stats/paired.py)."""
        with self._lock:
            return self._turn_noise.setdefault(ReferenceTimings.key(task, case), TurnNoise())

    def reference_spread(
        self, task: TaskSpec, case: Case, workers_us: Sequence[float]
    ) -> ReferenceSpread:
        """How far the reference's time on the case has moved over the run (stats/paired.py),
        starting from its workers' times `workers_us` the first time it is asked for."""
        with self._lock:
            key = ReferenceTimings.key(task, case)
            if key not in self._reference_spread:
                self._reference_spread[key] = ReferenceSpread(workers_us)
            return self._reference_spread[key]

    def timed_alongside(self, task: TaskSpec, cases: Sequence[Case]) -> list[Case]:
        """Of `cases`, those this run will time (timed_cases), whose reference is timed with
        any one of them; none where the run did not say."""
        if self.timed_cases is None:
            return []
        chosen = self.timed_cases.get(task.name, set())
        return [case for case in cases if ReferenceTimings.key(task, case) in chosen]

    def seeds_for(self, task: TaskSpec) -> dict[str, int] | None:
        """Fresh per-run seeds in leaderboard mode (recorded in the results), else task.yml's."""
        if self.mode != "leaderboard":
            return None
        if task.name not in self.recorder.seeds:
            self.recorder.seeds[task.name] = draw_run_seeds(
                task, self.replayed_seeds.get(task.name)
            )
        return self.recorder.seeds[task.name]

    # -- the reference -------------------------------------------------------------------------
    def reference_judge(self, task: TaskSpec) -> SubmissionJudge:
        """The judge that runs the reference itself (timing it, self-checking it); one per run."""
        if task.name not in self._reference_judges:
            self._reference_judges[task.name] = make_judge(
                task, self.modules(task), None, self.use_cuda, self.pool, entry="ref_kernel"
            )
        return self._reference_judges[task.name]

    def reference_ranks(self, task: TaskSpec) -> ReferenceRanks | None:
        """A multi-GPU leaderboard's expected-output ranks, shared by its judges in this run."""
        if not task.multi_gpu:
            return None
        if task.name not in self._reference_ranks:
            self._reference_ranks[task.name] = ReferenceRanks(
                task, self.pool, self.use_cuda, self.modules(task)
            )
        return self._reference_ranks[task.name]

    def _measure_reference(
        self, task: TaskSpec, case: Case, account: dict[str, float] | None = None
    ) -> dict[str, Any] | None:
        """Times the reference on the case, the same way as a submission, in its own worker.

        Each of its timed calls is checked too, as a submission's are: not to doubt it, but so
        that both sides of a speedup are timed with the same judge work between calls (an
        expected output made and given back). That work was the one difference between the two
        when identical code at vectoradd 16384² read 605 µs against the unchecked reference's
        519 on the H100 (docs/timing.md)."""
        (chosen,) = self.measure_references(task, [case], account)
        if isinstance(chosen, ReferenceUnavailable):
            raise chosen
        return chosen

    def measure_references(
        self, task: TaskSpec, cases: Sequence[Case], account: dict[str, float] | None = None
    ) -> list[dict[str, Any] | ReferenceUnavailable]:
        """_measure_reference for several cases at once, each of the reference's workers timing
        them all (time_references): per case its median worker's timing, or why it has none."""
        measured: list[dict[str, Any] | ReferenceUnavailable] = []
        timed = self.time_references(
            task,
            cases,
            self.reference_workers,
            account=account,
            host_bound_workers=self.host_bound_reference_workers,
        )
        for case, records in zip(cases, timed, strict=True):
            if isinstance(records, ReferenceUnavailable):
                if self.progress is not None:
                    why = (str(records).strip().splitlines() or ["no reason given"])[-1]
                    self.progress.case_timed(reference_label(task, case), f"not timed: {why}")
                measured.append(records)
                continue
            chosen, relative_spread = combined_workers(records)
            if self.progress is not None and relative_spread is not None:
                self.progress.case_timed(
                    reference_label(task, case), reference_line(chosen, relative_spread)
                )
            measured.append(chosen)
        return measured

    def time_reference(
        self,
        task: TaskSpec,
        case: Case,
        workers: int,
        around: Callable[[], AbstractContextManager[Any]] = nullcontext,
        account: dict[str, float] | None = None,
    ) -> list[dict[str, Any]]:
        """The reference's timing record of the case in each of `workers` fresh workers
        (ReferenceUnavailable, with the reason, when one fails); time_references for one case."""
        (timed,) = self.time_references(task, [case], workers, around, account)
        if isinstance(timed, ReferenceUnavailable):
            raise timed
        return timed

    def time_references(
        self,
        task: TaskSpec,
        cases: Sequence[Case],
        workers: int,
        around: Callable[[], AbstractContextManager[Any]] = nullcontext,
        account: dict[str, float] | None = None,
        settled: Callable[[int, list[dict[str, Any]] | ReferenceUnavailable], None] | None = None,
        host_bound_workers: int = 0,
    ) -> list[list[dict[str, Any]] | ReferenceUnavailable]:
        """Per case, the reference's timing record in each of `workers` fresh workers, or
        ReferenceUnavailable with the reason where one failed it (no later worker times it).

        Each worker times every case still standing, one after another, as a candidate's one
        worker times all its cases: `workers` worker starts for a leaderboard, not one per case
        and worker (of GPU MODE's grayscale's 79.5 s on an H200, 16.7 s went to starting 30).
        `around()` is entered for each worker's timing (a batch pauses its other candidates'
        workers meanwhile). `account`, where given, gets the workers' seconds by
        REFERENCE_PARTS. `settled(i, result)` is told of case i as soon as its result is final
        (its last worker timed it, or a worker failed it), before the next case is timed: a
        GPU's judge hands each case's share on at once, so a candidate timed on another GPU
        does not wait for every case of the share (GPU MODE's eigh: 200 s).

        A case whose calls most of the `workers` found host-bound is timed in more,
        `host_bound_workers` in all (batch/reference_share.py, HOST_BOUND_REFERENCE_WORKERS,
        says why); it is final after the last of them."""
        judge = self.reference_judge(task)
        timed: list[list[dict[str, Any]] | ReferenceUnavailable] = [[] for _ in cases]
        tell = settled or (lambda i, result: None)
        most = max(workers, host_bound_workers)
        extended: set[int] = set()  # the cases timed in more workers, host-bound in most
        for index in range(most):
            standing = [
                i
                for i, so_far in enumerate(timed)
                if isinstance(so_far, list) and (index < workers or i in extended)
            ]
            if not standing:
                break
            began, before = time.perf_counter(), dict(judge.startup_s)
            if index:
                judge.close()  # the next timing starts a fresh worker
            timing_s = 0.0
            with around():
                for i in standing:
                    try:
                        record = self._timed_reference_case(judge, task, cases[i])
                    except (WorkerFailure, Skip, VerificationFailure) as exc:
                        # The submission's case stands without a speedup; the reason goes into
                        # its record.
                        timed[i] = ReferenceUnavailable(str(exc) or type(exc).__name__)
                        tell(i, timed[i])
                        continue
                    timing_s += float(record.get("elapsed_s") or 0.0)
                    so_far = timed[i]
                    assert isinstance(so_far, list)  # standing: no worker failed it
                    so_far.append(record)
                    if index == workers - 1 and most > workers and mostly_host_bound(so_far):
                        extended.add(i)
                        continue
                    if index == workers - 1 or index == most - 1:
                        tell(i, so_far)
            if account is not None:
                spent = {part: judge.startup_s[part] - before[part] for part in before}
                spent["timing"] = timing_s
                spent["other"] = time.perf_counter() - began - sum(spent.values())
                for part in REFERENCE_PARTS:
                    account[part] = account.get(part, 0.0) + max(spent[part], 0.0)
        return timed

    def _timed_reference_case(
        self, judge: SubmissionJudge, task: TaskSpec, case: Case
    ) -> dict[str, Any]:
        """One case timed in the reference's current worker, its memory let go after, as a
        candidate's is after each of its cases."""
        try:
            measured = judge.time_case(
                case,
                self.plan(task),
                self.timeout(task, BENCHMARK),
                self._progress_for(task, case, True),
            )
        finally:
            judge.release_cached_memory(windows=True)
        return measured.to_record()

    def _progress_for(self, task: TaskSpec, case: Case, reference: bool):
        if self.progress is None:
            return None
        who = "reference" if reference else "submission"
        return lambda label, n, median, halfwidth: self.progress.timing(
            f"{label} ({who})", n, median, halfwidth
        )

    def close(self) -> None:
        for judge in self._reference_judges.values():
            judge.close()
        for ranks in self._reference_ranks.values():
            ranks.close()
        self.pool.close()


def reference_label(task: TaskSpec, case: Case) -> str:
    return f"{task.name} {case.kind}[{case.id}] (reference)"


def reference_line(chosen: dict[str, Any], relative_spread: float) -> str:
    """The progress line of a reference timed in several workers."""
    return (
        f"{fmt_us(rank_us(chosen))}, the median of workers at "
        + ", ".join(fmt_us(t) for t in chosen["rank_us_by_worker"])
        + f" (spread {100 * relative_spread:.1f}%)"
    )
