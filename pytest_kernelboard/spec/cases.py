"""Task spec -> cases: what one test item evaluates, with a stable, readable id."""

from __future__ import annotations

import random
import secrets
import zlib
from dataclasses import dataclass, replace
from typing import Any

from .task import TaskSpec

TEST = "test"
BENCHMARK = "benchmark"


def _format_value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "x".join(_format_value(v) for v in value)
    return str(value).replace(" ", "")


@dataclass(frozen=True)
class Case:
    kind: str  # TEST or BENCHMARK
    index: int  # position in task.yml's list
    spec: dict[str, Any]  # keyword arguments for generate_input, as task.yml wrote them
    run_seed: int | None = None  # the seed actually used; differs from spec in leaderboard mode

    @property
    def id(self) -> str:
        """'size=128-seed=5236': task.yml's values, stable across runs (for -k and comparisons)."""
        return "-".join(f"{k}={_format_value(v)}" for k, v in self.spec.items()) or str(self.index)

    @property
    def seed(self) -> int | None:
        if self.run_seed is not None:
            return self.run_seed
        value = self.spec.get("seed")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def call_seed(self, call_index: int = 0) -> int:
        """Seed of the call_index-th input of this case (0: the case's own seed)."""
        base = self.seed if self.seed is not None else zlib.crc32(self.id.encode())
        return derive_seed(base, call_index)

    def arguments(self, call_index: int = 0) -> dict[str, Any]:
        """generate_input's keyword arguments; call_index > 0 gives a fresh input of the same shape."""
        args = dict(self.spec)
        if "seed" in args:
            args["seed"] = self.call_seed(call_index)
        return args


# The index of an input no correctness check or timed call is given (timed calls count up
# from 1): a census of a call's kernels on it cannot be answered from a candidate's cache.
UNSEEN_CALL_INDEX = -1


def derive_seed(seed: int, call_index: int) -> int:
    """Seed of the call_index-th input of a case: reproducible, distinct per call."""
    if call_index == 0:
        return seed
    return random.Random(seed * 1_000_003 + call_index).randrange(1, 2**31 - 1)


def task_cases(task: TaskSpec) -> list[Case]:
    return [Case(TEST, i, spec) for i, spec in enumerate(task.tests)] + [
        Case(BENCHMARK, i, spec) for i, spec in enumerate(task.benchmarks)
    ]


def draw_run_seeds(task: TaskSpec, recorded: dict[str, int] | None = None) -> dict[str, int]:
    """Fresh seeds for a ranked run, keyed '<kind>:<index>'; recorded ones replay a run.

    A task-level `seed` makes ranked runs deterministic (GPU MODE's fixed-seed option).
    """
    rng = random.Random(task.seed) if task.seed is not None else secrets.SystemRandom()
    seeds = {}
    for case in task_cases(task):
        key = f"{case.kind}:{case.index}"
        seeds[key] = rng.randrange(1, 2**31 - 1)
    if recorded:
        seeds.update({k: v for k, v in recorded.items() if k in seeds})
    return seeds


def with_run_seed(case: Case, seeds: dict[str, int] | None) -> Case:
    if not seeds:
        return case
    return replace(case, run_seed=seeds.get(f"{case.kind}:{case.index}"))
