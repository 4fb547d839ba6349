"""Case records -> an evaluation's summary: pass counts, score, speedups, fast_p."""

from __future__ import annotations

from typing import Any

from .cases import BENCHMARK, TEST
from .task import TaskSpec


def summarize_evaluation(cases: list[dict[str, Any]], task: TaskSpec, mode: str) -> dict[str, Any]:
    tests = [c for c in cases if c["kind"] == TEST]
    benchmarks = [c for c in cases if c["kind"] == BENCHMARK]
    ran = [c for c in cases if c["status"] != "skipped"]
    if not ran:
        status = "skipped"
    elif all(c["status"] == "passed" for c in ran):
        status = "passed"
    else:
        status = "failed"
    summary: dict[str, Any] = {
        "status": status,
        "tests_passed": sum(c["status"] == "passed" for c in tests),
        "tests_total": len(tests),
        "benchmarks_passed": sum(c["status"] == "passed" for c in benchmarks),
        "benchmarks_total": len(benchmarks),
        "score_us": None,
        "score_ci95_us": None,
        "reference_score_us": None,
        "speedup": None,
        "speedup_geomean": None,
        "fast_p": None,
    }
    return summary
