"""pytest plugin: task.yml and submission files become parametrized correctness and benchmark tests.

pytest submissions/vectoradd/alice/submission.py   # judge one submission
pytest submissions/                                # every submission
pytest leaderboards/                               # self-check every leaderboard
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from . import devices
from .cases import TEST, Case, draw_run_seeds, task_cases, with_run_seed
from .discovery import (
    LEADERBOARDS_DIR,
    SUBMISSION_SUFFIXES,
    SUBMISSIONS_DIR,
    SubmissionRef,
    find_repo_root,
    identify_submission,
    load_catalog,
    popcorn_headers,
)
from .judge import CaseOutcome, SubmissionJudge
from .records import MODES, read_run, write_run
from .reference_loader import LeaderboardModules
from .results import RunRecorder
from .selfcheck import LeaderboardSelfCheck
from .task import TaskError, TaskSpec, load_task
from .worker.client import WorkerPool

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
        "--kb-replay",
        metavar="RESULTS",
        help="reuse the seeds recorded in a results document (leaderboard mode)",
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
        self.replayed_seeds: dict[str, dict[str, int]] = {}
        replay = config.getoption("kb_replay")
        if replay:
            self.replayed_seeds = read_run(Path(replay)).get("seeds", {})

    @property
    def use_cuda(self) -> bool:
        return devices.has_cuda()

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
    config.addinivalue_line("markers", "correctness: a kernelboard correctness case")
    config.addinivalue_line("markers", "benchmark: a kernelboard timed case")
    config.addinivalue_line("markers", "selfcheck: a kernelboard leaderboard self-check")
    config.stash[STATE] = KernelboardState(config)


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
    if _is_submission_file(file_path, parent.config):
        return SubmissionFile.from_parent(parent, path=file_path)
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
        yield SubmissionNode.from_parent(
            self, name=f"{task.name}[{ref.display}]", task=task, ref=ref, state=state
        )


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
        if self._judge is None:
            modules = self.state.modules(self.task)
            self._judge = SubmissionJudge(
                self.task, modules, self.ref.path, self.state.use_cuda, self.state.pool
            )
        return self._judge

    def collect(self):
        seeds = self.state.seeds_for(self.task)
        for case in task_cases(self.task):
            case = with_run_seed(case, seeds)
            item = pytest.Function.from_parent(
                self, name=f"{case.kind}[{case.id}]", callobj=self._runner(case)
            )
            item.add_marker(pytest.mark.correctness if case.kind == TEST else pytest.mark.benchmark)
            yield item

    def _runner(self, case: Case):
        if case.kind == TEST:
            return lambda: self.run_case(case)
        return lambda: self.run_benchmark(case)

    def run_case(self, case: Case) -> None:
        if self.task.lang == "cu":
            pytest.skip("lang: cu leaderboards (CUDA source submissions) are not supported yet")
        timeout = self.state.timeout(self.task, case.kind)
        outcome = self.judge.check_case(case, timeout)
        self.report(case, outcome)

    def run_benchmark(self, case: Case) -> None:
        # Timing lands with the benchmark engine; until then a benchmark case is verified once.
        self.run_case(case)

    def report(self, case: Case, outcome: CaseOutcome) -> None:
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
    state.pool.close()
    if state.recorder.empty:
        return
    state.document = state.recorder.document()
    path = session.config.getoption("kb_results")
    if path:
        write_run(state.document, Path(path))


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    state: KernelboardState = config.stash[STATE]
    doc = state.document
    if doc is None:
        return
    terminalreporter.section(f"kernelboard ({state.mode} mode on {doc['environment']['device']})")
    for evaluation in doc["evaluations"]:
        s = evaluation["summary"]
        line = (
            f"{evaluation['leaderboard']['name']} {evaluation['submission']['file']}: {s['status']}, "
            f"tests {s['tests_passed']}/{s['tests_total']}"
        )
        if s.get("benchmarks_total") and state.mode != "test":
            line += f", benchmarks {s['benchmarks_passed']}/{s['benchmarks_total']}"
        if s.get("score_us") is not None:
            line += f", score {s['score_us']:.2f} us"
        terminalreporter.write_line(line)
    path = config.getoption("kb_results")
    if path:
        terminalreporter.write_line(f"results: {path}")
