"""Where a case's time limit comes from: the command line's override, else task.yml's key for
the case's kind and the run's mode; messages name the one that applied."""

from __future__ import annotations

from dataclasses import dataclass

from ..spec.cases import TEST
from ..spec.task import TaskSpec


@dataclass(frozen=True)
class Limits:
    """Where a case's time limit comes from, so a message can say which applied and how to
    change it: the command line's override, else task.yml's key for the mode."""

    override_s: float | None = None
    override_name: str = "--kb-timeout"

    def timeout(self, task: TaskSpec, kind: str, mode: str) -> float:
        return self.override_s if self.override_s else task_timeout(task, kind, mode)[1]

    def describe(self, task: TaskSpec, kind: str, mode: str) -> str:
        """'--kb-timeout 5' or 'test_timeout: 60 in task.yml', as the limit that applied."""
        if self.override_s:
            return f"{self.override_name} {self.override_s:g}"
        key, seconds = task_timeout(task, kind, mode)
        return f"{key}: {seconds:g} in {task.path.name}"


def task_timeout(task: TaskSpec, kind: str, mode: str) -> tuple[str, float]:
    """task.yml's key and seconds for a case of `kind` in `mode`."""
    if kind == TEST:
        return "test_timeout", task.test_timeout
    if mode == "leaderboard":
        return "ranked_timeout", task.ranked_timeout
    return "benchmark_timeout", task.benchmark_timeout
