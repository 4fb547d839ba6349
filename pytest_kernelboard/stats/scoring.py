"""A leaderboard score from per-case timings, its uncertainty, the speedup and fast_p.

ranking_by (GPU MODE's names): "last" scores the last benchmark case only, "mean" the arithmetic
mean of the cases' ranking statistics, "geom" their geometric mean. Lower is better for every
score. A case's ranking statistic is its median (`rank_us`; docs/timing.md says why); records
written before it existed rank by their mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_kernelboard.stats.stats import Summary, geometric_mean, student_t_critical
from pytest_kernelboard.vocabulary import RANKINGS

__all__ = [
    "DEFAULT_FAST_P",
    "RANKINGS",
    "case_speedup_interval",
    "fast_p",
    "fast_p_key",
    "fast_p_raw",
    "faster_than",
    "rank_us",
    "score",
    "score_interval",
    "speedup",
    "speedup_interval",
    "tied",
]

DEFAULT_FAST_P = (0.0, 0.5, 1.0, 1.5, 2.0)


def _check_ranking(ranking_by: str) -> None:
    if ranking_by not in RANKINGS:
        raise ValueError(f"ranking_by must be one of {RANKINGS}, got {ranking_by!r}")


def score(case_means_us: Sequence[float], ranking_by: str) -> float:
    """The leaderboard score in microseconds (lower is better)."""
    _check_ranking(ranking_by)
    if not case_means_us:
        raise ValueError("no benchmark cases to score")
    if ranking_by == "last":
        return float(case_means_us[-1])
    if ranking_by == "mean":
        return math.fsum(case_means_us) / len(case_means_us)
    return geometric_mean(case_means_us)


def rank_us(timing: Summary | Mapping[str, Any]) -> float:
    """The number a case ranks by: its median, or the mean of a record older than rank_us."""
    if isinstance(timing, Summary):
        return timing.median_us
    value = timing.get("rank_us")
    return float(timing["mean_us"] if value is None else value)


_Z95 = 1.959963984540054


def _case_fields(
    case: Summary | Mapping[str, Any],
) -> tuple[float, float, int, tuple[float, float]]:
    """(ranking statistic, its standard error, n, its 95% interval) of one case.

    The median's standard error is read back from its distribution-free interval (half-width
    over z(0.975)); records without rank_us fall back to the mean and its t-interval.
    """
    if isinstance(case, Summary):
        lo, hi = case.median_ci95_us
        return case.median_us, (hi - lo) / (2 * _Z95), case.n, (lo, hi)
    n = int(case["n"])
    if case.get("rank_us") is not None and case.get("rank_ci95_us"):
        lo, hi = (float(x) for x in case["rank_ci95_us"])
        return float(case["rank_us"]), (hi - lo) / (2 * _Z95), n, (lo, hi)
    mean, std = float(case["mean_us"]), float(case["std_us"])
    lo, hi = case["ci95_us"]
    return mean, std / math.sqrt(n), n, (float(lo), float(hi))


def _log_se(center: float, se: float, interval: tuple[float, float]) -> float:
    """The standard error of a case's log time: from its interval on log times where that
    interval stays above 0, else se / center (the delta method)."""
    low, high = interval
    if low > 0 and high >= low:
        return math.log(high / low) / (2 * _Z95)
    return se / center


def _welch_satterthwaite(variances: Sequence[float], dofs: Sequence[int]) -> float:
    """Effective degrees of freedom of a sum of independent variance estimates."""
    terms = [(v, d) for v, d in zip(variances, dofs, strict=True) if v > 0 and d > 0]
    if not terms:
        return math.inf
    total = math.fsum(v for v, _ in terms)
    return total * total / math.fsum(v * v / d for v, d in terms)


def score_interval(
    cases: Sequence[Summary | Mapping[str, Any]], ranking_by: str, confidence: float = 0.95
) -> tuple[float, float]:
    """A confidence interval (default 95%) of score(), treating cases as independent.

    last: that case's own interval (rank_ci95_us; confidence is not re-applied).
    mean: S = sum(m_i) / k has standard error sqrt(sum(se_i^2)) / k.
    geom: on the log scale, log G = sum(log m_i) / k and se(log G) = sqrt(sum(se_log_i^2)) / k,
          se_log_i read from the case's interval on log times, ln(hi_i / lo_i) / (2 z), as
          intervals widened by the spread between workers are built (between_workers.widened),
          or, by the delta method, se_i / m_i where the interval reaches 0; the interval
          exp(log G -/+ t * se(log G)) is multiplicative, hence asymmetric around G. (Read as
          se_i / m_i, a two-worker interval widened to 8,000 times its time on a loaded CPU
          made se(log G) near 2,000, and exp() overflowed in the judge.)
    For mean and geom, t uses the Welch-Satterthwaite effective degrees of freedom of the
    per-case variance terms (each with n_i - 1 degrees of freedom). se_i = std_i / sqrt(n_i).
    The lower end is clamped at 0 (a duration cannot be negative).
    """
    _check_ranking(ranking_by)
    if not cases:
        raise ValueError("no benchmark cases to score")
    fields = [_case_fields(case) for case in cases]
    k = len(fields)
    dofs = [n - 1 for _, _, n, _ in fields]
    if ranking_by == "last":
        return fields[-1][3]
    if ranking_by == "mean":
        center = math.fsum(m for m, _, _, _ in fields) / k
        variances = [se * se for _, se, _, _ in fields]
        df = _welch_satterthwaite(variances, dofs)
        half = _t(df, confidence) * math.sqrt(math.fsum(variances)) / k
        return (max(0.0, center - half), center + half)
    means = [m for m, _, _, _ in fields]
    log_center = math.log(geometric_mean(means))
    variances = [_log_se(m, se, interval) ** 2 for m, se, _, interval in fields]
    df = _welch_satterthwaite(variances, dofs)
    half = _t(df, confidence) * math.sqrt(math.fsum(variances)) / k
    return (math.exp(log_center - half), math.exp(log_center + half))


def _t(df: float, confidence: float) -> float:
    return student_t_critical(df, confidence) if math.isfinite(df) else 0.0


def speedup(reference_us: float, submission_us: float) -> float:
    """How many times faster the submission is than the reference (> 1: faster).

    The one definition of speedup: per case, of the case means (judge.py); per run, of the
    scores under the leaderboard's ranking_by (summary.py), which is what site and PR show."""
    if not submission_us > 0 or not reference_us >= 0:
        raise ValueError(
            f"need reference >= 0 and submission > 0, got {reference_us}, {submission_us}"
        )
    return reference_us / submission_us


