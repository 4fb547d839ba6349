"""pytest plugin: task.yml and submission files become parametrized correctness and benchmark tests.

pytest submissions/vectoradd/alice/submission.py   # judge one submission
pytest submissions/                                # every submission
pytest leaderboards/                               # self-check every leaderboard
"""

from __future__ import annotations

import functools
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ..judge import builds, devices
from ..judge.core import CaseOutcome, Skip, SubmissionJudge
from ..judge.distributed import ReferenceRanks, make_judge
from ..judge.evalpy import EvalPyJudge, is_evalpy_task
from ..judge.measure import TimingPlan, VerificationFailure, default_flush_bytes
from ..judge.profiling import CaseProfiler, report_dir_for
from ..judge.reference_loader import LeaderboardModules
from ..judge.staging import remove_staged
from ..results.recorder import RunRecorder
from ..results.records import MODES, read_run, write_run
from ..results.reference_runs import ReferenceTimings, ReferenceUnavailable
from ..spec.cases import BENCHMARK, TEST, Case, draw_run_seeds, task_cases, with_run_seed
from ..spec.discovery import (
    LEADERBOARDS_DIR,
    SUBMISSION_SUFFIXES,
    SUBMISSIONS_DIR,
    SubmissionRef,
    find_repo_root,
    identify_submission,
    load_catalog,
    popcorn_headers,
)
from ..spec.task import TaskError, TaskSpec, load_task
from ..stats.stopping import StoppingRule, Warmup, budget_for_case
from ..worker import sandbox as worker_sandbox
from ..worker.client import WorkerFailure, WorkerPool
from . import bench_bridge
from .selfcheck import LeaderboardSelfCheck, skip_unsupported
from .xdist_gpus import pin_xdist_worker, worker_results_path, xdist_worker

