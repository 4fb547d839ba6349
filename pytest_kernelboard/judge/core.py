"""The judge: inputs in, verdicts out. Runs in the pytest process and never runs participant code.

For each case it generates the input from the case's seed, keeps a pristine copy, hands the
worker its own copy, takes the output back and checks it against the pristine input with the
leaderboard's own check_implementation.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..channel import heap, scrubbing, window
from ..channel.build_spec import write_build_spec
from ..channel.cloning import clone_data, release_lost_holds
from ..channel.protocol import ErrorKind, Op, needs_cuda
from ..spec.cases import UNSEEN_CALL_INDEX, Case
from ..spec.task import TaskSpec
from ..stats.floors import device_bytes, tensor_bytes
from ..stats.preroll import LAUNCH_ALLOWANCE_US, preroll_for
from ..stats.scoring import rank_us, speedup
from ..supervisor.client import Reply, WorkerProcess
from ..supervisor.failures import WorkerFailure
from ..supervisor.pausing import paused
from ..supervisor.pool import WorkerPool
from . import gpu_budget, outside_clock
from .builds import build_budget_failure, compile_timeout
from .calibration import FULL_CALLS, OWN_WORKER, WARM_UP_CALLS, with_shared_figures
from .diagnosis import diagnose
from .hardware import leaderboard_note
from .inputs_ahead import InputsAhead
from .measure import (
    WARMED,
    CaseTimer,
    Measurement,
    Progress,
    TimingPlan,
    VerificationFailure,
)
from .memory import is_frugal, trace
from .mutation import written_leaves
from .profiling import CaseProfiler, ProfileError
from .reference_loader import CODE_LOCK, LeaderboardError, LeaderboardModules
from .seeding import seed_everything
from .staging import module_name, stage

STARTUP_TIMEOUT_S = 120.0
# A case's end lets go of the worker's device windows above this size (small ones stay: making
# them again costs more than they hold).
RELEASE_WINDOWS_ABOVE = window.KEPT_WINDOW_MAX
# The judge's cached, unused device memory is handed back after a case only above this: below
# it, emptying the cache cost a device synchronisation and fresh allocations for every small
# case (20 ms of each of a batch's correctness cases on an H200) and gave no one room.
KEPT_CACHE_MAX = 64 << 20
EARLIER_TIMEOUT = "not run: an earlier case timed out"
EARLIER_CRASH = "not run: an earlier case crashed"
UNKNOWN = object()  # which inputs the reference writes: not learnt yet
CHECK_PARTS = ("generate", "call", "worker", "verify", "release")  # SubmissionJudge.check_s
PROFILER_EXIT_GRACE_S = 120.0
# What times a case's calls: (case, plan, timeout_s, progress) -> its measurement.
CaseTiming = Callable[[Case, TimingPlan, float, "Progress | None"], Measurement]


class Skip(Exception):
    """The case cannot run on this machine (the message says why)."""


class ReferenceCannotRun(Exception):
    """The leaderboard's own code cannot run this case (its generate_input, ref_kernel or
    check_implementation raised on the reference's own output): the case is not run."""

    def __init__(self, error: LeaderboardError):
        self.error = error
        super().__init__(f"not run: the leaderboard's reference cannot run this case: {error}")


class OutputUncheckable(Exception):
    """check_implementation raised on this submission's output but not on the reference's:
    the output is not what the leaderboard expects (a wrong type, shape or structure)."""

    def __init__(self, error: LeaderboardError):
        self.error = error
        super().__init__(
            f"the leaderboard's check could not compare this output (the reference's own output "
            f"passes it): {error}"
        )


@dataclass
class CaseOutcome:
    """The verdict on one case, in the shape of a results-file case record."""

    status: str  # see records.CASE_STATUSES
    message: str = ""
    duration_s: float = 0.0
    timing: dict[str, Any] | None = None
    reference_timing: dict[str, Any] | None = None
    speedup: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # What the worker's error reply said went wrong (protocol.ErrorKind), where one did; not
    # recorded: it is for decisions, the message is for people.
    error_kind: ErrorKind | None = None
    missing_module: str | None = None  # with ErrorKind.MISSING_MODULE: the import that failed
    exception: str | None = None  # the class name of what raised in the worker, where known
    during_import: bool = False  # the failure is the submission's import (the same every case)
    after_failure: str = ""  # not run because an earlier case did this: "timed out", "crashed"
    implausible_timing: bool = False  # failed: its time cannot be the call's (for decisions)
    timed_out_after_s: float | None = None  # a case request's deadline that passed

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def outcome_speedup(outcome: CaseOutcome) -> float | None:
    """The speedup of an outcome's timing over its reference timing; None without the
    reference's, or for a time below the clock's grain (0 µs), which has no ratio."""
    if not outcome.reference_timing or not outcome.timing or rank_us(outcome.timing) <= 0:
        return None
    return speedup(rank_us(outcome.reference_timing), rank_us(outcome.timing))