# Two scores closer than this are one result: the same code, timed in two independent runs
# (fresh worker, fresh inputs, another memory placement), moves by up to about this much on an
# H100 (docs/benchmarks.md), while each run's own interval only sees its samples' spread.
TIE_TOLERANCE = 0.02


def tied(
    score_us: float,
    interval: Sequence[float],
    reference_us: float,
    reference_interval: Sequence[float],
) -> bool:
    """Whether the data cannot order a score and the reference's: their intervals overlap, or
    they differ by less than TIE_TOLERANCE, the spread of the same code between runs."""
    overlap = interval[0] <= reference_interval[1] and reference_interval[0] <= interval[1]
    close = abs(score_us - reference_us) <= TIE_TOLERANCE * reference_us
    return overlap or close


def speedup_interval(
    score_us: float,
    interval: Sequence[float] | None,
    reference_us: float,
    reference_interval: Sequence[float] | None,
) -> tuple[float, float]:
    """The speedup's interval [lo, hi]: the noise around reference_us / score_us, by the same
    two rules as `tied`, so that tied(...) holds exactly when lo <= 1 <= hi.

    lo = min(reference's low / score's high, speedup x (1 - TIE_TOLERANCE)),
    hi = max(reference's high / score's low, speedup x (1 + TIE_TOLERANCE)): the intervals'
    ratio and the run-to-run tolerance. Without both intervals only the tolerance applies.
    hi is infinite when the score's interval reaches 0. "Faster than p x beyond noise" is
    lo > p (`faster_than`).
    """
    if not score_us > 0 or not reference_us >= 0:
        raise ValueError(f"need reference >= 0 and score > 0, got {reference_us}, {score_us}")
    value = reference_us / score_us
    lo, hi = value * (1 - TIE_TOLERANCE), value * (1 + TIE_TOLERANCE)
    if interval and reference_interval and len(interval) == 2 and len(reference_interval) == 2:
        low, high = float(interval[0]), float(interval[1])
        if high > 0:
            lo = min(lo, float(reference_interval[0]) / high)
        hi = max(hi, float(reference_interval[1]) / low if low > 0 else math.inf)
    return lo, hi


