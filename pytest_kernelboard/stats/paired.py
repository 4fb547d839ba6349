"""A speedup from a candidate and the reference timed in turns, over the same seconds.

A host-bound call's time is its host time, and a host's CPUs change speed from one second to
the next (another tenant on a core's sibling, a frequency step): two episodes a minute apart
compare two moments as much as two kernels. Timed in turns of a few calls each, both sides see
the same moments; each turn pair gives a ratio, and the ratios' spread is the speedup's noise.
On a 2-core CPU machine the same code's ratio moved 0.53 - 1.36 timed one episode each and
0.98 - 1.03 in turns of 25 calls (benchmarks/probes/interleave.py, docs/benchmarks.md).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .stats import student_t_critical


@dataclass(frozen=True)
class PairedRatio:
    """Each side's time, the geometric mean of its turns' medians (a host that switches speed
    within the turns makes the median of all their calls fall between two modes), and the
    speedup, their ratio, the geometric mean of the turn pairs' ratios. half_log: the
    half-width of the speedup's 95% interval in log units, t(K - 1) x sd / sqrt(K) of the K
    pairs' log ratios."""

    candidate_us: float
    reference_us: float
    half_log: float
    ratios: tuple[float, ...]

    @property
    def speedup(self) -> float:
        return self.reference_us / self.candidate_us

    @property
    def interval(self) -> tuple[float, float]:
        return self.speedup * math.exp(-self.half_log), self.speedup * math.exp(self.half_log)


def paired_ratio(
    candidate_turns: Sequence[Sequence[float]], reference_turns: Sequence[Sequence[float]]
) -> PairedRatio:
    """The speedup of K turn pairs (K >= 2), each side's samples (µs) by turn."""
    if len(candidate_turns) != len(reference_turns) or len(candidate_turns) < 2:
        raise ValueError(
            f"need the same number of turns on each side, at least 2: "
            f"{len(candidate_turns)} and {len(reference_turns)}"
        )
    medians = [
        (statistics.median(c), statistics.median(r))
        for c, r in zip(candidate_turns, reference_turns, strict=True)
    ]
    if min(min(pair) for pair in medians) <= 0:
        raise ValueError("a turn's median time is not positive: no ratio")
    logs = [math.log(r / c) for c, r in medians]
    half = student_t_critical(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return PairedRatio(
        candidate_us=statistics.geometric_mean(c for c, _ in medians),
        reference_us=statistics.geometric_mean(r for _, r in medians),
        half_log=half,
        ratios=tuple(math.exp(x) for x in logs),
    )


def split_interval(timing: Mapping[str, Any], half_log: float) -> dict[str, Any]:
    """A timing taken in turns, its ranking interval replaced by half the pair's log interval
    on each side, so that the speedup's interval from the two timings (scoring.speedup_interval)
    is the pair's own, [speedup / e^h, speedup x e^h]. Its samples' own interval stays as
    `rank_ci95_within_us`."""
    center = float(timing["rank_us"])
    spread = math.exp(half_log / 2)
    return {
        **timing,
        "rank_ci95_us": [center / spread, center * spread],
        "rank_ci95_within_us": timing.get("rank_ci95_within_us") or timing.get("rank_ci95_us"),
    }
