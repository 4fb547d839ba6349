"""The batch judge: many candidates against one leaderboard, one judge per GPU.

Each GPU's judge keeps its CUDA context, its leaderboard modules and the reference's timings for
the whole batch (one `JudgingSession`), and gives every candidate a fresh sandboxed worker from
a pool started ahead. While one candidate is judged, the next ones are already imported (their
builds run on the CPU meanwhile); while a case is timed, every other candidate's worker Python
process is paused, so no other candidate's work overlaps a timed call. A candidate that crashes, hangs or
poisons its worker costs only itself: its worker is killed and never reused.

Records stream out in the order the candidates were given, each as soon as it and all before
it are done.

With several GPUs (fanout.py) their judges share one timing of the reference: each times its
share of the reference's workers once its first candidate has imported, while the next ones
import, and takes the combined timing the parent sends back (`reference_share`).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from ..errors import KernelboardError
from ..evaluation.progress import Progress
from ..evaluation.session import JudgingSession, reference_label
from ..evaluation.submission import SubmissionEvaluation
from ..judge import device_free, timing_core
from ..judge.core import CaseOutcome, case_name
from ..judge.evalpy import is_evalpy_task
from ..judge.kernels import (
    census_exceeds_timing,
    only_library_kernels,
    own_kernel_names,
    top_kernels,
)
from ..judge.staging import remove_staged
from ..names import slug
from ..results.recorder import case_record
from ..results.reference_runs import ReferenceUnavailable, case_key
from ..results.summary import evaluation_summary
from ..spec.cases import BENCHMARK, TEST, Case, task_cases, with_run_seed
from ..spec.discovery import SubmissionRef, find_repo_root, load_catalog
from ..spec.task import TaskError, TaskSpec
from ..stats.between_workers import combined_workers
from ..stats.speed_of_light import speed_of_light
from ..supervisor import gpu_view, launch, scratch
from ..supervisor.pausing import paused
from .candidates import Candidate
from .depth import IN_FLIGHT, PREFETCH
from .phases import PhaseClock, working_for
from .phases import current as current_clock
from .records import DEFAULT_EXCESSIVE_SPEEDUP, Flag, candidate_record, harness_error_record
from .reference_share import (
    MIN_REFERENCE_WORKERS,
    REFERENCE_WORKERS,
    ReferenceShare,
    host_bound_total,
)
from .turns import GpuTurns

MODES = ("test", "benchmark")
_END = object()  # the end of a stream of candidates
# A candidate whose correctness calls made ahead have taken this long (one hangs) is passed over
# for the next prepared one: far longer than a candidate's calls take.
PASS_OVER_AFTER_S = 1.0


@dataclass
class _Pending:
    """A candidate arrived and not yet judged: its preparation's thread, and whether it ended."""

    index: int  # in the order the candidates came
    candidate: Candidate
    evaluation: SubmissionEvaluation
    ready: threading.Event
    thread: threading.Thread


class UnknownLeaderboard(KernelboardError, KeyError):
    """The batch names a leaderboard the repository does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


def check_mode(mode: str) -> None:
    """ValueError, naming the modes there are, for one a batch does not judge in."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


def find_task(leaderboard: str, root: Path | None) -> tuple[TaskSpec, Path]:
    """The leaderboard's task spec and the repository root it lives in."""
    found = root or find_repo_root(Path.cwd())
    if found is None:
        raise UnknownLeaderboard("no leaderboards/ folder here or above; pass the repository root")
    try:
        return load_catalog(found).get(leaderboard), found
    except KeyError as exc:
        raise UnknownLeaderboard(exc.args[0]) from None
    except TaskError as exc:
        raise UnknownLeaderboard(f"leaderboard {leaderboard!r} does not load: {exc}") from None