def _ranked(timing: Mapping[str, Any] | None) -> tuple[float | None, tuple[float, float] | None]:
    """(ranking statistic, its interval) of a stored timing: rank_us and rank_ci95_us, or the
    mean and ci95_us of a record older than rank_us."""
    if not timing:
        return None, None
    value = rank_us(timing)
    ci = timing.get("rank_ci95_us") if timing.get("rank_us") is not None else timing.get("ci95_us")
    return value, (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 else None


def case_speedup_interval(case: Mapping[str, Any]) -> tuple[float, float] | None:
    """The speedup interval of one stored case record, from its timing and its reference's
    (speedup_interval); a case with a stored speedup but not both timings gets the
    run-to-run tolerance around it; None for a case without a speedup."""
    value, ci = _ranked(case.get("timing"))
    reference, reference_ci = _ranked(case.get("reference_timing"))
    if value is not None and reference is not None and value > 0:
        return speedup_interval(value, ci, reference, reference_ci)
    stored = case.get("speedup")
    if isinstance(stored, int | float) and not isinstance(stored, bool) and math.isfinite(stored):
        return stored * (1 - TIE_TOLERANCE), stored * (1 + TIE_TOLERANCE)
    return None


def faster_than(interval: Sequence[float] | None, p: float) -> bool:
    """Whether a speedup interval lies above p: faster than p x the reference beyond noise."""
    return interval is not None and float(interval[0]) > p


def fast_p_key(p: float) -> str:
    """'fast_0', 'fast_0.5', 'fast_1', ... (KernelBench's names)."""
    return f"fast_{p:g}"


def fast_p(
    correct: Sequence[bool],
    intervals: Sequence[Sequence[float] | None],
    thresholds: Sequence[float] = DEFAULT_FAST_P,
) -> dict[str, float]:
    """fast_p, noise-aware: the share of all cases that are correct AND faster than p times
    the reference beyond noise (the lower end of the speedup interval above p; `faster_than`).
    fast_0 is the share of correct cases, timed or not; a correct case without an interval
    (not timed) counts for no p > 0. A speedup inside the noise of p is no win."""
    if len(correct) != len(intervals):
        raise ValueError(f"{len(correct)} correctness flags but {len(intervals)} intervals")
    if not correct:
        raise ValueError("fast_p of no cases")
    total = len(correct)
    out: dict[str, float] = {}
    for p in thresholds:
        if p <= 0:
            hits = sum(1 for ok in correct if ok)
        else:
            hits = sum(
                1 for ok, iv in zip(correct, intervals, strict=True) if ok and faster_than(iv, p)
            )
        out[fast_p_key(p)] = hits / total
    return out


def fast_p_raw(
    correct: Sequence[bool],
    speedups: Sequence[float | None],
    thresholds: Sequence[float] = DEFAULT_FAST_P,
) -> dict[str, float]:
    """KernelBench's fast_p, raw: the share of all cases that are correct AND whose point
    speedup is above p, noise and all (identical code reads faster about half the time). Kept
    to compare with published numbers; rank and reward by `fast_p`. fast_0 is the share of
    correct cases, timed or not; a correct case without a speedup (not timed) counts for no
    p > 0."""
    if len(correct) != len(speedups):
        raise ValueError(f"{len(correct)} correctness flags but {len(speedups)} speedups")
    if not correct:
        raise ValueError("fast_p of no cases")
    total = len(correct)
    out: dict[str, float] = {}
    for p in thresholds:
        if p <= 0:
            hits = sum(1 for ok in correct if ok)
        else:
            hits = sum(
                1 for ok, s in zip(correct, speedups, strict=True) if ok and s is not None and s > p
            )
        out[fast_p_key(p)] = hits / total
    return out