STATE = pytest.StashKey["KernelboardState"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kernelboard", "kernelboard GPU-kernel leaderboard")
    group.addoption(
        "--kb-mode",
        choices=MODES,
        default="test",
        help="test: correctness cases only (default); benchmark: correctness, then timing; "
        "leaderboard: the ranked run on fresh random seeds; profile: one profiled call per benchmark",
    )
    group.addoption(
        "--kb-results", metavar="PATH", help="write the run's results document (JSON) here"
    )
    group.addoption(
        "--kb-leaderboard", metavar="NAME", help="judge the given files against this leaderboard"
    )
    group.addoption(
        "--kb-timeout",
        type=float,
        metavar="SECONDS",
        help="override the task's per-case time limit",
    )
    group.addoption(
        "--kb-compile-timeout",
        type=float,
        metavar="SECONDS",
        help="override the task's build budget: the time importing a submission may take",
    )
    group.addoption(
        "--kb-precision",
        type=float,
        default=0.005,
        metavar="FRACTION",
        help="stop timing a case once the 95%% interval of its median is within +/- this "
        "fraction of it (default 0.005)",
    )
    group.addoption(
        "--kb-replay",
        metavar="RESULTS",
        help="reuse the seeds recorded in a results document (leaderboard mode)",
    )
    group.addoption(
        "--kb-remeasure-reference",
        action="store_true",
        help="time the reference in this run even when results/ holds a matching reference run",
    )


class KernelboardState:
    """Per-session state: leaderboard catalogs, judges' shared modules, the results recorder."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.mode: str = config.getoption("kb_mode")
        self.pool = WorkerPool()
        self.recorder = RunRecorder(self.mode, root=Path(config.rootpath))
        self._modules: dict[Path, LeaderboardModules] = {}
        self.document: dict[str, Any] | None = None  # the results document, once the run ends
        self._reference_judges: dict[str, SubmissionJudge] = {}
        self.references = ReferenceTimings(
            devices.environment,
            self._measure_reference,
            self.recorder.record_reference,
            lambda task: find_repo_root(task.root),
            remeasure=config.getoption("kb_remeasure_reference"),
        )
        self._reference_ranks: dict[str, ReferenceRanks] = {}
        self._last_progress = 0.0
        self.replayed_seeds: dict[str, dict[str, int]] = {}
        replay = config.getoption("kb_replay")
        if replay:
            self.replayed_seeds = read_run(Path(replay)).get("seeds", {})

    @property
    def use_cuda(self) -> bool:
        return devices.has_cuda()

    @functools.cached_property
    def profiler(self) -> CaseProfiler:
        report_dir = report_dir_for(self.config.getoption("kb_results"), Path(self.config.rootpath))
        return CaseProfiler.for_machine(report_dir, self.use_cuda)

    def plan(self, task: TaskSpec) -> TimingPlan:
        budget = budget_for_case(self.timeout(task, BENCHMARK), max(len(task.benchmarks), 1))
        return TimingPlan(
            rule=StoppingRule(precision=self.config.getoption("kb_precision"), budget_s=budget),
            warmup=Warmup(),
            flush_bytes=default_flush_bytes() if self.use_cuda else 0,
        )

    def reference_timer(self, task: TaskSpec):
        """The reference's timing of a case: from a matching reference run in results/, else
        timed here once per run and case (reference_runs.py)."""

        def timing(case: Case) -> dict[str, Any] | None:
            found = self.references.get(task, case)
            return found.timing if found else None

        return timing

    def _measure_reference(self, task: TaskSpec, case: Case) -> dict[str, Any] | None:
        """Times the reference on the case, the same way as a submission, in its own worker."""
        judge = self.reference_judge(task)
        plan = replace(self.plan(task), verify=False)
        try:
            return judge.time_case(case, plan, self.timeout(task, BENCHMARK)).to_record()
        except (WorkerFailure, Skip, VerificationFailure) as exc:
            # The submission's case stands without a speedup; the reason goes into its record.
            raise ReferenceUnavailable(str(exc) or type(exc).__name__) from None

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
            self._reference_ranks[task.name] = ReferenceRanks(task, self.pool, self.use_cuda)
        return self._reference_ranks[task.name]

    def progress(self, label: str, n: int, median_us: float, halfwidth: float) -> None:
        """A line in pytest's terminal while a long case is being timed."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0:
            return
        now = time.monotonic()
        if now - self._last_progress < 2.0:
            return
        self._last_progress = now
        reporter.write_line(
            f"  timing {label}: {n} samples, median {median_us:.2f} us +/- {100 * halfwidth:.2f}%"
        )
        reporter.currentfspath = None  # the next result starts a fresh, prefixed line

    def close(self) -> None:
        for judge in self._reference_judges.values():
            judge.close()
        for ranks in self._reference_ranks.values():
            ranks.close()
        self.pool.close()

    def modules(self, task: TaskSpec) -> LeaderboardModules:
        if task.path not in self._modules:
            self._modules[task.path] = LeaderboardModules(task)
        return self._modules[task.path]

    def seeds_for(self, task: TaskSpec) -> dict[str, int] | None:
        """Fresh per-run seeds in leaderboard mode (recorded in the results), else task.yml's."""
        if self.mode != "leaderboard":
            return None
        if task.name not in self.recorder.seeds:
            self.recorder.seeds[task.name] = draw_run_seeds(
                task, self.replayed_seeds.get(task.name)
            )
        return self.recorder.seeds[task.name]

    def timeout(self, task: TaskSpec, kind: str) -> float:
        override = self.config.getoption("kb_timeout")
        if override:
            return override
        if kind == TEST:
            return task.test_timeout
        return task.ranked_timeout if self.mode == "leaderboard" else task.benchmark_timeout


def pytest_configure(config: pytest.Config) -> None:
    # Before anything touches CUDA: under pytest-xdist each worker takes its own GPU.
    shared = pin_xdist_worker(xdist_worker(config))
    if shared:
        config.issue_config_time_warning(pytest.PytestConfigWarning(shared), stacklevel=2)
    config.addinivalue_line("markers", "correctness: a kernelboard correctness case")
    config.addinivalue_line("markers", "benchmark: a kernelboard timed case")
    config.addinivalue_line("markers", "selfcheck: a kernelboard leaderboard self-check")
    try:
        if worker_sandbox.policy() == "require":
            worker_sandbox.enabled()
    except worker_sandbox.SandboxUnavailable as exc:
        raise pytest.UsageError(str(exc)) from None  # refuse before judging anything
    config.stash[STATE] = KernelboardState(config)
    builds.set_compile_timeout_override(config.getoption("kb_compile_timeout"))
    bench_bridge.install(config, devices.environment)


def _is_submission_file(file_path: Path, config: pytest.Config) -> bool:
    if file_path.suffix not in SUBMISSION_SUFFIXES or file_path.name.startswith(
        ("test_", "conftest")
    ):
        return False
    if file_path.name == "__init__.py":
        return False
    if SUBMISSIONS_DIR in file_path.parts:
        return True
    # Outside submissions/, only files named on the command line that say which leaderboard.
    named = any(Path(arg).resolve() == file_path.resolve() for arg in config.args)
    if not named:
        return False
    if config.getoption("kb_leaderboard"):
        return True
    return "leaderboard" in popcorn_headers(file_path.read_text(errors="replace"))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if (
        file_path.name == "task.yml"
        and LEADERBOARDS_DIR in file_path.parts
        and "solutions" not in file_path.parts
    ):
        return LeaderboardFile.from_parent(parent, path=file_path)
    # A .py file named on the command line goes through pytest_pycollect_makemodule instead.
    if file_path.suffix == ".py" and parent.session.isinitpath(file_path):
        return None
    if _is_submission_file(file_path, parent.config):
        return SubmissionFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(
    module_path: Path, parent: pytest.Collector
) -> pytest.Collector | None:
    """A submission named on the command line is judged, never imported as a test module."""
    if _is_submission_file(module_path, parent.config):
        return SubmissionFile.from_parent(parent, path=module_path)
    return None


def failing_item(parent: pytest.Collector, name: str, message: str) -> pytest.Function:
    """An item that fails with a clear message (instead of a collection traceback)."""

    def fail() -> None:
        pytest.fail(message, pytrace=False)

    return pytest.Function.from_parent(parent, name=name, callobj=fail)


# -- submissions --------------------------------------------------------------------------------
class SubmissionFile(pytest.File):
    """A participant's file: one child per leaderboard it is judged against."""

    def collect(self):
        state: KernelboardState = self.config.stash[STATE]
        state.pool.prestart()  # the worker's start-up overlaps with collection and input generation
        ref = identify_submission(self.path, self.config.getoption("kb_leaderboard"))
        if ref is None:
            yield failing_item(
                self,
                "submission",
                f"{self.path}: no leaderboard named; use "
                "submissions/<leaderboard>/<author>/, a '#!POPCORN leaderboard <name>' "
                "line or --kb-leaderboard",
            )
            return
        root = find_repo_root(self.path) or find_repo_root(Path(self.config.rootpath))
        if root is None:
            yield failing_item(
                self, "submission", f"{self.path}: no {LEADERBOARDS_DIR}/ folder above it"
            )
            return
        try:
            task = load_catalog(root).get(ref.leaderboard)
        except (TaskError, KeyError) as exc:
            yield failing_item(self, "submission", f"{self.path}: {exc.args[0]}")
            return
        yield SubmissionNode.from_parent(self, name=task.name, task=task, ref=ref, state=state)


class SubmissionNode(pytest.Collector):
    """One submission judged against one leaderboard; owns the worker for its items."""

    def __init__(
        self, *, task: TaskSpec, ref: SubmissionRef, state: KernelboardState, **kwargs: Any
    ):
        super().__init__(**kwargs)
        self.task = task
        self.ref = ref
        self.state = state
        self._judge: SubmissionJudge | None = None

    @property
    def judge(self) -> SubmissionJudge:
        if self._judge is None and is_evalpy_task(self.task):  # its own eval.py judges it
            self._judge = EvalPyJudge(
                self.task,
                self.ref.path,
                self.state.use_cuda,
                self.state.mode,
                self.state.seeds_for(self.task),
            )
        if self._judge is None:
            modules = self.state.modules(self.task)
            self._judge = make_judge(
                self.task,
                modules,
                self.ref.path,
                self.state.use_cuda,
                self.state.pool,
                reference_ranks=self.state.reference_ranks(self.task),
            )
        return self._judge

    def collect(self):
        seeds = self.state.seeds_for(self.task)
        for case in task_cases(self.task):
            case = with_run_seed(case, seeds)
            name = f"{case.kind}[{case.id}]"
            if case.kind == TEST:
                item = pytest.Function.from_parent(
                    self, name=name, callobj=lambda case=case: self.run_case(case)
                )
                item.add_marker(pytest.mark.correctness)
            elif self.state.mode == "profile":
                item = pytest.Function.from_parent(
                    self, name=name, callobj=lambda case=case: self.run_profile(case)
                )
                item.add_marker(bench_bridge.mark(group=self.task.name))
            else:
                item = pytest.Function.from_parent(
                    self, name=name, callobj=self._benchmark_runner(case)
                )
                # pytest-benchmark's own marker, carrying our replay timer; `-m benchmark` selects it.
                item.add_marker(bench_bridge.mark(group=self.task.name))
            yield item

    def _benchmark_runner(self, case: Case):
        if is_evalpy_task(self.task):  # eval.py reports statistics, not samples to replay
            return lambda: self.run_benchmark(case, None)

        def run(benchmark) -> None:  # pytest-benchmark's fixture: it reports our device samples
            self.run_benchmark(case, benchmark)

        return run

    def run_case(self, case: Case) -> None:
        skip_unsupported(self.task)
        timeout = self.state.timeout(self.task, case.kind)
        outcome = self.judge.check_case(case, timeout)
        self.report(case, outcome)

    def run_benchmark(self, case: Case, benchmark) -> None:
        skip_unsupported(self.task)
        outcome = self.judge.benchmark_case(
            case,
            self.state.timeout(self.task, case.kind),
            self.state.plan(self.task),
            progress=self.state.progress,
            reference=self.state.reference_timer(self.task),
        )
        found = self.state.references.get(self.task, case) if outcome.reference_timing else None
        if found is not None:  # which reference run the speedup came from; it keeps the samples
            outcome.reference_timing = found.summary
            outcome.details["reference_run"] = dict(found.provenance)
        failure = self.state.references.failure(self.task, case)
        if outcome.passed and found is None and failure:
            outcome.details["reference_error"] = failure
            warnings.warn(
                pytest.PytestWarning(
                    f"{self.task.name} {case.kind}[{case.id}]: the reference could not be timed, "
                    f"so the run has no speedup: {failure.strip().splitlines()[-1]}"
                ),
                stacklevel=1,
            )
        self.state.recorder.record(self.task, self.ref, case, outcome)
        if outcome.passed and outcome.timing and benchmark is not None:
            extra = {
                "leaderboard": self.task.name,
                "case": case.id,
                "clock": outcome.timing["clock"],
            }
            if outcome.speedup is not None:
                extra["speedup"] = outcome.speedup
            bench_bridge.report_samples(benchmark, outcome.timing["samples_us"], extra_info=extra)
        self.report(case, outcome, recorded=True)

    def run_profile(self, case: Case) -> None:
        """One profiled call; under Nsight Compute in a worker of its own, started under ncu."""
        skip_unsupported(self.task)
        profiler = self.state.profiler
        report = profiler.report_path(self.task.name, self.ref.display, case.id)
        launcher = None if is_evalpy_task(self.task) else profiler.launcher(report)
        judge = self.judge
        if launcher is not None:
            modules = self.state.modules(self.task)
            judge = make_judge(
                self.task, modules, self.ref.path, True, WorkerPool(launcher=launcher)
            )
        try:
            outcome = judge.profile_case(
                case, self.state.timeout(self.task, case.kind), profiler, report
            )
        finally:
            if judge is not self.judge:
                judge.close()
        self.report(case, outcome)

    def report(self, case: Case, outcome: CaseOutcome, recorded: bool = False) -> None:
        if not recorded:
            self.state.recorder.record(self.task, self.ref, case, outcome)
        if outcome.status == "skipped":
            pytest.skip(outcome.message)
        if not outcome.passed:
            pytest.fail(f"{outcome.status}: {outcome.message}", pytrace=False)

    def teardown(self) -> None:
        if self._judge is not None:
            self._judge.close()


# -- leaderboard self-check ---------------------------------------------------------------------
class LeaderboardFile(pytest.File):
    """task.yml under leaderboards/: the leaderboard checks itself."""

    def collect(self):
        try:
            task = load_task(self.path)
        except TaskError as exc:
            yield failing_item(self, "task", str(exc))
            return
        yield from LeaderboardSelfCheck(self, task, self.config.stash[STATE]).items()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In test mode the timed cases are deselected (they run in benchmark/leaderboard mode)."""
    if config.getoption("kb_mode") != "test":
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("benchmark") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_sessionfinish(session: pytest.Session) -> None:
    state: KernelboardState = session.config.stash[STATE]
    state.close()
    remove_staged()  # the workers are gone; their staged folders go too
    if state.recorder.empty:
        return
    state.document = state.recorder.document()
    path = session.config.getoption("kb_results")
    if path:
        write_run(state.document, worker_results_path(Path(path), xdist_worker(session.config)))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    state: KernelboardState = config.stash[STATE]
    doc = state.document
    if doc is None:
        return
    terminalreporter.section(f"kernelboard ({state.mode} mode on {doc['environment']['device']})")
    for evaluation in doc["evaluations"]:
        s = evaluation["summary"]
        if evaluation["submission"].get("is_reference"):
            terminalreporter.write_line(
                f"{evaluation['leaderboard']['name']}: reference timed in this run on "
                f"{len(evaluation['cases'])} case(s); `kernelboard results add` files it as a "
                "reference run that later runs reuse"
            )
            continue
        line = (
            f"{evaluation['leaderboard']['name']} {evaluation['submission']['file']}: {s['status']}, "
            f"tests {s['tests_passed']}/{s['tests_total']}"
        )
        if s.get("benchmarks_total") and state.mode != "test":
            line += f", benchmarks {s['benchmarks_passed']}/{s['benchmarks_total']}"
        if s.get("score_us") is not None:
            line += f", score {s['score_us']:.2f} us"
        terminalreporter.write_line(line)
        for case in evaluation["cases"]:
            if case.get("profile"):
                terminalreporter.write_line("  " + profile_line(case))
    path = config.getoption("kb_results")
    if path:
        terminalreporter.write_line(f"results: {path}")
    if state.mode == "profile":
        terminalreporter.write_line(f"profiles: {state.profiler.report_dir}")


def profile_line(case: dict[str, Any]) -> str:
    """One case's profile in a line: the tool, the total and the entry that took longest."""
    profile = case["profile"]
    line = (
        f"{case['kind']}[{case['id']}] {profile['tool']}: {profile['calls_total']} "
        f"{profile['what']}, {profile['duration_us_total']:.2f} us"
    )
    if profile["top"]:
        top = profile["top"][0]
        line += f"; longest {top['name'][:60]} {top.get('duration_us') or 0:.2f} us"
    return line + (f" ({profile['note']})" if profile.get("note") else "")