def generate_input(modules: LeaderboardModules, case: Case, call_index: int = 0) -> Any:
    """The input of a case's call_index-th call; Skip when this machine lacks what it needs."""
    try:
        with CODE_LOCK:  # the seed is the call's until its input is drawn
            seed_everything(case.call_seed(call_index))
            return modules.generate_input(case.arguments(call_index))
    except LeaderboardError as exc:
        if needs_cuda(str(exc.original)):
            raise Skip(f"needs CUDA: the reference's generate_input says: {exc.original}") from None
        raise


def own(reply: Reply) -> Any:
    """A reply's output as the judge may keep it: as it came where it is the judge's own (a
    copy out of a window) or read in place (a frugal reply, the worker stopped meanwhile), else
    a private copy (shared memory and CUDA IPC map memory the worker can still write)."""
    output = reply.payload["output"]
    return output if reply.owned or reply.in_place else clone_data(output)


@contextmanager
def lost_with(worker: WorkerProcess, sent: Any) -> Iterator[None]:
    """A request's inputs, where the worker dies with them (killed at its deadline, crashed):
    the shared-memory files it held are given up (channel/cloning.py), else they would stay in
    /dev/shm until the judge exits (the inputs of every call a batch's timeouts killed)."""
    try:
        yield
    except WorkerFailure:
        if not worker.alive:
            release_lost_holds(sent)
        raise