def judge_many(
    leaderboard: str,
    candidates: Iterable[Candidate],
    *,
    mode: str = "test",
    root: Path | None = None,
    gpus: Sequence[int] | None = None,
    excessive_speedup: float = DEFAULT_EXCESSIVE_SPEEDUP,
    progress: Progress | None = None,
    profile: bool = False,
    candidate_workers: int = 1,
    reference_workers: int = REFERENCE_WORKERS,
    in_flight: int | None = None,
) -> Iterator[dict[str, Any]]:
    """One JSON-ready record per candidate (schema: records.record_schema()), in the order
    given, each as soon as it and the ones before it are judged.

    gpus: the GPUs to judge on (None: every GPU of this host; one CPU judge where there is none).
    profile: records carry the longest kernels of a timed call and each case's speed of light.
    candidate_workers: every timed case of a candidate timed in this many fresh workers and
    combined as the reference's are (default 1: one worker, more only where host-bound).
    reference_workers: the fresh workers the reference is timed in on each case (default 5;
    3 at the least, so that their spread has two degrees of freedom).
    in_flight: candidates each GPU's judge keeps in flight, the judged one included (default
    PREFETCH + 1 for a judge alone, IN_FLIGHT beside other GPUs' judges: batch/depth.py).
    """
    if reference_workers < MIN_REFERENCE_WORKERS:
        raise ValueError(
            f"reference_workers: at least {MIN_REFERENCE_WORKERS}, got {reference_workers}"
        )
    check_mode(mode)
    task, root = find_task(leaderboard, root)
    candidates = list(candidates)
    # A single-GPU judge's zygote (a multi-GPU case's ranks are forked by one of their own).
    if not task.multi_gpu and (judged_here(gpus) if gpus is not None else at_most_one_gpu()):
        launch.prestart_zygote()  # its torch import beside this process's, which comes next
    devices = list(gpus) if gpus is not None else visible_gpus()
    if judged_here(devices):
        # On its GPU, this process keeps a CPU core for the timed calls while it judges.
        with timing_core.kept_here() if devices else nullcontext() as kept:
            judge = BatchJudge(
                task,
                mode,
                root,
                excessive_speedup,
                progress,
                profile=profile,
                candidate_workers=candidate_workers,
                reference_workers=reference_workers,
                prefetch=in_flight - 1 if in_flight else PREFETCH,
                timing_cpu=kept.cpu if kept else None,
            )
            try:
                yield from judge.judge(candidates)
            finally:
                judge.close()
        return
    from .fanout import judge_on_gpus  # one judge process per GPU

    groups = gpu_groups(task, devices)
    yield from judge_on_gpus(
        task.name,
        candidates,
        mode,
        root,
        groups,
        excessive_speedup,
        profile,
        progress,
        candidate_workers,
        reference_workers,
        in_flight or IN_FLIGHT,
    )


def judged_here(devices: Sequence[int]) -> bool:
    """Whether this process judges the batch itself: on the CPU, or on its own cuda:0. Any
    other GPU, even one alone, gets a judge process that sees only it (fanout.py): a CUDA
    device set in this process is its calling thread's alone, so the threads that start
    workers and make inputs ahead stayed on cuda:0 (`--gpus 3` on a 4-GPU host: workers started
    on GPU 0, and every input the judge shared from GPU 3 failed to map in them)."""
    return not devices or list(devices) == [0]


def gpu_groups(task: TaskSpec, devices: Sequence[int]) -> list[list[int]]:
    """The GPUs each judge process sees: one each, except on a multi-GPU leaderboard, whose
    cases take every GPU named (its ranks on cuda:0..W-1 of them): one judge sees them all."""
    if task.multi_gpu and len(devices) > 1:
        return [list(devices)]
    return [[device] for device in devices]


def at_most_one_gpu() -> bool:
    """Whether this process sees one GPU or none, by NVML and CUDA_VISIBLE_DEVICES, before
    torch is imported (visible_gpus, which decides, imports it)."""
    view = gpu_view.env_view(os.environ)
    return len(view.minors if view is not None else gpu_view.host_gpus() or ()) <= 1


def visible_gpus() -> list[int]:
    """The CUDA devices this process may use (none on a CPU machine)."""
    from ..judge import devices

    if not devices.has_cuda():
        return []
    import torch

    return list(range(torch.cuda.device_count()))


