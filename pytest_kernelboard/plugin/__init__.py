"""pytest plugin: task.yml and submission files become parametrized correctness and benchmark tests.

pytest submissions/vectoradd/alice/submission.py   # judge one submission
pytest submissions/                                # every submission
pytest leaderboards/                               # self-check every leaderboard
"""

from __future__ import annotations

import argparse
import contextlib
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from ..evaluation.limits import Limits
from ..evaluation.progress import Progress
from ..evaluation.session import JudgingSession
from ..judge import builds, devices
from ..judge.core import CaseOutcome
from ..judge.evalpy import is_evalpy_task
from ..judge.profiling import report_dir_for
from ..judge.staging import remove_staged
from ..presentation import (
    fmt_against_reference,
    fmt_progress,
    fmt_speedup,
    fmt_timed_case,
    fmt_us,
    one_call,
)
from ..results.records import MODES, read_run, write_run
from ..results.reference_runs import ReferenceTimings
from ..spec.cases import TEST, Case
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
from ..stats.scoring import rank_us
from ..supervisor import forked
from ..supervisor import sandbox as worker_sandbox
from . import bench_bridge
from .items import CaseItem
from .selfcheck import LeaderboardSelfCheck
from .xdist_gpus import configure as configure_xdist_gpus
from .xdist_gpus import worker_results_path, xdist_worker

STATE = pytest.StashKey["KernelboardState"]()


# A ranked run's reference is timed in several fresh workers: a short, host-bound case's time
# moves from one worker to the next by more than one worker's samples show (identical code
# read 4.3 and 10.6 us on one 1 M-element copy on an H200), and their spread, filed with the
# reference run, widens every later submission's interval on that case (stats/between_workers).
# A submission's case whose calls were mostly host-bound is timed in as many workers
# (evaluation/submission.py): one worker's host time is no more its time than the reference's.
RANKED_REFERENCE_WORKERS = 3


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of workers, 1 or more")
    return value


def reference_workers(config: pytest.Config) -> int:
    """--kb-reference-workers, or the mode's default."""
    chosen = config.getoption("kb_reference_workers")
    if chosen is not None:
        return chosen
    return RANKED_REFERENCE_WORKERS if config.getoption("kb_mode") == "leaderboard" else 1


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
    group.addoption(
        "--kb-reference-workers",
        type=_positive_int,
        metavar="N",
        help="fresh workers that time the reference on each case where this run times it; "
        "their spread widens every submission's interval on that case, and a submission's "
        "case whose calls were mostly host-bound is timed in as many (default: "
        f"{RANKED_REFERENCE_WORKERS} in leaderboard mode, 1 otherwise)",
    )