class SubmissionJudge:
    """Judges one submission file against one leaderboard; owns its worker's lifecycle."""

    def __init__(
        self,
        task: TaskSpec,
        modules: LeaderboardModules,
        submission: Path,
        use_cuda: bool,
        pool: WorkerPool | None = None,
        entry: str = "custom_kernel",
    ):
        """submission=None judges the reference itself (module reference, entry ref_kernel)."""
        self.task = task
        self.pool = pool or WorkerPool()
        self.modules = modules
        self.submission = submission
        self.use_cuda = use_cuda
        self.entry = entry
        self.module = module_name(task.submission_name) if submission else "reference"
        self.stage_dir = stage(task, submission)
        if submission is not None and task.lang == "cu":
            write_build_spec(self.stage_dir, task)
        self._calibration: dict[str, float] | None = None
        self._worker: WorkerProcess | None = None
        self._load_failure: WorkerFailure | None = None
        self._last_call_us: float | None = None  # the last correctness call, round trip
        self._round_trip_us = 0.0  # the judge-side time of an empty request (outside_clock)
        self._timed_out = False  # a case timed out: the rest fail at once
        self._inputs_ahead = InputsAhead()  # timed calls' inputs made ahead (generate_ahead)
        # A case's worker died: with stop_at_first_crash, the rest are not run. A batch sets
        # it: each later case would cost a fresh worker and its CUDA context (a second or
        # more on a GPU) to die the same way, where one verdict is all its record gives.
        self.stop_at_first_crash = False
        self._crashed = False
        # Seconds this judge spent starting workers, over its life: taking one and its first
        # answer (worker_start), the import (import), the timing calibration (calibrate).
        self.startup_s: dict[str, float] = {"worker_start": 0.0, "import": 0.0, "calibrate": 0.0}
        # Seconds its correctness calls spent, over its life: the input made (generate), the
        # worker's call as the judge saw it (call; of it, the request's round trip: worker),
        # the output checked (verify), the worker's windows and the judge's cache let go (release).
        self.check_s: dict[str, float] = dict.fromkeys(CHECK_PARTS, 0.0)

    # -- worker lifecycle ----------------------------------------------------------------------
    def worker(self) -> WorkerProcess:
        """A healthy worker with the submission imported; a new one after a crash or timeout."""
        if self._load_failure is not None:
            raise self._load_failure
        if self._worker is not None and self._worker.alive:
            return self._worker
        self._discard_worker()  # one that crashed or timed out: its failure is reported
        started = time.perf_counter()
        worker = self.pool.take()
        self._calibration = None
        worker.trusted = self.modules.trusted_modules()
        try:
            worker.ping(STARTUP_TIMEOUT_S)
            # Measured before the submission is imported: its code cannot slow it down.
            self._round_trip_us = outside_clock.round_trip_us(worker)
            answered = time.perf_counter()
            self.startup_s["worker_start"] += answered - started
            # The import (and any build it does) has its own budget, before any case's.
            budget_s = compile_timeout(self.task)
            try:
                worker.load(self.stage_dir, self.module, budget_s, self.entry)
            except WorkerFailure as failure:
                raise build_budget_failure(failure, budget_s) from None
            finally:
                self.startup_s["import"] += time.perf_counter() - answered
        except WorkerFailure as failure:
            worker.discard()  # the failure already holds its log's tail
            # Import errors are deterministic: report the same failure for every case.
            failure.during_import = True
            self._load_failure = failure
            raise
        self._worker = worker
        return worker

    def preload(self) -> None:
        """Start the worker and import the submission now; a failure is kept and reported by
        the first case, as it would have been."""
        try:
            self.worker()
        except WorkerFailure:
            pass

    def close(self, grace_s: float = 5.0) -> None:
        """Ask the worker to exit, killing it after grace_s (a profiler needs time to write)."""
        if self._worker is not None:
            self._worker.close(timeout_s=grace_s)
            self._worker = None

    # -- one correctness case ------------------------------------------------------------------
    def generate(self, case: Case, call_index: int = 0) -> Any:
        return generate_input(self.modules, case, call_index)

    def check_case(self, case: Case, timeout_s: float) -> CaseOutcome:
        outcome = self._judged(case, lambda: self._check_case(case, timeout_s))
        releasing = time.perf_counter()
        self.release_cached_memory(windows=True)
        self.check_s["release"] += time.perf_counter() - releasing
        return outcome

    def _judged(self, case: Case, judge: Callable[[], CaseOutcome]) -> CaseOutcome:
        """Run one case's judging within the GPU's shared memory budget: what went wrong
        becomes its status; the duration is stamped."""
        started = time.perf_counter()
        if self._timed_out:  # a hanging submission costs one timeout, not one per case
            return CaseOutcome("not_run", EARLIER_TIMEOUT, after_failure="timed out")
        if self._crashed:
            return CaseOutcome("not_run", EARLIER_CRASH, after_failure="crashed")
        budget = gpu_budget.for_device() if self.use_cuda else None
        if budget is None:
            outcome = self._outcome_of(judge)
        else:
            outcome = self._within_budget(budget, case, judge)
        self._timed_out = self._timed_out or outcome.status == "timeout"
        self._crashed = self._crashed or (self.stop_at_first_crash and outcome.status == "crashed")
        outcome.duration_s = time.perf_counter() - started
        return outcome

    def _within_budget(
        self, budget: gpu_budget.GpuBudget, case: Case, judge: Callable[[], CaseOutcome]
    ) -> CaseOutcome:
        """The case holds its share of the GPU while it runs; one that runs out of memory
        beside other cases waits until it can run alone and runs once more. Out of memory
        alone in the judge (the input, the reference, the check) is the leaderboard's case not
        fitting this GPU: not run, saying what it needs and what the GPU has."""
        import torch

        key = f"{self.task.name}/{case.kind}/{case.index}"
        with budget.held(budget.reservation(key), waiting=self._waiting_note(case)):
            torch.cuda.reset_peak_memory_stats()
            outcome = self._outcome_of(judge)
            budget.learn(key, self._peak_bytes())
        if not _out_of_memory(outcome):
            return outcome
        self._discard_worker()  # it may hold what ran out; the retry starts clean
        self.release_cached_memory()
        with budget.held(budget.capacity(1), alone=True, waiting=self._waiting_note(case)):
            torch.cuda.reset_peak_memory_stats()
            outcome = self._outcome_of(judge)
            peak = self._peak_bytes()
        if (
            _out_of_memory(outcome)
            and outcome.status in ("not_run", "error")
            and not (outcome.error_kind is not None or outcome.during_import)
        ):
            return CaseOutcome("not_run", budget.too_large(peak, outcome.message.splitlines()[-1]))
        return outcome

    def _cannot_run(self, exc: ReferenceCannotRun) -> str:
        """The not-run message, led by the hardware the leaderboard's code may need where its
        error, its sources or its devices say so (an AMD dtype, Blackwell's NVFP4)."""
        note = leaderboard_note(self.task, str(exc.error))
        if note is None:
            return str(exc)
        return f"not run: {note}\n{str(exc).removeprefix('not run: ')}"

    def _waiting_note(self, case: Case) -> Callable[[int, int], None]:
        label = f"{self.task.name} {case.kind}[{case.id}]"

        def note(need: int, others: int) -> None:
            print(
                f"kernelboard: {label} waits for {need / gpu_budget.GiB:.1f} GiB of device "
                f"memory (other cases on this GPU hold {others / gpu_budget.GiB:.1f} GiB)",
                file=sys.stderr,
                flush=True,
            )

        return note

    def _peak_bytes(self) -> int:
        """Device memory this case held at its peak: the judge's, its windows, its worker's."""
        import torch

        held = torch.cuda.max_memory_reserved()
        worker = self._worker
        if worker is not None:
            held += sum(w.size for w in worker.windows.values()) + worker.peak_bytes
        return held

    def _discard_worker(self) -> None:
        if self._worker is not None:
            self._worker.discard()
            self._worker = None

    def _outcome_of(self, judge: Callable[[], CaseOutcome]) -> CaseOutcome:
        try:
            return judge()
        except Skip as skip:
            return CaseOutcome("skipped", str(skip))
        except VerificationFailure as failure:
            return CaseOutcome("failed", str(failure))
        except ProfileError as exc:
            return CaseOutcome("error", f"profiling failed: {exc}")
        except WorkerFailure as failure:
            return self._failure_outcome(failure)
        except ReferenceCannotRun as exc:  # the same for every submission: not theirs to fail
            return CaseOutcome("not_run", self._cannot_run(exc))
        except OutputUncheckable as exc:
            return CaseOutcome("failed", str(exc))
        except Exception as exc:  # the harness itself raised
            # The case must still be recorded: a results document never silently lacks one.
            last_line = traceback.format_exception_only(exc)[-1].strip()
            # The record says what; where it came from is for the harness's maintainers.
            print("kernelboard: the judge raised while judging a case:", file=sys.stderr)
            traceback.print_exception(exc, file=sys.stderr)
            return CaseOutcome("error", f"the judge raised: {last_line}")

    def settle(self) -> None:
        """Finish the judge's own GPU work (input generation, copies) before the worker runs.

        Two processes' kernels on one GPU are time-sliced: judge work still queued would be
        counted in the worker's timed call, and the worker could read half-written inputs.
        """
        if self.use_cuda:
            import torch

            torch.cuda.synchronize()

    def _check_case(self, case: Case, timeout_s: float) -> CaseOutcome:
        generating = time.perf_counter()
        pristine = self.generate_or_not_run(case)
        self.check_s["generate"] += time.perf_counter() - generating
        worker = self.worker()
        trace("check: generated", worker.window_bytes)
        frugal = is_frugal(pristine)
        name = case_name(case)
        self.modules.frugal_cases[name] = frugal
        self.modules.input_bytes[name] = tensor_bytes(pristine)
        # A frugal call on the host: which inputs the reference writes is learnt before the
        # worker's copy is made (a copy for the reference beside it would be a third).
        on_host = frugal and not device_bytes(pristine)
        allowed = self._reference_writes(case, pristine) if on_host else UNKNOWN
        calling = time.perf_counter()
        sent = worker.private_copy(pristine)
        self._expect_reply(worker, name, frugal)
        self.settle()
        with lost_with(worker, sent):
            reply = worker.request(Op.CALL, timeout_s, data=sent, frugal=frugal)
        outgrew = 0 if frugal else worker.reply_outgrew  # learnt below if it passes
        self._last_call_us = reply.elapsed_s * 1e6
        self.check_s["call"] += time.perf_counter() - calling
        self.check_s["worker"] += reply.elapsed_s
        verifying = time.perf_counter()
        trace("check: replied", worker.window_bytes, reply.payload.get("peak_bytes"))
        # Which inputs it wrote (the reference runs on a copy of the inputs to say which it
        # writes itself); a frugal reply's output on the GPU has already been written over
        # them, while on the host they are still in the shared files the worker wrote.
        gpu_frugal = frugal and not on_host
        mutated = [] if gpu_frugal else self._mutated_inputs(pristine, worker, sent, allowed)
        output = own(reply)
        del sent, reply
        try:
            ok, message = self.verified(worker, case, pristine, output)
        except OutputUncheckable as exc:
            ok, message = False, str(exc)
        finally:
            trace("check: checked", worker.window_bytes)
            if frugal:
                self.release_cached_memory()
                trace("check: released", worker.window_bytes)
            self.check_s["verify"] += time.perf_counter() - verifying
        outcome = CaseOutcome("passed" if ok else "failed", message if not ok else "")
        # Only a passed output's size (a wrong one's could be anything), and only one a window
        # keeps (a passed view of a far larger buffer would have every later worker's window
        # hold that buffer's size; a larger output crosses once as host copies, as before).
        if ok and 0 < outgrew <= window.KEPT_WINDOW_MAX:
            self.modules.reply_bytes[name] = max(self.modules.reply_bytes.get(name, 0), outgrew)
        if not ok:
            pristine = None  # a diagnosis makes the input anew: not beside this one
            outcome.details["mismatch"] = self._diagnose(case, output)
        if mutated:
            outcome.details["mutated_inputs"] = mutated
            if ok and self.task.read_only_inputs:
                outcome.status = "failed"
                outcome.message = (
                    f"wrote into its input {', '.join(mutated)}; this leaderboard's inputs are "
                    "read-only (read_only_inputs in its task.yml or kernelboard.yml)"
                )
        return outcome

    def _diagnose(self, case: Case, output: Any) -> dict[str, Any] | None:
        """How a failed output differs from the reference's own output on the case's input."""
        try:
            fresh = self.generate(case)
            return diagnose(self.modules.ref_kernel(fresh), output)
        except Exception:  # only an explanation: the verdict stands without it
            return None

    def _mutated_inputs(
        self, pristine: Any, worker: WorkerProcess, sent: Any, allowed: Any = UNKNOWN
    ) -> list[str]:
        """The inputs the call wrote that the reference does not write on the same input.
        `allowed`: those the reference writes, where already known (None: it raised)."""
        seen = worker.inputs_as_seen(sent)
        if seen is None or self.submission is None:
            return []
        written = written_leaves(pristine, seen)
        if not written:
            return []
        if allowed is UNKNOWN:
            allowed = self._written_by_reference(pristine)
        if allowed is None:
            return []  # the check below says what the reference cannot do
        return [path for path in written if path not in allowed]

    def _written_by_reference(self, pristine: Any) -> set[str] | None:
        """The inputs ref_kernel writes, run on a copy of `pristine`; None where it raises."""
        expected = clone_data(pristine)
        try:
            self.modules.ref_kernel(expected)
        except LeaderboardError:
            return None
        return set(written_leaves(pristine, expected))

    def _reference_writes(self, case: Case, pristine: Any) -> set[str] | None:
        """_written_by_reference on the case's own input, once per case and leaderboard (its
        next submission asks again); never run for the reference itself, which is not asked."""
        if self.submission is None:
            return None
        key = case_name(case)
        known = self.modules.reference_writes
        if key not in known:
            known[key] = self._written_by_reference(pristine)
        return known[key]

    def generate_ahead(self, case: Case) -> int:
        """The inputs of the case's timed calls, made now, as many as its last timing used
        (in any judge of the run); none for a case not timed yet or judged frugally. A batch
        makes them beside other candidates' work (judge/inputs_ahead.py). How many were made."""
        name = case_name(case)
        calls = self.modules.timed_calls.get(name, 0)
        if not calls or self.modules.frugal_cases.get(name) is not False:
            return 0
        each = self.modules.input_bytes.get(name, 0)
        return self._inputs_ahead.make(name, calls, each, lambda i: self.generate(case, i))

    def generate_or_not_run(self, case: Case, call_index: int = 0) -> Any:
        """The case's input (made ahead, where it was); the leaderboard's own generate_input
        failing is not the submission's failure."""
        made = self._inputs_ahead.take(case_name(case), call_index) if call_index else None
        if made is not None:
            return made
        try:
            return self.generate(case, call_index)
        except LeaderboardError as exc:
            raise ReferenceCannotRun(exc) from None

    def verified(
        self, worker: WorkerProcess, case: Case, pristine: Any, output: Any
    ) -> tuple[bool, str]:
        """check(), then, for an output read in place, that it did not change meanwhile."""
        ok, message = self.check(case, pristine, output)
        if ok and not worker.output_unchanged(output):
            return False, (
                "the output changed while the judge checked it: work the call left running "
                "wrote into it after the reply"
            )
        return ok, message

    def check(self, case: Case, pristine: Any, output: Any) -> tuple[bool, str]:
        """check_implementation on the submission's output. Where it raises, the reference's
        own output on a fresh copy of the input decides whose failure it is: a check that
        cannot run on the reference's output either is the leaderboard's (the case is not
        run, for everyone alike); one that only this output breaks is the submission's."""
        try:
            return self.modules.check(pristine, output)
        except LeaderboardError as exc:
            first = exc
        try:
            fresh = self.generate(case)
            self.modules.check(fresh, self.modules.ref_kernel(clone_data(fresh)))
        except LeaderboardError as exc:
            raise ReferenceCannotRun(exc) from None
        raise OutputUncheckable(first) from None

    # -- one timed case --------------------------------------------------------------------------
    def benchmark_case(
        self,
        case: Case,
        timeout_s: float,
        plan: TimingPlan,
        progress: Progress | None = None,
        reference: Callable[[Case], dict[str, Any] | None] | None = None,
        checked: CaseOutcome | None = None,
        timer: CaseTiming | None = None,
    ) -> CaseOutcome:
        """Correctness on the case's own input, then timing on fresh inputs, then the speedup.
        checked: the correctness call on the case's own input was made already (check_case on
        this case, earlier, by this judge) and passed: only the timing is left. timer: times
        the case in place of this judge's time_case (in turns with the reference's worker,
        evaluation/paired.py); its failures are this judge's worker's."""
        outcome = self._judged(
            case,
            lambda: self._benchmark(case, timeout_s, plan, progress, reference, checked, timer),
        )
        self.release_cached_memory(windows=True)
        return outcome

    def _expect_reply(self, worker: WorkerProcess, name: str, frugal: bool) -> None:
        """Tell the worker the reply size a passed output of case `name` taught, before a
        request of that case: a fresh worker's outbound window grows to it first, where its
        first full-size reply would come back as host copies. A frugal reply comes back
        through the inbound window."""
        if not frugal:
            worker.expect_reply(self.modules.reply_bytes.get(name, 0))

    def release_cached_memory(self, windows: bool = False) -> None:
        """Hand the judge's cached, unused device memory back to the driver after a case, where
        it holds KEPT_CACHE_MAX or more.

        torch's allocator keeps freed blocks for reuse in this process only. Cases of growing
        size never reuse them, and the workers (other processes, timed next) could run out of
        memory that the judge holds but does not use. windows: at a case's end, also let go of
        the worker's device windows where they are large (an idle judge, the reference's while
        a submission runs, must not hold a copy of the last case's inputs)."""
        if not self.use_cuda:
            heap.trim()  # on the host: what malloc kept of the freed tensors (channel/heap.py)
            return
        import torch

        if windows and self._worker is not None and self._worker.alive:
            self._worker.release_windows(above=RELEASE_WINDOWS_ABOVE)
        if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() < KEPT_CACHE_MAX:
            return  # kept for the next case: a batch's small cases freed and remade it each time
        scrubbing.QUEUE.released(scrubbing.empty_cache(torch))

    def _benchmark(
        self,
        case: Case,
        timeout_s: float,
        plan: TimingPlan,
        progress: Progress | None,
        reference: Callable[[Case], dict[str, Any] | None] | None,
        checked: CaseOutcome | None = None,
        timer: CaseTiming | None = None,
    ) -> CaseOutcome:
        started = time.perf_counter()
        outcome = checked if checked is not None else self._check_case(case, timeout_s)
        if not outcome.passed:
            return outcome
        checked_s = checked.duration_s if checked is not None else time.perf_counter() - started
        if checked_s >= timeout_s:  # nothing left to time with: say what spent it
            return CaseOutcome(
                "timeout",
                f"timed out\nits correctness check took {checked_s:.0f} s of the case's "
                f"{timeout_s:g} s, before any call was timed",
                timed_out_after_s=timeout_s,
            )
        time_case = timer or self.time_case
        outcome = self._timed_outcome(time_case(case, plan, timeout_s - checked_s, progress))
        # The reference is timed next, in a worker of its own: this one's windows and the
        # judge's cache must not hold a copy of the inputs meanwhile.
        self.release_cached_memory(windows=True)
        trace("case: released")
        if outcome.passed and reference is not None:
            outcome.reference_timing = reference(case)
            outcome.speedup = outcome_speedup(outcome)
        return outcome

    @contextmanager
    def stopped(self) -> Iterator[None]:
        """This judge's worker, and the Python processes it forked, stopped for the duration:
        while the reference is timed (evaluation/submission.py, evaluation/paired.py) nothing
        of the submission runs, which could otherwise load the host's CPUs or launch GPU work
        under the reference's calls to gain a speedup. GPU work it queued before it was stopped
        still runs (docs/security.md)."""
        worker = self._worker
        with paused([worker.process.pid] if worker is not None and worker.alive else []):
            yield

    def time_case(
        self,
        case: Case,
        plan: TimingPlan,
        timeout_s: float,
        progress: Progress | None = None,
        first_call: int = 1,
        cpu: int | None = None,
    ) -> Measurement:
        """The case's timed calls in this judge's worker. first_call: the index of the first
        call's input; a turn of a case timed in turns (evaluation/paired.py) starts past 1, and
        what it takes does not set how many inputs the next judge makes ahead. cpu: the CPU the
        worker times them on, where it may use it (a turn's: the reference's worker's); None:
        the worker's own choice (worker/cpu_choice.py)."""
        worker = self.worker()
        # No spare worker starts (on the device, on the CPUs) while the calibration's and the
        # case's calls are timed (WorkerPool.quiet).
        with self.pool.quiet():
            return self._time_case(worker, case, plan, timeout_s, progress, first_call, cpu)

    def _time_case(
        self,
        worker: WorkerProcess,
        case: Case,
        plan: TimingPlan,
        timeout_s: float,
        progress: Progress | None,
        first_call: int = 1,
        cpu: int | None = None,
    ) -> Measurement:
        if self._calibration is None and self.use_cuda:
            calibrating = time.perf_counter()
            self._calibration = self._calibrate(worker, plan.flush_bytes)
            self.startup_s["calibrate"] += time.perf_counter() - calibrating
        preroll_us = preroll_for(self._calibration)

        frugal: bool | None = None  # decided on the first timed call's input
        scrub_waits: list[float] = []
        named = case_name(case)  # the worker keeps per-case state under it
        on_cpu = {} if cpu is None else {"cpu": cpu}

        def request_time(
            pristine: Any,
            flush_bytes: int,
            remaining_s: float,
            warm: bool = False,
            wake: bool = True,
        ) -> dict[str, Any]:
            nonlocal frugal
            frugal = is_frugal(pristine) if frugal is None else frugal
            warm = warm and not frugal  # a frugal case's inputs are too large to keep a copy
            trace("time: generated", worker.window_bytes)
            # Memory given back since the last call is still being scrubbed: a timed call
            # meanwhile would share DRAM with it (channel/scrubbing.py). Waited for before the
            # warm call, which helps only right before the timed one.
            scrub_waits.append(scrubbing.QUEUE.wait())
            # Before the input is sent: the warm call must not be able to reach it.
            warmed = (
                warm
                and worker.request(Op.WARM, remaining_s, case=named, wake=wake, **on_cpu).payload[
                    "warmed"
                ]
            )
            sent = worker.private_copy(pristine)
            self._expect_reply(worker, named, frugal)  # the reference's workers check nothing first
            self.settle()
            with lost_with(worker, sent):
                reply = worker.request(
                    Op.TIME,
                    remaining_s,
                    data=sent,
                    flush_bytes=flush_bytes,
                    preroll_us=preroll_us,
                    case=named,
                    keep=warm,
                    wake=wake,
                    frugal=frugal,
                    host_waits=self.use_cuda,  # the judge's clock checks a GPU call's report
                    **on_cpu,
                )
            payload = outside_clock.judged_times(reply, self._round_trip_us, self.use_cuda)
            payload["output"] = own(reply)
            payload[WARMED] = warmed
            trace("time: replied", worker.window_bytes, reply.payload.get("peak_bytes"))
            return payload

        def verify(pristine: Any, output: Any) -> tuple[bool, str]:
            try:
                return self.verified(worker, case, pristine, output)
            finally:
                trace("time: checked", worker.window_bytes)
                if frugal:  # the next call's input and the worker's call need the room
                    self.release_cached_memory()
                    trace("time: released", worker.window_bytes)

        timer = CaseTimer(self.generate_or_not_run, request_time, verify, self.use_cuda, progress)
        label = f"{self.task.name} {case.kind}[{case.id}]"
        try:
            measurement = timer.measure(
                case,
                plan,
                timeout_s,
                label,
                self._calibration,
                prior_call_us=self._last_call_us,
                first_call=first_call,
            )
        finally:
            self._inputs_ahead.drop(named)
        if first_call == 1:
            # How many inputs the next judge of this case makes ahead: as many as these took.
            self.modules.timed_calls[named] = measurement.warmup_calls + len(measurement.samples_us)
        measurement.details["frugal"] = bool(frugal)  # the record says how its calls were judged
        if any(scrub_waits):  # and how long its calls waited for freed memory to be scrubbed
            measurement.details["scrub_wait_ms"] = round(sum(scrub_waits) * 1e3, 3)
        self._last_call_us = None
        return measurement

    def _calibrate(self, worker: WorkerProcess, flush_bytes: int) -> dict[str, Any]:
        """The harness's own cost in this worker's timed calls (judge/calibration.py): in a
        candidate's worker, the figures the reference's workers measured, where they have; else
        the worker's own, which a reference worker's adds to them."""
        shared = self.modules.calibration
        figures = None if self.submission is None else shared.figures(flush_bytes)
        own = worker.request(
            Op.CALIBRATE,
            STARTUP_TIMEOUT_S,
            flush_bytes=flush_bytes,
            launch_allowance_us=LAUNCH_ALLOWANCE_US,
            calls=FULL_CALLS if figures is None else WARM_UP_CALLS,
        ).payload
        if figures is not None:
            return with_shared_figures(own, figures)
        # The judge bounds the pre-roll (stats/preroll.py); the bounded one is recorded.
        own["preroll_us"] = preroll_for(own)
        own["calibrated_by"] = OWN_WORKER
        if self.submission is None:
            shared.add(flush_bytes, own)
        return own

    def kernel_census(self, case: Case, timeout_s: float) -> list[tuple[str, float]] | None:
        """The GPU kernels one verified call of the case launches (name, device µs), or None
        where this cannot be known (no GPU, the call failed, the output was wrong)."""
        if not self.use_cuda:
            return None
        try:
            pristine = self.generate_or_not_run(case, UNSEEN_CALL_INDEX)
            worker = self.worker()
            # A large call's output comes back as the timed calls' do (read in place, the worker
            # stopped meanwhile), not as host copies: for a 6 GiB softmax those took 10 s.
            frugal = is_frugal(pristine)
            sent = worker.private_copy(pristine)
            self.settle()
            # Its kernels' durations are held against the timed ones (census_exceeds_timing).
            with lost_with(worker, sent), self.pool.quiet():
                reply = worker.request(Op.KERNELS, timeout_s, data=sent, frugal=frugal)
            launched = [(str(name), float(us)) for name, us in reply.payload["kernels"]]
            output = own(reply)
            del sent, reply
            try:
                ok, _ = self.verified(worker, case, pristine, output)
            finally:
                if frugal:
                    self.release_cached_memory()
        except Exception:  # a census is feedback: the case's verdict stands without it
            return None
        return launched if ok else None

    # -- one profiled case -----------------------------------------------------------------------
    def profile_case(
        self, case: Case, timeout_s: float, profiler: CaseProfiler, report: Path
    ) -> CaseOutcome:
        """Correctness on the case's own input (which also warms up), then one profiled call on
        a fresh input, its output verified; the profile's summary goes into the outcome."""
        return self._judged(case, lambda: self._profile(case, timeout_s, profiler, report))

    def _profile(
        self, case: Case, timeout_s: float, profiler: CaseProfiler, report: Path
    ) -> CaseOutcome:
        started = time.perf_counter()
        outcome = self._check_case(case, timeout_s)
        if not outcome.passed:
            return outcome
        pristine = self.generate_or_not_run(case, 1)
        worker = self.worker()
        sent = worker.private_copy(pristine)
        self.settle()
        with lost_with(worker, sent):
            reply = worker.request(
                Op.PROFILE,
                max(timeout_s - (time.perf_counter() - started), 1.0),
                data=sent,
                trace_path=None if profiler.ncu else str(report),
            )
        ok, message = self.check(case, pristine, own(reply))
        if not ok:
            return CaseOutcome("failed", f"the profiled call's output: {message}")
        log = ""
        if profiler.ncu:
            log = self.worker().output_tail()  # ncu's own messages
            self.close(grace_s=PROFILER_EXIT_GRACE_S)  # ncu writes the report at process exit
        outcome.details["profile"] = profiler.summarize(report, log)
        return outcome

    @staticmethod
    def _timed_outcome(measurement: Measurement) -> CaseOutcome:
        timing = measurement.to_record()
        if measurement.rejections:
            return CaseOutcome(
                "failed",
                "physically impossible timing: " + "; ".join(measurement.rejections),
                timing=timing,
                implausible_timing=True,
            )
        return CaseOutcome("passed", timing=timing)

    def _failure_outcome(self, failure: WorkerFailure) -> CaseOutcome:
        # Point tracebacks at the participant's own file, not the staged copy.
        staged = str(self.stage_dir / self.task.submission_name)
        message = str(failure).replace(staged, str(self.submission))
        if not self.use_cuda and lacks_cuda(failure):
            return CaseOutcome("skipped", "needs CUDA, which this machine lacks:\n" + message)
        return CaseOutcome(
            failure.status,
            message,
            error_kind=failure.kind,
            missing_module=failure.module,
            exception=failure.exception,
            during_import=getattr(failure, "during_import", False),
            timed_out_after_s=failure.timeout_s,
        )


def case_name(case: Case) -> str:
    """A case's name in what a leaderboard's modules learn about its cases."""
    return f"{case.kind}[{case.id}]"


def _out_of_memory(outcome: CaseOutcome) -> bool:
    return outcome.status != "passed" and gpu_budget.is_out_of_memory(outcome.message)


def lacks_cuda(failure: WorkerFailure) -> bool:
    """The failure says this machine has no CUDA, not that the code is wrong.

    An error reply says so by its kind (the worker classifies what raised); a worker that died
    or hung left only its output behind, which is all there is to read.
    """
    if failure.kind is not None:
        return failure.kind is ErrorKind.NEEDS_CUDA
    return needs_cuda(str(failure))
