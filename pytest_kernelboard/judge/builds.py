"""The build budget: importing a submission (its builds included) has its own time limit.

That import runs under `compile_timeout` in task.yml, or `--kb-compile-timeout`, before and
apart from the case timeouts, so a slow nvcc on a busy runner never eats a case's limit. The
builds themselves run in the worker (worker/builds.py).
"""

from __future__ import annotations

from typing import Any

from ..spec.task import DEFAULT_COMPILE_TIMEOUT_S
from ..supervisor.failures import ImportStalled, WorkerFailure

_override_s: float | None = None


def set_compile_timeout_override(seconds: float | None) -> None:
    """The command line's `--kb-compile-timeout` for this process (None: task.yml decides)."""
    global _override_s
    _override_s = seconds


def compile_timeout(task: Any) -> float:
    """Seconds the import of a submission (its builds included) may take."""
    if _override_s is not None:
        return _override_s
    return float(getattr(task, "compile_timeout", None) or DEFAULT_COMPILE_TIMEOUT_S)


def build_budget_failure(failure: Exception, budget_s: float) -> Exception:
    """A load that ran out of time says it was the build budget, not a case's limit; one that
    stalled (no progress for the stall window, supervisor/stall.py) says that instead."""
    if getattr(failure, "status", None) != "timeout" or isinstance(failure, ImportStalled):
        return failure
    return WorkerFailure(
        "timeout",
        f"importing the submission (its builds included) took longer than the build budget of "
        f"{budget_s:g} s (compile_timeout in task.yml, or --kb-compile-timeout)",
    )