class BatchJudge:
    """Judges candidates one after another on one device, importing the next ones ahead."""

    def __init__(
        self,
        task: TaskSpec,
        mode: str,
        root: Path,
        excessive_speedup: float = DEFAULT_EXCESSIVE_SPEEDUP,
        progress: Progress | None = None,
        spares: int | None = None,
        profile: bool = False,
        reference_share: ReferenceShare | None = None,
        candidate_workers: int = 1,
        reference_workers: int = REFERENCE_WORKERS,
        prefetch: int = PREFETCH,
        timing_cpu: int | None = None,
    ):
        """prefetch: candidates prepared ahead of the one being judged (batch/depth.py).
        timing_cpu: the CPU kept for this judge's timed calls (judge/timing_core.py), which
        nothing else of this process's runs on; None: each case's fastest CPU.
        reference_share: this judge is one of several GPUs' (fanout.py); it times its share
        of the reference's workers (of the share's total, which then stands for
        reference_workers) and takes the combined timing from the parent."""
        if reference_share is not None:
            reference_workers = reference_share.total
        self.task = task
        self.mode = mode
        self.excessive_speedup = excessive_speedup
        self.profile = profile
        self.reference_share = reference_share
        self.session = JudgingSession(
            mode,
            root,
            progress=progress,
            reference_workers=reference_workers,
            host_bound_reference_workers=host_bound_total(reference_workers),
            candidate_workers=candidate_workers,
            measure_reference=self._reference_timing,
            # A crashed candidate's later cases would each take a fresh worker to die again.
            stop_at_first_crash=True,
        )
        # Each candidate's seconds per phase (phases.py), from its arrival to its record.
        self._clocks: dict[SubmissionEvaluation, PhaseClock] = {}
        # Correctness side by side, timed work alone (turns.py), a hung call set aside where
        # its device is seen idle; the outcomes made ahead of a candidate's turn, by case
        # (_check_ahead). A multi-GPU or eval.py leaderboard's calls are not set aside.
        plain = not (task.multi_gpu or is_evalpy_task(task))
        self.turns = GpuTurns(quiet=self._device_quiet if plain else None)
        self._ahead: dict[SubmissionEvaluation, dict[str, CaseOutcome]] = {}
        # When each candidate's correctness calls made ahead began (judge: passing over).
        self._checking_since: dict[SubmissionEvaluation, float] = {}
        self._closing: list[threading.Thread] = []  # judged candidates' workers being killed
        self._shared_keys: set[str] = set()  # the cases whose reference the judges share
        # One GPU: reference timings made with the first case's, for the cases still to come.
        self._references_ahead: dict[str, dict[str, Any] | None | ReferenceUnavailable] = {}
        # Where this judge's time went: its share of the reference, the candidates it judged
        # (of which waiting for the other judges' shares), and how many reference workers.
        self.account: dict[str, float] = {
            "reference_s": 0.0,
            "reference_workers": 0,
            "candidates": 0,
            "candidates_s": 0.0,
            "waited_s": 0.0,
        }
        self.prefetch = prefetch
        self.session.pool.spares = spares if spares is not None else default_spares(prefetch)
        # Benchmark mode on a GPU takes a kernel census of every candidate (only library
        # kernels?): its workers start the profiler while they start, off the critical path.
        # Asked for without looking for a GPU, which would import torch here: a worker without
        # CUDA takes no census and ignores it.
        self.session.pool.warm_timing = mode == "benchmark"
        self.session.pool.timing_cpu = timing_cpu
        if not is_evalpy_task(task):  # an eval.py folder's reference.py is its own business
            # The zygote and the first workers start now: their torch import overlaps the
            # judge's own (the leaderboard's modules import it) instead of following it.
            self.session.pool.prestart()
            self.session.modules(task)  # imported once, here, before any thread looks ahead
        self.folder = scratch.make_folder("kb-batch-")
        self._count = 0
        self._ended = False  # every candidate has arrived
        self._share_timed = False  # this judge's share of the reference is timed

    def _device_quiet(self, since: float) -> bool:
        """No kernel has run on this judge's device since `since` (time.time()): NVML's
        samples on a GPU; on the host, stopped workers run nothing."""
        if not self.session.use_cuda:
            return True
        import torch

        return device_free.quiet_since(torch.cuda.current_device(), since)

    def evaluation(self, index: int, candidate: Candidate) -> SubmissionEvaluation:
        """The candidate's evaluation; its source is written to a folder of its own."""
        folder = self.folder / f"{index:06d}"
        folder.mkdir()
        # Named after the candidate, so its tracebacks read "File 'its-id.py', line 3".
        name = slug(candidate.id)
        path = folder / (
            name if name.endswith(f".{candidate.lang}") else f"{name}.{candidate.lang}"
        )
        path.write_text(candidate.source)
        return self.session.evaluation(self.task, SubmissionRef(path, self.task.name, candidate.id))

    def judge(self, candidates: Iterable[Candidate]) -> Iterator[dict[str, Any]]:
        """Records in the order the candidates come (judge_as_done's, a record judged before
        an older candidate's kept until that one's is out)."""
        kept: dict[int, dict[str, Any]] = {}
        next_out = 0
        for index, record in self.judge_as_done(candidates):
            kept[index] = record
            while next_out in kept:
                yield kept.pop(next_out)
                next_out += 1

    def judge_as_done(
        self, candidates: Iterable[Candidate]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """(the candidate's place in `candidates`, its record), as each is judged; the next few
        are imported ahead, as far as they have arrived (a stream of candidates is never waited
        for to look ahead). A candidate whose correctness calls made ahead have run
        PASS_OVER_AFTER_S (one hangs) is passed over for the next prepared one, up to
        `prefetch` of them at once."""
        arrived: Queue[Any] = Queue()

        def feed() -> None:
            for candidate in candidates:
                arrived.put(candidate)
            arrived.put(_END)

        threading.Thread(target=feed, daemon=True).start()
        pending: list[_Pending] = []  # arrived, not judged yet, oldest first
        prepared = threading.Condition()  # a candidate's preparation ended
        ended = False

        def take(block: bool) -> bool:
            nonlocal ended
            if ended:
                return False
            try:
                candidate = arrived.get(block=block)
            except Empty:
                return False
            if candidate is _END:
                ended = self._ended = True
                # A spare started for no candidate stops, unless the reference's workers are to
                # come (it is timed after the first candidate's import: a short batch, a
                # sweep's one candidate, has ended by then).
                self.session.pool.expect(self._spares_for_the_reference())
                return False
            clock = PhaseClock()
            index = self._count
            evaluation = self.evaluation(index, candidate)
            self._count += 1
            self._clocks[evaluation] = clock
            ready = threading.Event()

            def prepare() -> None:
                try:
                    self._prepare(evaluation, clock)
                finally:
                    with prepared:
                        ready.set()
                        prepared.notify_all()

            thread = threading.Thread(target=prepare, daemon=True)
            pending.append(_Pending(index, candidate, evaluation, ready, thread))
            thread.start()
            return True

        judged_up_to = -1  # the newest candidate judged: older ones pending were passed over

        def passed_over() -> int:
            return sum(e.index < judged_up_to for e in pending)

        def arrived_so_far() -> list[SubmissionEvaluation]:
            while len(pending) - passed_over() <= self.prefetch and take(block=False):
                pass
            return [e.evaluation for e in pending]

        def next_prepared() -> _Pending:
            """The oldest candidate once prepared; or a younger prepared one, where each older
            one's correctness calls made ahead have taken PASS_OVER_AFTER_S so far and no more
            than `prefetch` are passed over. A worker's start and import are not passed over:
            they come in order, and the first candidates are judged in the order they came."""
            with prepared:
                while True:
                    arrived_so_far()  # a stream's next candidates, come while one hangs
                    now = time.perf_counter()
                    for older, entry in enumerate(pending):
                        if entry.ready.is_set():
                            return entry
                        checking = self._checking_since.get(entry.evaluation)
                        long = checking is not None and now - checking >= PASS_OVER_AFTER_S
                        if not long or older >= self.prefetch:
                            break
                    prepared.wait(timeout=0.05)

        if self.reference_share is not None:  # first, while the next candidates import
            # Not amid this judge's start-up: once its first candidate has imported, about where
            # one judge times the reference (in its first candidate's first benchmark case).
            # Timed at once, while its spares and first candidates' workers were starting, a
            # share of one worker took 11 to 13 s on four H200s; after the first import, 2 to
            # 4 s on four H100s.
            if arrived_so_far():
                pending[0].thread.join()
            self._time_reference_share(arrived_so_far)
        while pending or take(block=True):
            waiting = time.perf_counter()
            entry = next_prepared()
            pending.remove(entry)
            self._checking_since.pop(entry.evaluation, None)
            judged_up_to = max(judged_up_to, entry.index)
            candidate, evaluation = entry.candidate, entry.evaluation
            self._clocks[evaluation].add("prepare_wait", time.perf_counter() - waiting)
            entry.thread.join()
            started = time.perf_counter()
            try:
                others = [e.evaluation for e in pending]
                record = self._judge_one(candidate, evaluation, others)
            except Exception as error:  # the judge's own failure: this candidate's record says
                traceback.print_exc()  # so, and the candidates after it are still judged
                took = time.perf_counter() - started
                failed = harness_error_record(candidate.id, self.task.name, self.mode, error, took)
                record = failed.to_json()
            finally:
                self._clocks.pop(evaluation, None)
                self._close_later(evaluation)
            yield entry.index, record
        for entry in pending:
            entry.thread.join()
            entry.evaluation.close()
        self._closed()

    def _prepare(self, evaluation: SubmissionEvaluation, clock: PhaseClock) -> None:
        """The candidate's worker started and its submission imported, ahead of its turn (its
        judge says how long each took: the phases `worker_start` and `import`); then its
        correctness calls made ahead, as far as they may be (_check_ahead)."""
        evaluation.prepare()
        for phase in ("worker_start", "import"):
            clock.add(phase, _startup_s(evaluation, phase))
        self._ahead[evaluation] = {}
        self._checking_since[evaluation] = time.perf_counter()
        try:
            self._check_ahead(evaluation, clock)
        except Exception as exc:  # the judging thread makes the rest in its turn
            # On stderr: a one-GPU judge's stdout may carry the records.
            print(
                f"kernelboard: checks ahead of {evaluation.ref.display} stopped: {exc}",
                file=sys.stderr,
            )

    def _check_ahead(self, evaluation: SubmissionEvaluation, clock: PhaseClock) -> None:
        """The candidate's correctness cases, and its timed cases' correctness calls and the
        inputs of their timed calls, made beside the other candidates' (shared turns), in the
        order its judging would make them.
        Stops at a case whose input is not known to be small (a case judged frugally, or one
        no judge has made yet: several candidates' copies of a large input would not fit side
        by side); none on a multi-GPU or eval.py leaderboard (their judges are not made for
        it)."""
        if self.task.multi_gpu or is_evalpy_task(self.task):
            return
        known = self.session.modules(self.task).frugal_cases
        done = self._ahead[evaluation]
        for case in evaluation.cases():
            if self.mode == "test" and case.kind != TEST:
                continue
            if known.get(case_name(case)) is not False:
                return
            test = case.kind == TEST  # a test case is settled here; a timed one in its turn
            phase = "correctness_ahead" if test else "benchmark_check_ahead"
            with self.turns.shared(), clock.phase(phase), _check_parts(evaluation, clock, phase):
                outcome = evaluation.run(case) if test else evaluation.correctness(case)
            done[case_name(case)] = outcome
            if not test and outcome.passed:  # its timing loop then makes none between calls
                with self.turns.shared(), clock.phase("inputs_ahead"):
                    evaluation.judge.generate_ahead(case)

    def _close_later(self, evaluation: SubmissionEvaluation) -> None:
        """A judged candidate's worker killed and its folders removed beside the next
        candidate's judging: the kill waits for the process to be gone, its CUDA context torn
        down (tenths of a second on a GPU), which need not hold up the next one's correctness
        cases. The next timed case waits for it (_closed)."""

        def close() -> None:
            evaluation.close()
            shutil.rmtree(evaluation.ref.path.parent, ignore_errors=True)

        thread = threading.Thread(target=close, daemon=True)
        thread.start()
        self._closing.append(thread)

    def _closed(self) -> None:
        """Every judged candidate's worker is gone: none is alive while another is timed."""
        while self._closing:
            self._closing.pop().join()

    def _close_up(self, clock: PhaseClock) -> None:
        """_closed, counted as the candidate's `closing`."""
        with clock.phase("closing"):
            self._closed()

    def _judge_one(
        self,
        candidate: Candidate,
        evaluation: SubmissionEvaluation,
        others: list[SubmissionEvaluation],
    ) -> dict[str, Any]:
        started = time.perf_counter()
        clock = self._clocks[evaluation]
        ahead = self._ahead.pop(evaluation, {})
        outcomes = []
        for case in evaluation.cases():
            if self.mode == "test" and case.kind != TEST:
                continue
            made = ahead.get(case_name(case))
            if case.kind == TEST:
                if made is None:
                    with clock.phase("correctness"), self.turns.shared():
                        made = evaluation.run(case)
                outcomes.append((case, made))
                continue
            if made is not None and not made.passed:  # its correctness call failed ahead
                outcomes.append((case, evaluation.settled(case, made)))
                continue
            with ExitStack() as turn:
                # The judged candidates' workers go (`closing`) while the correctness calls in
                # flight return (`turn`), none starting meanwhile.
                asked, closing = time.perf_counter(), clock.seconds["closing"]
                turn.enter_context(self.turns.exclusive(meanwhile=lambda: self._close_up(clock)))
                waited = time.perf_counter() - asked
                clock.add("turn", waited - (clock.seconds["closing"] - closing))
                outcomes.append((case, self._timed_case(evaluation, case, made, clock, others)))
        with clock.phase("census"):
            extra_flags, profile = self._census(evaluation, outcomes)
        record_started = time.perf_counter()
        self.session.recorder.forget(self.task, evaluation.ref)  # the batch keeps no documents
        records = [case_record(c, o).to_json() for c, o in outcomes]
        summary = evaluation_summary(records, self.task, self.mode).to_json()
        # Paths inside this batch's scratch folder read as the candidate's own file name.
        for _, outcome in outcomes:
            outcome.message = outcome.message.replace(f"{evaluation.ref.path.parent}/", "")
        clock.add("record", time.perf_counter() - record_started)
        self.account["candidates"] += 1
        self.account["candidates_s"] += time.perf_counter() - started
        return candidate_record(
            candidate.id,
            self.task.name,
            self.mode,
            outcomes,
            summary,
            time.perf_counter() - started,
            self.excessive_speedup,
            extra_flags,
            profile,
            clock.to_json(),
        ).to_json()

    def _timed_case(
        self,
        evaluation: SubmissionEvaluation,
        case: Case,
        checked: CaseOutcome | None,
        clock: PhaseClock,
        others: list[SubmissionEvaluation],
    ) -> CaseOutcome:
        """A timed case, in the exclusive turn: every other candidate's worker is stopped (the
        spare workers too, by the pool's own quiet turn: SubmissionJudge.time_case), and no
        judged candidate's worker is still alive (its turn's `meanwhile` saw to that, _judge_one).
        `checked`: its correctness call, made ahead and passed."""
        stopped = [e for e in others if e.workers()]
        idle = [w.process.pid for e in stopped for w in e.workers()]
        stopping = time.perf_counter()
        with paused(idle), working_for(clock):
            case_started = time.perf_counter()
            clock.add("pausing", case_started - stopping)
            waited = clock.seconds.get("reference", 0.0)
            calibrated = _startup_s(evaluation, "calibrate")
            with _check_parts(evaluation, clock, "benchmark_check"):
                outcome = evaluation.run(case, checked)
            waited = clock.seconds.get("reference", 0.0) - waited
            calibrated = _startup_s(evaluation, "calibrate") - calibrated
            clock.timed_case(outcome.timing, time.perf_counter() - case_started, waited, calibrated)
        for other in stopped:  # their workers were stopped meanwhile
            self._clocks[other].add("paused", time.perf_counter() - stopping)
        return outcome

    def _spares_for_the_reference(self) -> int:
        """Spares worth keeping once every candidate has arrived: while the reference is still
        to be timed, as many as its workers (each is a fresh one; without spares they start one
        after the other: 11.3 s of a one-candidate KernelBench L2 61 run's 25 s on an H200)."""
        share = self.reference_share
        if self.task.multi_gpu or (share is not None and self._share_timed):
            return 0  # a multi-GPU case's reference runs in rank groups, not spare workers
        if not self._unsettled_cases():
            return 0
        workers = len(share.workers) if share is not None else self.session.reference_workers
        return min(workers, self.session.pool.spares)

    def _unsettled_cases(self) -> list[Case]:
        """The benchmark cases whose reference timing is still to come: in benchmark mode, each
        that no filed reference run has (every GPU's judge reads the same store) and this run
        has not timed. The GPUs' judges share the timing of those it has at the start."""
        if self.mode != "benchmark" or is_evalpy_task(self.task):  # eval.py times its own
            return []
        seeds = self.session.seeds_for(self.task)
        cases = (with_run_seed(c, seeds) for c in task_cases(self.task) if c.kind == BENCHMARK)
        return [
            c
            for c in cases
            if not self.session.references.settled(self.task, c)
            and reference_key(c) not in self._references_ahead
        ]

    def _time_reference_share(self, arrived: Callable[[], list[SubmissionEvaluation]]) -> None:
        """This judge's workers of the reference's timing on each shared case, handed to the
        parent. The candidates that have arrived (`arrived()` takes them in) import meanwhile;
        their worker processes are paused while a worker is timed, as while a candidate is."""
        share = self.reference_share
        assert share is not None
        started = time.perf_counter()
        cases = self._unsettled_cases()
        self._shared_keys = {reference_key(case) for case in cases}

        @contextmanager
        def around() -> Iterator[None]:  # alone on the device, the candidates' workers stopped
            with self.turns.exclusive():
                with paused([w.process.pid for e in arrived() for w in e.workers()]):
                    yield

        def publish(index: int, timings: list[dict[str, Any]] | ReferenceUnavailable) -> None:
            case = cases[index]  # each case to the parent as soon as its last worker timed it
            key, label = reference_key(case), reference_label(self.task, case)
            if isinstance(timings, ReferenceUnavailable):
                share.publish(key, label, [], str(timings))
            else:
                share.publish(key, label, timings)

        parts: dict[str, float] = {}  # where its workers' seconds went
        started_workers = 0
        if cases and share.workers:  # each of its workers times every case
            timed = self.session.time_references(
                self.task,
                cases,
                len(share.workers),
                around,
                parts,
                settled=publish,
                host_bound_workers=len(share.host_bound_workers),
            )
            started_workers = max((len(t) for t in timed if isinstance(t, list)), default=0)
            self.account["reference_workers"] += started_workers  # started once each
        self.account["reference_s"] = time.perf_counter() - started
        self._share_timed = True
        if self._ended:
            self.session.pool.expect(0)
        if cases and share.workers:
            more = started_workers > len(share.workers)  # a host-bound case's
            share.report(
                "reference",
                cases=len(cases),
                workers=share.host_bound_workers[:started_workers] if more else share.workers,
                of=share.host_bound_total if more else share.total,
                parts=parts,
                **self.account,
            )

    def _reference_timing(self, task: TaskSpec, case: Case) -> dict[str, Any] | None:
        """The reference's timing of a case, timed here or shared by every GPU's judge; the
        wait is the phase `reference` of the candidate being judged."""
        clock = current_clock()
        started = time.perf_counter()
        parts: dict[str, float] = {}  # where the reference's workers' seconds went
        try:
            if self.reference_share is not None:
                return self._shared_reference(task, case)
            return self._reference_with_the_rest(task, case, parts)  # the one-GPU default
        finally:
            if self._ended:  # every case still to come was timed with this one: no spare
                self.session.pool.expect(0)
            if clock is not None:
                clock.add("reference", time.perf_counter() - started)
                for part, seconds in parts.items():
                    clock.add(f"reference_{part}", seconds)

    def _reference_with_the_rest(
        self, task: TaskSpec, case: Case, parts: dict[str, float]
    ) -> dict[str, Any] | None:
        """The case's reference timing; asked for the first, the reference is timed on every
        case still to come at once, each of its workers timing them all, and the others' are
        kept for when their candidates' cases ask."""
        key = reference_key(case)
        if key not in self._references_ahead:
            cases = [case, *(c for c in self._unsettled_cases() if reference_key(c) != key)]
            for each, timing in zip(
                cases, self.session.measure_references(task, cases, parts), strict=True
            ):
                self._references_ahead[reference_key(each)] = timing
        timing = self._references_ahead.pop(key)
        if isinstance(timing, ReferenceUnavailable):
            raise timing
        return timing

    def _shared_reference(self, task: TaskSpec, case: Case) -> dict[str, Any] | None:
        """The session's reference timing of a case: the one the parent combined from every
        judge's share (it waits for it), so every GPU's candidates get the same reference."""
        assert self.reference_share is not None
        key = reference_key(case)
        if key not in self._shared_keys:  # not a shared case (none is expected): timed here
            workers = self.session.reference_workers
            self.account["reference_workers"] += workers
            return combined_workers(self.session.time_reference(task, case, workers))[0]
        started = time.perf_counter()
        try:
            return self.reference_share.combined(key)
        finally:
            self.account["waited_s"] += time.perf_counter() - started

    def _census(
        self, evaluation: SubmissionEvaluation, outcomes: list
    ) -> tuple[list[Flag], dict[str, Any] | None]:
        """In benchmark mode on a GPU: the kernels one call of the first timed case launches.
        Only library kernels is a flag; with --profile the record gets the longest ones and
        each timed case's share of peak bandwidth. Taken in a shared turn; in the exclusive one
        with --profile, and again there where a kernel outlasted the timed interval (a
        failure). Taken only when there is a passed timed case to take it of: a candidate
        that failed took no turn, where it had waited for the next candidates' correctness
        calls, a hanging one's to its timeout (10 s of a 100-candidate mixed batch's 100,
        twice)."""
        timed = [(c, o) for c, o in outcomes if c.kind != TEST and o.passed]
        if self.mode != "benchmark" or not timed or not self.session.use_cuda:
            return [], None
        case, outcome = timed[0]
        kernel_census = getattr(evaluation.judge, "kernel_census", lambda *_: None)
        timeout = self.session.timeout(self.task, case.kind)
        census = None
        if not self.profile:
            # The flag needs the kernels' names only, which other candidates' calls beside it
            # do not change: the census takes a shared turn, and their correctness calls go on
            # meanwhile instead of all starting as it ends, where the next timed case would
            # wait for them (`turn`). Its durations are held against the timed interval only
            # where they could fail the candidate, in the exclusive turn below.
            with self.turns.shared():
                census = kernel_census(case, timeout)
        unseen = census_exceeds_timing(census, outcome.timing)  # None without a census
        if self.profile or unseen:  # --profile records the durations: taken alone, as timed
            with self.turns.exclusive():
                census = kernel_census(case, timeout)
                unseen = census_exceeds_timing(census, outcome.timing)
                if unseen:  # failed only on two readings alone
                    # One call's kernel can read slow for the host's reasons: of 100 identical
                    # candidates on an H200, one census read a 2.7 ms GEMM at 4.7 ms. Work on
                    # a stream the timed interval does not see is there in every call: a
                    # second census says.
                    census = kernel_census(case, timeout)
                    unseen = census_exceeds_timing(census, outcome.timing)
        if unseen:  # its kernels ran somewhere the timed interval did not see: not fast, failed
            outcome.status, outcome.message = "failed", unseen
            outcome.implausible_timing = True
        own = own_kernel_names(evaluation.ref.path.read_text(errors="replace"))
        library_only = census is not None and only_library_kernels(census, own)
        flags = [Flag.ONLY_LIBRARY_KERNELS] if library_only else []
        if not self.profile:
            return flags, None
        return flags, {
            "kernels": top_kernels(census or []),
            "speed_of_light": {
                c.id: speed_of_light(o.timing) for c, o in timed if o.timing is not None
            },
        }

    def close(self) -> None:
        self._closed()
        self.session.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        remove_staged()


def _startup_s(evaluation: SubmissionEvaluation, part: str) -> float:
    """Seconds the candidate's judge has spent so far on `part` of starting its workers
    (SubmissionJudge.startup_s: worker_start, import, calibrate); 0 for an eval.py judge."""
    return getattr(evaluation.judge, "startup_s", {}).get(part, 0.0)


def _check_s(evaluation: SubmissionEvaluation) -> dict[str, float]:
    """Seconds the candidate's judge has spent so far on each part of its correctness calls
    (SubmissionJudge.check_s: generate, call, worker, verify, release); none for an eval.py judge."""
    return dict(getattr(evaluation.judge, "check_s", {}))


@contextmanager
def _check_parts(evaluation: SubmissionEvaluation, clock: PhaseClock, phase: str) -> Iterator[None]:
    """The parts of the correctness calls made in the block, added to `clock` as phase_part."""
    before = _check_s(evaluation)
    yield
    for part, seconds in _check_s(evaluation).items():
        clock.add(f"{phase}_{part}", seconds - before[part])


def reference_key(case: Case) -> str:
    """A case's identity for its reference timing, as ReferenceTimings keys it."""
    return case_key(case.kind, case.index, case.arguments(0))


def default_spares(prefetch: int = PREFETCH) -> int:
    """Workers kept starting ahead: enough to hide a worker's start-up (seconds) behind the
    judging of the candidates before it, without a CUDA context per core; never fewer than a
    lone judge keeps by default, however few candidates are prepared ahead."""
    return max(1, min(max(prefetch, PREFETCH) + 1, (os.cpu_count() or 2) // 4))
