"""`pytest leaderboards/`: every leaderboard proves itself before anyone submits to it.

Items: the task loads and its name is unique; a README made by `kernelboard new` describes
the problem the leaderboard now has; the reference passes its own check on every case; each
template imports; every solutions/correct/ file passes and every solutions/wrong/ file fails.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..channel.cloning import clone_data
from ..channel.protocol import ErrorKind
from ..judge.core import CaseOutcome, Skip, SubmissionJudge, generate_input
from ..judge.distributed import make_judge
from ..judge.evalpy import EvalPyJudge, is_evalpy_task
from ..judge.reference_loader import LeaderboardError
from ..spec.cases import BENCHMARK, TEST, Case, task_cases
from ..spec.discovery import SUBMISSION_SUFFIXES, find_repo_root, load_catalog
from ..spec.scaffold_readme import readme_from_scaffold, stale_scaffold_readme
from ..spec.task import TaskError, TaskSpec
from .items import CaseItem

if TYPE_CHECKING:
    from ..evaluation.session import JudgingSession


# Optional toolchains a shipped solution may use (pyproject extras): without them the solution
# cannot be judged here, which is not the solution's fault.
_OPTIONAL_MODULE = r"(jax|jaxlib|jax_cuda\d*_plugin)(\.\w+)*"
_MISSING_OPTIONAL = re.compile(rf"No module named '{_OPTIONAL_MODULE}'")


def missing_optional_package(message: str) -> str | None:
    """The optional package a failure message says is not installed, or None."""
    found = _MISSING_OPTIONAL.search(message)
    return found.group(1) if found else None


def outcome_missing_package(outcome: CaseOutcome) -> str | None:
    """The optional package an outcome's failure says is not installed, or None.

    A worker's error reply says so by its kind and module; only where no reply came (an
    eval.py problem's run, a worker that died) is there nothing but the message to read.
    """
    if outcome.error_kind is ErrorKind.MISSING_MODULE and outcome.missing_module:
        found = re.fullmatch(_OPTIONAL_MODULE, outcome.missing_module)
        return found.group(1) if found else None
    if outcome.error_kind is None:
        return missing_optional_package(outcome.message)
    return None


def skip_unsupported(task: TaskSpec) -> None:
    """Skip, with the reason, what the harness cannot judge yet (lang: cu is built by builds.py:
    compile-checked where nvcc exists, run on a GPU)."""


class LeaderboardSelfCheck:
    def __init__(self, parent: pytest.Collector, task: TaskSpec, state: JudgingSession):
        self.parent = parent
        self.task = task
        self.state = state

    def _item(self, name: str, run) -> pytest.Function:
        item = CaseItem.from_parent(self.parent, name=name, callobj=run)
        item.add_marker(pytest.mark.selfcheck)
        return item

    def items(self) -> Iterator[pytest.Function]:
        yield self._item("task", self.check_task)
        if readme_from_scaffold(self.task.root):  # only scaffolded folders carry this item
            yield self._item("readme", self.check_readme)
        for case in task_cases(self.task):
            yield self._item(
                f"reference[{case.kind}:{case.id}]", lambda case=case: self.check_reference(case)
            )
        for language, source in sorted(self.task.templates.items()):
            path = (self.task.root / source).resolve()
            yield self._item(f"template[{language}]", lambda path=path: self.check_template(path))
        for verdict in ("correct", "wrong"):
            folder = self.task.root / "solutions" / verdict
            for path in sorted(folder.glob("*")) if folder.is_dir() else []:
                if path.suffix in SUBMISSION_SUFFIXES and path.name != "__init__.py":
                    yield self._item(
                        f"solution[{verdict}/{path.name}]",
                        lambda path=path, verdict=verdict: self.check_solution(
                            path, verdict == "correct"
                        ),
                    )

    def _skip_unsupported(self) -> None:
        skip_unsupported(self.task)

    # -- the checks -----------------------------------------------------------------------------
    def check_task(self) -> None:
        root = find_repo_root(self.task.path)
        if root is None:
            return
        try:
            catalog = load_catalog(root)
        except TaskError as exc:
            pytest.fail(str(exc), pytrace=False)
        if self.task.path in catalog.broken:  # e.g. its name is used by another folder too
            pytest.fail(str(catalog.broken[self.task.path]), pytrace=False)
        owner = catalog.tasks.get(self.task.name)
        if owner is None or owner.path != self.task.path:
            pytest.fail(
                f"{self.task.path}: leaderboard name {self.task.name!r} is not unique",
                pytrace=False,
            )

    def check_readme(self) -> None:
        problem = stale_scaffold_readme(self.task.root)
        if problem is not None:
            pytest.fail(problem, pytrace=False)

    def check_reference(self, case: Case) -> None:
        self._skip_unsupported()
        if is_evalpy_task(self.task):
            pytest.skip("its own eval.py defines the contract: checked through solutions/")
        if case.kind == BENCHMARK and not self.state.use_cuda:
            pytest.skip("benchmark-sized case: the reference is checked on it on a GPU")
        modules = self.state.modules(self.task)
        if self.task.multi_gpu:
            self.check_distributed_reference(case)
            return
        cannot_run = None
        try:
            data = generate_input(modules, case)
            output = modules.ref_kernel(clone_data(data))
            ok, message = modules.check(data, output)
        except Skip as skip:
            pytest.skip(str(skip))
        except LeaderboardError as exc:  # its own file and line, not the harness's frames
            cannot_run = f"the reference cannot run {case.id}: {exc}"
        if cannot_run:  # failed outside the except block: no chained traceback to print
            pytest.fail(cannot_run, pytrace=False)
        if not ok:
            pytest.fail(f"the reference fails its own check on {case.id}: {message}", pytrace=False)

    def check_distributed_reference(self, case: Case) -> None:
        """A multi-GPU reference runs its collectives in its own group of ranks."""
        judge = self.state.reference_judge(self.task)  # its ranks stay up for the next case
        outcome = judge.check_case(case, self.state.timeout(self.task, TEST))
        if outcome.status == "skipped":
            pytest.skip(outcome.message)
        if not outcome.passed:
            pytest.fail(
                f"the reference fails on {case.id}: {outcome.status}: {outcome.message}",
                pytrace=False,
            )

    def _judge(self, path: Path) -> SubmissionJudge | EvalPyJudge:
        if is_evalpy_task(self.task):
            return EvalPyJudge(self.task, path, self.state.use_cuda)
        return make_judge(
            self.task,
            self.state.modules(self.task),
            path,
            self.state.use_cuda,
            self.state.pool,
            reference_ranks=self.state.reference_ranks(self.task),
        )

    def check_template(self, path: Path) -> None:
        self._skip_unsupported()
        judge = self._judge(path)
        try:
            outcome = judge.check_case(
                Case(TEST, 0, self.task.tests[0]), self.state.timeout(self.task, TEST)
            )
        finally:
            judge.close()
        # A template may be an honest stub; it only has to import and be callable.
        if outcome.status == "skipped":
            pytest.skip(outcome.message)
        # Under its own eval.py a stub template's exception ends the script: only a hang fails.
        crashed = outcome.status == "crashed" and not is_evalpy_task(self.task)
        no_entry = outcome.error_kind is ErrorKind.NO_ENTRY
        if crashed or outcome.status == "timeout" or no_entry:
            pytest.fail(f"template {path.name}: {outcome.message}", pytrace=False)

    def check_solution(self, path: Path, expect_pass: bool) -> None:
        self._skip_unsupported()
        judge = self._judge(path)
        outcomes = []
        try:
            for case in task_cases(self.task):
                if case.kind != TEST:
                    continue
                try:
                    outcomes.append(
                        (case, judge.check_case(case, self.state.timeout(self.task, TEST)))
                    )
                except Skip as skip:
                    pytest.skip(str(skip))
        finally:
            judge.close()
        # A case the reference cannot run is reported once, by the reference's own item.
        ran = [(c, o) for c, o in outcomes if o.status not in ("skipped", "not_run")]
        if not ran:
            pytest.skip(outcomes[0][1].message if outcomes else "no test cases")
        failures = [(c, o) for c, o in ran if not o.passed]
        missing = {outcome_missing_package(o) for _, o in failures}
        if expect_pass and failures and None not in missing:
            pytest.skip(
                f"{path.name} needs the optional package {missing.pop()}, not installed here "
                "(pip install 'kernelboard[jax]', and JAX's CUDA plugin on a GPU)"
            )
        if expect_pass and failures:
            case, outcome = failures[0]
            pytest.fail(
                f"correct solution {path.name} fails {len(failures)}/{len(ran)} cases; "
                f"first: {case.id}: {outcome.status}: {outcome.message}",
                pytrace=False,
            )
        if not expect_pass and not failures:
            pytest.fail(
                f"wrong solution {path.name} passes every test case; the tests miss its bug",
                pytrace=False,
            )