class KernelboardState:
    """Per pytest session: the judging session (evaluation core) and the finished document."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.mode: str = config.getoption("kb_mode")
        replay = config.getoption("kb_replay")
        self.session = JudgingSession(
            self.mode,
            root=Path(config.rootpath),
            precision=config.getoption("kb_precision"),
            limits=Limits(config.getoption("kb_timeout")),
            replayed_seeds=read_run(Path(replay)).get("seeds", {}) if replay else None,
            remeasure_reference=config.getoption("kb_remeasure_reference"),
            reference_workers=reference_workers(config),
            host_bound_workers=reference_workers(config),
            report_dir=report_dir_for(config.getoption("kb_results"), Path(config.rootpath)),
            progress=TerminalProgress(config),
        )
        self.document: dict[str, Any] | None = None  # the results document, once the run ends

    def close(self) -> None:
        self.session.close()


class TerminalProgress(Progress):
    """Lines in pytest's terminal while long work runs: a case being timed, a timed case done."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self._last = 0.0

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or self.config.get_verbosity() < 0:
            return
        # While a test runs, pytest captures the terminal's file descriptor too: write past it.
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line(line)
        reporter.currentfspath = None  # the next result starts a fresh, prefixed line

    def timing(self, label: str, n: int, median_us: float, halfwidth: float) -> None:
        now = time.monotonic()
        if now - self._last < 2.0:
            return
        self._last = now
        self._write(f"  timing {label}: {fmt_progress(n, median_us, halfwidth)}")

    def case_timed(self, label: str, line: str) -> None:
        self._write(f"  {label}: {line}")


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's, which reads --dist
def pytest_configure(config: pytest.Config) -> None:
    bench_bridge.settle_idle_xdist(config)
    # Before anything touches CUDA: under pytest-xdist each worker takes its own GPU, and its
    # items lease the GPUs they run on.
    shared = configure_xdist_gpus(config)
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
    """One submission judged against one leaderboard (the evaluation core does the judging)."""

    def __init__(
        self, *, task: TaskSpec, ref: SubmissionRef, state: KernelboardState, **kwargs: Any
    ):
        super().__init__(**kwargs)
        self.task = task
        self.ref = ref
        self.state = state
        self.evaluation = state.session.evaluation(task, ref)

    def collect(self):
        for case in self.evaluation.cases():
            name = f"{case.kind}[{case.id}]"
            if case.kind == TEST:
                item = CaseItem.from_parent(
                    self, name=name, callobj=lambda case=case: self.run_case(case)
                )
                item.add_marker(pytest.mark.correctness)
            elif self.state.mode == "profile" or is_evalpy_task(self.task):
                item = CaseItem.from_parent(
                    self, name=name, callobj=lambda case=case: self.run_case(case)
                )
                item.add_marker(bench_bridge.mark(group=self.task.name))
                # A case that fails or is not run times nothing: its verdict says why, and
                # pytest-benchmark's warning that the fixture went unused would only repeat it.
                item.add_marker(pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"))
            else:
                # pytest-benchmark's fixture: it reports our device samples; `-m benchmark`
                # selects it through its marker, which carries our replay timer.
                item = CaseItem.from_parent(
                    self,
                    name=name,
                    callobj=lambda benchmark, case=case: self.run_benchmark(case, benchmark),
                )
                item.add_marker(bench_bridge.mark(group=self.task.name))
                # A case that fails or is not run times nothing: its verdict says why, and
                # pytest-benchmark's warning that the fixture went unused would only repeat it.
                item.add_marker(pytest.mark.filterwarnings("ignore:Benchmark fixture was not used"))
            item.case = case  # the plugin's timed_cases reads which case an item judges
            yield item

    def run_case(self, case: Case) -> None:
        self.report(case, self.evaluation.run(case))

    def run_benchmark(self, case: Case, benchmark) -> None:
        outcome = self.evaluation.run(case)
        if outcome.details.get("reference_error"):
            failure = outcome.details["reference_error"]
            warnings.warn(
                pytest.PytestWarning(
                    f"{self.task.name} {case.kind}[{case.id}]: the reference could not be timed, "
                    f"so the run has no speedup: {failure.strip().splitlines()[-1]}"
                ),
                stacklevel=1,
            )
        if outcome.passed and outcome.timing:
            budget_s = self.state.session.plan(self.task).rule.budget_s
            self.state.session.progress.case_timed(
                f"{self.task.name} {case.kind}[{case.id}]", timed_line(outcome, budget_s)
            )
            extra = {
                "leaderboard": self.task.name,
                "case": case.id,
                "clock": outcome.timing["clock"],
            }
            if outcome.speedup is not None:
                extra["speedup"] = outcome.speedup
            bench_bridge.report_samples(benchmark, outcome.timing["samples_us"], extra_info=extra)
        self.report(case, outcome)

    def report(self, case: Case, outcome: CaseOutcome) -> None:
        if outcome.status in ("skipped", "not_run"):
            pytest.skip(outcome.message)
        if not outcome.passed:
            pytest.fail(f"{outcome.status}: {outcome.message}", pytrace=False)

    def teardown(self) -> None:
        self.evaluation.close()


# -- leaderboard self-check ---------------------------------------------------------------------
class LeaderboardFile(pytest.File):
    """task.yml under leaderboards/: the leaderboard checks itself."""

    task: TaskSpec | None = None  # once collected, where task.yml loads

    def collect(self):
        try:
            task = load_task(self.path)
        except TaskError as exc:
            yield failing_item(self, "task", str(exc))
            return
        self.task = task  # workers_needed reads which leaderboard its items check
        yield from LeaderboardSelfCheck(self, task, self.config.stash[STATE].session).items()


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


def pytest_collection_finish(session: pytest.Session) -> None:
    """A worker starts now, so its start-up overlaps with the first inputs' generation; the
    pool keeps no spare that no selected item will take."""
    state: KernelboardState = session.config.stash[STATE]
    if session.config.option.collectonly:
        return
    state.session.pool.expect(workers_needed(session.items, state.mode))
    state.session.pool.prestart()
    if xdist_worker(session.config) is None:  # under xdist a process runs only some of them
        state.session.timed_cases = timed_cases(session.items)


def timed_cases(items: list[pytest.Item]) -> dict[str, set[tuple[str, str]]]:
    """Per leaderboard, the timed cases the selected items judge (ReferenceTimings.key): where
    the run times the reference, it times it on these together (JudgingSession.timed_alongside)."""
    chosen: dict[str, set[tuple[str, str]]] = {}
    for item in items:
        case = getattr(item, "case", None)
        node = item.parent
        if case is not None and case.kind != TEST and isinstance(node, SubmissionNode):
            chosen.setdefault(node.task.name, set()).add(ReferenceTimings.key(node.task, case))
    return chosen


def workers_needed(items: list[pytest.Item], mode: str) -> int:
    """The workers the selected items take at least: one per submission judged, per template
    or solution a self-check runs, and, where cases are timed, per leaderboard's reference.
    (Under xdist every process sees all items: an estimate too high keeps today's spare.)
    An eval.py-driven leaderboard's items take none: its own eval.py runs them, in processes
    of its own, so a spare started for them would be a Python and torch start-up for nothing."""
    evalpy: dict[int, bool] = {}

    def pooled(item: pytest.Item) -> bool:
        task = getattr(item.parent, "task", None)
        if task is None:
            return True
        if id(task) not in evalpy:
            evalpy[id(task)] = is_evalpy_task(task)
        return not evalpy[id(task)]

    items = [item for item in items if pooled(item)]
    judged = [item.parent for item in items if isinstance(item.parent, SubmissionNode)]
    references = {node.task.name for node in judged} if mode != "test" else set()
    selfchecks = [
        item
        for item in items
        if item.get_closest_marker("selfcheck") and item.name.startswith(("template[", "solution["))
    ]
    return len(set(map(id, judged))) + len(references) + len(selfchecks)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state: KernelboardState = session.config.stash[STATE]
    state.close()
    remove_staged()  # the workers are gone; their staged folders go too
    forked.close_all()  # and the zygote they were forked from, with its pool
    recorder = state.session.recorder
    if recorder.empty:
        return
    state.document = recorder.document()
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
            line += f", score {fmt_us(s['score_us'])}"
            if s.get("speedup") is not None:
                timed_once = any(
                    one_call(case.get("timing")) or one_call(case.get("reference_timing"))
                    for case in evaluation["cases"]
                )
                line += ", " + fmt_against_reference(
                    s["speedup"], s.get("speedup_ci95"), s.get("tied_with_reference"), timed_once
                )
        terminalreporter.write_line(line)
        for reason_line in unrun_lines(evaluation["cases"]):
            terminalreporter.write_line("  " + reason_line)
        for case in evaluation["cases"]:
            if case.get("profile"):
                terminalreporter.write_line("  " + profile_line(case))
    path = config.getoption("kb_results")
    if path:
        terminalreporter.write_line(f"results: {path}")
    if state.mode == "profile":
        terminalreporter.write_line(f"profiles: {state.session.profiler.report_dir}")


def unrun_lines(cases: list[dict[str, Any]]) -> list[str]:
    """Why cases did not run, one line per reason (pytest shows only 's' for them without
    -rs): 'not run: test[size=17-seed=5236], test[size=127-seed=1001] and 2 more: an earlier
    case, ...::test[size=1-seed=4242], timed out'."""
    reasons: dict[tuple[str, str], list[str]] = {}
    for case in cases:
        if case["status"] in ("skipped", "not_run"):
            what = case["status"].replace("_", " ")
            lines = (case.get("message") or "").strip().splitlines() or ["no reason given"]
            reason = lines[0].removeprefix(f"{what}: ")
            reasons.setdefault((what, reason), []).append(f"{case['kind']}[{case['id']}]")
    out = []
    for (what, reason), ids in reasons.items():
        shown = ", ".join(ids) if len(ids) <= 3 else f"{', '.join(ids[:2])} and {len(ids) - 2} more"
        out.append(f"{what}: {shown}: {reason}")
    return out


def timed_line(outcome: CaseOutcome, budget_s: float | None = None) -> str:
    """A timed case in a line: its median and interval (none from a single call: budget_s is
    the case's time budget, named when it allowed only that call), and the speedup over the
    reference."""
    timing = outcome.timing or {}
    line = fmt_timed_case(timing, budget_s, timing.get("stop_reason"))
    reference = outcome.reference_timing
    if reference:
        line += f", reference {fmt_us(rank_us(reference))}"
        line += " (1 call)" if one_call(reference) else ""
    if outcome.speedup is not None:
        line += f": {fmt_speedup(outcome.speedup)}"
    line += f"; stopped: {timing.get('stop_reason') or '?'}"
    return line


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
