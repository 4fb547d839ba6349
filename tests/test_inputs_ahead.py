"""A timed case's inputs made ahead of its timing: the same inputs, none made between its calls."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from pytest_kernelboard.judge import inputs_ahead
from pytest_kernelboard.judge.core import SubmissionJudge, case_name
from pytest_kernelboard.judge.inputs_ahead import InputsAhead
from pytest_kernelboard.judge.measure import TimingPlan
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor.pool import WorkerPool

ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"
CORRECT = """
def custom_kernel(data):
    x, out = data
    return out.copy_(x + 1)
"""
# Two warm-up durations, the correctness call's the first of them, then eleven timed calls:
# twelve inputs a timing uses (a case that makes fewer gets none ahead: MIN_CALLS).
CALLS = 12
PLAN = TimingPlan(
    rule=StoppingRule(min_samples=11, max_samples=11, min_time_s=0.0, budget_s=60.0),
    warmup=Warmup(min_calls=2, max_calls=2),
    flush_bytes=0,
)


def test_inputs_are_made_for_as_many_calls_as_their_bounds_allow(monkeypatch):
    made = InputsAhead()
    assert made.make("many", 200, 16, lambda i: torch.zeros(4)) == inputs_ahead.MAX_CALLS
    monkeypatch.setattr(inputs_ahead, "MAX_BYTES", 3 * 1024)
    made_now: list[int] = []

    def one_kib(index: int) -> torch.Tensor:
        made_now.append(index)
        return torch.full((256,), float(index))

    monkeypatch.setattr(inputs_ahead, "MIN_CALLS", 2)
    assert made.make("case", 10, 1024, one_kib) == 3
    assert made_now == [1, 2, 3]  # none made only to be let go
    assert made.make("large", 10, 2048, one_kib) == 0 and made_now == [1, 2, 3]  # one fits
    assert made.make("few", 1, 16, one_kib) == 0 and made_now == [1, 2, 3]
    assert made.take("case", 2)[0] == 2.0
    assert made.take("case", 2) is None  # handed over once
    assert made.take("case", 7) is None  # beyond what was made
    made.drop("case")
    assert made.take("case", 1) is None


@pytest.fixture
def judges(tmp_path):
    task = load_task(ADDONE)
    modules = LeaderboardModules(task)
    made: list[SubmissionJudge] = []

    def judge() -> SubmissionJudge:
        path = tmp_path / f"submission_{len(made)}.py"
        path.write_text(textwrap.dedent(CORRECT))
        made.append(SubmissionJudge(task, modules, path, False, pool=WorkerPool(spares=0)))
        return made[-1]

    yield task, judge
    for each in made:
        each.close()


def test_a_timing_takes_the_inputs_made_ahead_and_makes_none_between_its_calls(judges):
    task, judge = judges
    case = Case(BENCHMARK, 0, task.benchmarks[0])
    first = judge()
    assert first.generate_ahead(case) == 0  # nothing is known of the case yet
    assert first.benchmark_case(case, 60.0, PLAN).passed
    assert first.modules.timed_calls[case_name(case)] == CALLS

    second = judge()
    checked = second.check_case(case, 60.0)  # the case's own input: small, not frugal
    assert checked.passed
    assert second.generate_ahead(case) == CALLS
    fresh = [second.generate(case, index)[0] for index in range(1, CALLS + 1)]
    made_between_calls: list[int] = []
    generate = second.generate

    def counted(case: Case, call_index: int = 0):
        made_between_calls.append(call_index)
        return generate(case, call_index)

    second.generate = counted
    timed = second.benchmark_case(case, 60.0, PLAN, checked=checked)
    assert timed.passed, timed.message
    assert made_between_calls == []
    # Each index's input is the one its seed makes, whenever it is made.
    third = judge()
    assert third.check_case(case, 60.0).passed
    third.generate_ahead(case)
    ahead = [third.generate_or_not_run(case, index)[0] for index in range(1, CALLS + 1)]
    assert all(torch.equal(a, b) for a, b in zip(ahead, fresh, strict=True))


def test_a_frugal_case_gets_no_inputs_ahead(judges):
    task, judge = judges
    case = Case(BENCHMARK, 0, task.benchmarks[0])
    one = judge()
    one.modules.timed_calls[case_name(case)] = CALLS
    one.modules.frugal_cases[case_name(case)] = True  # too large to hold a copy beside
    assert one.generate_ahead(case) == 0
