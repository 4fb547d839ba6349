"""Case records -> an evaluation's summary: pass counts, score, speedup, fast_p.

The run's one speedup is `speedup`: the reference's score over the submission's score, both
under the leaderboard's ranking_by (scoring.speedup). Site, PR comment and exports show it,
with its interval `speedup_ci95` (scoring.speedup_interval: `tied_with_reference` is that
interval holding 1).

`fast_p` counts a benchmark case as faster than p x only beyond noise (its speedup interval's
lower end above p); `fast_p_raw` is KernelBench's definition (the point speedup above p).
`case_fast_p` computes both from stored case records, so a reader can show the noise-aware
shares for records written before they were stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..spec.cases import BENCHMARK, TEST
from ..spec.task import TaskSpec
from ..stats.scoring import (
    case_speedup_interval,
    fast_p,
    fast_p_raw,
    rank_us,
    score,
    score_interval,
    speedup,
    speedup_interval,
    tied,
)
from .result_model import Status, Summary

# Cases that did not run count for nothing: not this machine's (skipped) or not the submission's
# to fail (not_run: the reference cannot run them, or an earlier case timed out, which failed).
UNRUN = ("skipped", "not_run")


def _status(cases: list[dict[str, Any]]) -> str:
    ran = [c for c in cases if c["status"] not in UNRUN]
    if not ran:
        return "skipped"
    return "passed" if all(c["status"] == "passed" for c in ran) else "failed"


def _score(timings: list[dict[str, Any]], ranking_by: str) -> tuple[float, list[float]]:
    ranked = [rank_us(t) for t in timings]
    return score(ranked, ranking_by), list(score_interval(timings, ranking_by))


def _shares(shares: Mapping[str, float]) -> dict[str, float]:
    return {key.removeprefix("fast_"): share for key, share in shares.items()}


def case_fast_p(
    cases: Sequence[Mapping[str, Any]],
) -> tuple[dict[str, float], dict[str, float]] | None:
    """(fast_p, fast_p_raw) over an evaluation's benchmark cases as stored ({"1": share, ...}),
    or None when no case has a speedup. A case counts as faster than p x in fast_p only when
    its speedup interval lies above p (scoring.case_speedup_interval); in fast_p_raw when its
    point speedup does. Cases the reference cannot run (not_run) count for no one."""
    benchmarks = [c for c in cases if c.get("kind") == BENCHMARK and c.get("status") != "not_run"]
    speedups = [c.get("speedup") for c in benchmarks]
    if not any(s is not None for s in speedups):
        return None
    correct = [c.get("status") == "passed" for c in benchmarks]
    intervals = [case_speedup_interval(c) for c in benchmarks]
    return _shares(fast_p(correct, intervals)), _shares(fast_p_raw(correct, speedups))


def summarize_evaluation(cases: list[dict[str, Any]], task: TaskSpec, mode: str) -> dict[str, Any]:
    """The summary as stored: see evaluation_summary."""
    return evaluation_summary(cases, task, mode).to_json()


def evaluation_summary(cases: list[dict[str, Any]], task: TaskSpec, mode: str) -> Summary:
    """Pass counts of the case records (as stored), and when every benchmark passed with a
    timing, the score, the reference's score and the speedup; fast_p when any case has one."""
    tests = [c for c in cases if c["kind"] == TEST]
    # The score is over the benchmarks the leaderboard can run: a case its reference cannot
    # run is missing for every submission alike.
    benchmarks = [c for c in cases if c["kind"] == BENCHMARK and c["status"] != "not_run"]
    summary = Summary(
        status=Status(_status(cases)),
        tests_passed=sum(c["status"] == "passed" for c in tests),
        tests_total=len(tests),
        benchmarks_passed=sum(c["status"] == "passed" for c in benchmarks),
        benchmarks_total=len(benchmarks),
        score_us=None,
        score_ci95_us=None,
        reference_score_us=None,
        speedup=None,
        speedup_ci95=None,
        tied_with_reference=None,
        fast_p=None,
        fast_p_raw=None,
    )
    if not benchmarks:
        return summary
    # fast_p describes whatever was timed; a score (and so a speedup) needs every benchmark.
    if (shares := case_fast_p(benchmarks)) is not None:
        summary = replace(summary, fast_p=shares[0], fast_p_raw=shares[1])
    # A case timed at 0 µs (below the CPU clock's grain, on a loaded machine) has no place in a
    # geometric mean: such a run gets no score rather than a crash.
    measurable = all(rank_us(c["timing"]) > 0 for c in benchmarks if c.get("timing"))
    if task.ranking_by == "geom" and not measurable:
        return summary
    correct = [c["status"] == "passed" for c in benchmarks]
    if all(correct) and all(c.get("timing") for c in benchmarks):
        score_us, interval = _score([c["timing"] for c in benchmarks], task.ranking_by)
        summary = replace(summary, score_us=score_us, score_ci95_us=tuple(interval))
        references = [c.get("reference_timing") for c in benchmarks]
        if all(references) and (
            task.ranking_by != "geom" or all(rank_us(r) > 0 for r in references)
        ):
            reference_us, reference_interval = _score(references, task.ranking_by)
            # A zero score (below the clock's grain) has no ratio.
            bounds = (
                speedup_interval(score_us, interval, reference_us, reference_interval)
                if score_us > 0
                else None
            )
            summary = replace(
                summary,
                reference_score_us=reference_us,
                speedup=speedup(reference_us, score_us) if score_us > 0 else None,
                tied_with_reference=tied(score_us, interval, reference_us, reference_interval),
                speedup_ci95=bounds if bounds and math.isfinite(bounds[1]) else None,
            )
    return summary
