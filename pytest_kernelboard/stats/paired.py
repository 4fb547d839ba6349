"""A speedup from a candidate and the reference timed in turns, over the same seconds.

A host-bound call's time is its host time, and a host's CPUs change speed from one second to
the next (another tenant on a core's sibling, a frequency step): two episodes a minute apart
compare two moments as much as two kernels. Timed in turns of a few calls each, both sides see
the same moments; each turn pair gives a ratio, and the ratios' spread is the speedup's noise.
On a 2-core CPU machine the same code's ratio moved 0.53 - 1.36 timed one episode each and
0.98 - 1.03 in turns of 25 calls (benchmarks/probes/interleave.py, docs/benchmarks.md).

A case's ten pairs' spread is itself a rough number (nine degrees of freedom): now and then it
reads half its true size, and the speedup's interval with it. The turns' noise is the host's and
the case's more than the candidate's, so a run pools it over the candidates it has timed in
turns on the case (TurnNoise), and a candidate's interval is at least as wide as the pooled
spread says. On an H200, 30 copies of a host-bound problem's own code timed in turns read
speedups whose logs spread 0.057, and whose own intervals ranged from ±3.4% to ±27%.

The pairs cancel the host's moment only where both sides spend their time alike, and they see a
fraction of a second of it. Where the two sides' work differs, the speedup moves from one run to
the next by more than its pairs show: a run that measured how far the reference's time moves
over it (ReferenceSpread) adds that part (run_to_run_half_log).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .stats import student_t_critical


class TurnNoise:
    """The spread of the turn pairs' log ratios about their candidate's mean, pooled over the
    candidates a run timed in turns on one case (each adds K - 1 degrees of freedom)."""

    def __init__(self) -> None:
        self._squares = 0.0
        self.df = 0

    def add(self, logs: Sequence[float]) -> None:
        mean = math.fsum(logs) / len(logs)
        self._squares += math.fsum((x - mean) ** 2 for x in logs)
        self.df += len(logs) - 1

    @property
    def sd(self) -> float | None:
        return math.sqrt(self._squares / self.df) if self.df else None


@dataclass(frozen=True)
class PairedRatio:
    """Each side's time, the geometric mean of its turns' medians (a host that switches speed
    within the turns makes the median of all their calls fall between two modes), and the
    speedup, their ratio, the geometric mean of the turn pairs' ratios. half_log: the
    half-width of the speedup's 95% interval in log units, t x sd / sqrt(K) of the K pairs' log
    ratios: their own sd (t at K - 1 degrees of freedom) or, where larger, the run's pooled one
    for the case (t at its degrees of freedom). sd_log: the pairs' own spread; pooled_sd_log:
    the run's, these pairs included (None without a pool)."""

    candidate_us: float
    reference_us: float
    half_log: float
    ratios: tuple[float, ...]
    sd_log: float = 0.0
    pooled_sd_log: float | None = None

    @property
    def speedup(self) -> float:
        return self.reference_us / self.candidate_us

    @property
    def interval(self) -> tuple[float, float]:
        return self.speedup * math.exp(-self.half_log), self.speedup * math.exp(self.half_log)


def paired_ratio(
    candidate_turns: Sequence[Sequence[float]],
    reference_turns: Sequence[Sequence[float]],
    noise: TurnNoise | None = None,
) -> PairedRatio:
    """The speedup of K turn pairs (K >= 2), each side's samples (µs) by turn; `noise`, the
    run's pool for the case, takes these pairs in first."""
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
    own = statistics.stdev(logs)
    sd, df = own, len(logs) - 1
    pooled = None
    if noise is not None:
        noise.add(logs)
        pooled = noise.sd
        if pooled is not None and pooled > own:
            sd, df = pooled, noise.df
    return PairedRatio(
        candidate_us=statistics.geometric_mean(c for c, _ in medians),
        reference_us=statistics.geometric_mean(r for _, r in medians),
        half_log=student_t_critical(df) * sd / math.sqrt(len(logs)),
        ratios=tuple(math.exp(x) for x in logs),
        sd_log=own,
        pooled_sd_log=pooled,
    )


def unshared_fraction(speedup: float) -> float:
    """The share of the slower side's time that the faster side does not spend, where the
    faster side's work were all part of the slower's: 1 - 1/S above 1, 1 - S below, 0 at 1."""
    if speedup <= 0:
        raise ValueError(f"a speedup must be positive, got {speedup}")
    return 1.0 - min(speedup, 1.0 / speedup)


class ReferenceSpread:
    """How far the reference's time on one case moves over a run: the sample standard deviation
    of its log times, those of the run's workers (the run's own timing of it) and of its turns
    with each candidate timed in turns so far. Within a pair of turns both sides see the same
    moment; over a run the moment moves, and this is how far, as the reference's code feels it.
    On H200 hosts the reference's turns in one run of the mixed batch read 95 - 282 µs (sd of
    log 0.09 - 0.25), its five workers at the start spreading 0.04 - 0.21."""

    def __init__(self, workers_us: Sequence[float]) -> None:
        """`workers_us`: the run's workers' times of the reference on the case."""
        self._logs = [math.log(t) for t in workers_us if t > 0]

    def add(self, time_us: float) -> None:
        if time_us > 0:
            self._logs.append(math.log(time_us))

    @property
    def measured(self) -> tuple[float, int] | None:
        """(the spread, its degrees of freedom); None below three times."""
        if len(self._logs) < 3:
            return None
        return statistics.stdev(self._logs), len(self._logs) - 1


def run_to_run_half_log(speedup: float, spread: float, df: int) -> float:
    """The half-width (log units) of what moves a speedup timed in turns from one run to the next
    and its pairs do not see: t(0.975, df) x s x u^2, s the reference's spread over the run
    (ReferenceSpread) and u unshared_fraction.

    The turns cancel the host's moment only as far as both sides spend their time alike, and
    they see a fraction of a second of it. Work that one side does and the other does not (at
    most a share u of the slower side's time) may follow the host's moment otherwise than the
    rest: not at all, or more. How far the moment moves is s; how far the ratio follows it grows
    with u, and u^2 is what the mixed batch's runs showed (docs/timing.md, "How many untied
    speedups two runs should show"). Identical work (u = 0) is untouched.
    """
    if df < 1:
        return 0.0
    return student_t_critical(df) * spread * unshared_fraction(speedup) ** 2


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
