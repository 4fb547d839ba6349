"""Descriptive statistics of per-call timings (microseconds).

Definitions (docs/timing.md, "Statistics and stopping"):

    mean    arithmetic mean of the n samples
    median  middle sample (mean of the two middle ones for even n)
    std     sample standard deviation, ddof=1 (0 when n == 1)
    ci95    Student-t 95% interval of the mean: mean -/+ t(0.975, n-1) * std / sqrt(n),
            clamped at 0 below because a duration cannot be negative (n == 1: [mean, mean])
    rse     relative standard error of the mean: std / sqrt(n) / mean (0 when n == 1)
"""

from __future__ import annotations

import bisect
import functools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RANKING_STATISTIC",
    "RunningMedian",
    "Summary",
    "geometric_mean",
    "median_interval",
    "student_t_critical",
    "summarize",
]

# Above this many degrees of freedom the Cornish-Fisher expansion is accurate to ~1e-12, and the
# exact finite series would need thousands of terms per evaluation.
_EXACT_DF_LIMIT = 200


def _t_two_sided_cdf(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer df, by the finite trigonometric series.

    With theta = atan(t / sqrt(df)) and c = cos(theta)^2 (Abramowitz & Stegun 26.7.3-4):
    odd df:  2/pi * (theta + sin*cos * (1 + 2/3 c + 2*4/(3*5) c^2 + ...)), (df - 1) / 2 terms
    even df: sin * (1 + 1/2 c + 1*3/(2*4) c^2 + ...),                     df / 2 terms
    """
    theta = math.atan(t / math.sqrt(df))
    sin, cos = math.sin(theta), math.cos(theta)
    c = cos * cos
    if df % 2 == 1:
        if df == 1:
            return 2.0 * theta / math.pi
        term, total = 1.0, 1.0
        for k in range(2, df - 1, 2):  # factors 2/3, 4/5, ..., (df-3)/(df-2)
            term *= c * k / (k + 1)
            total += term
        return 2.0 / math.pi * (theta + sin * cos * total)
    term, total = 1.0, 1.0
    for k in range(1, df - 2, 2):  # factors 1/2, 3/4, ..., (df-3)/(df-2)
        term *= c * k / (k + 1)
        total += term
    return sin * total


def _t_quantile_expansion(p: float, df: float) -> float:
    """Upper p-quantile of t by the Cornish-Fisher expansion around the normal quantile (A&S 26.7.5)."""
    z = statistics.NormalDist().inv_cdf(p)
    z2 = z * z
    g1 = (z2 + 1.0) * z / 4.0
    g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0
    g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0
    g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


@functools.lru_cache(maxsize=1024)
def _t_critical_exact(df: int, confidence: float) -> float:
    lo, hi = 0.0, 1.0
    while _t_two_sided_cdf(hi, df) < confidence:
        lo, hi = hi, hi * 2.0
    for _ in range(200):  # bisection: the CDF is monotone, and 200 halvings reach float precision
        mid = 0.5 * (lo + hi)
        if _t_two_sided_cdf(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return 0.5 * (lo + hi)


def student_t_critical(df: float, confidence: float = 0.95) -> float:
    """t such that P(|T| <= t) = confidence for Student's t with df degrees of freedom.

    Exact (to float precision) for integer df up to 200, an asymptotic expansion above. A
    fractional df below 200 is rounded down, which widens the interval (the safe direction).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if not df >= 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if math.isinf(df):
        return statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    if df <= _EXACT_DF_LIMIT:
        return _t_critical_exact(int(math.floor(df)), confidence)
    return _t_quantile_expansion(0.5 + confidence / 2.0, float(df))


def geometric_mean(values: Iterable[float]) -> float:
    """exp(mean(log x)); every value must be > 0."""
    logs = []
    for value in values:
        if not value > 0 or math.isinf(value):
            raise ValueError(f"geometric mean needs finite positive values, got {value!r}")
        logs.append(math.log(value))
    if not logs:
        raise ValueError("geometric mean of no values")
    return math.exp(math.fsum(logs) / len(logs))


@dataclass(frozen=True)
class Summary:
    """Statistics of n per-call timings, all in microseconds except n and rse."""

    n: int
    mean_us: float
    median_us: float
    std_us: float
    min_us: float
    max_us: float
    ci95_us: tuple[float, float]
    rse: float
    median_ci95_us: tuple[float, float] = (0.0, 0.0)

    @property
    def sem_us(self) -> float:
        """Standard error of the mean."""
        return self.std_us / math.sqrt(self.n)

    def to_dict(self, clock: str | None = None) -> dict[str, Any]:
        """The fields of records.TIMING_SCHEMA; pass clock ("cuda_event" or "host") to include it,
        as the schema requires it (the summary itself does not know which clock produced it)."""
        out: dict[str, Any] = {}
        if clock is not None:
            out["clock"] = clock
        out.update(
            n=self.n,
            mean_us=self.mean_us,
            median_us=self.median_us,
            std_us=self.std_us,
            min_us=self.min_us,
            max_us=self.max_us,
            ci95_us=[self.ci95_us[0], self.ci95_us[1]],
            rse=self.rse,
            # What ranks: the median, with its distribution-free interval (docs/timing.md).
            statistic=RANKING_STATISTIC,
            rank_us=self.median_us,
            rank_ci95_us=[self.median_ci95_us[0], self.median_ci95_us[1]],
        )
        return out


def check_samples(samples_us: Sequence[float]) -> list[float]:
    """The samples as floats; ValueError when empty, negative or not finite."""
    values = [float(x) for x in samples_us]
    if not values:
        raise ValueError("no samples")
    for x in values:
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"samples must be finite and non-negative, got {x!r}")
    return values


def summarize(samples_us: Sequence[float], confidence: float = 0.95) -> Summary:
    """Summary of per-call timings; raises ValueError on an empty or non-finite sample."""
    values = check_samples(samples_us)
    n = len(values)
    # fsum keeps the mean exact-ish for 10^4 samples of very different sizes.
    mean = math.fsum(values) / n
    if n > 1:
        std = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
        half = student_t_critical(n - 1, confidence) * std / math.sqrt(n)
        ci = (max(0.0, mean - half), mean + half)
        rse = std / math.sqrt(n) / mean if mean > 0 else (0.0 if std == 0 else math.inf)
    else:
        std, ci, rse = 0.0, (mean, mean), 0.0
    ordered = sorted(values)
    return Summary(
        n=n,
        mean_us=mean,
        median_us=statistics.median(ordered),
        std_us=std,
        min_us=min(values),
        max_us=max(values),
        ci95_us=ci,
        rse=rse,
        median_ci95_us=median_interval(ordered, confidence),
    )


def median_interval(ordered: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free interval of the median from a sorted sample.

    The number of samples below the true median is Binomial(n, 1/2); with the normal
    approximation the interval runs from order statistic n/2 - z*sqrt(n)/2 to n/2 + z*sqrt(n)/2
    (rounded outwards, clamped to the sample). It needs no assumption about the tail, which is
    why a slow outlier cannot widen it the way it widens the mean's t-interval.
    """
    n = len(ordered)
    if n == 0:
        raise ValueError("no samples")
    z = _normal_quantile(0.5 + confidence / 2.0)
    half = z * math.sqrt(n) / 2.0
    lo = max(int(math.floor(n / 2.0 - half)), 0)
    hi = min(int(math.ceil(n / 2.0 + half)), n - 1)
    return float(ordered[lo]), float(ordered[hi])


def _normal_quantile(p: float) -> float:
    return statistics.NormalDist().inv_cdf(p)


RANKING_STATISTIC = "median"


class RunningMedian:
    """The sample kept sorted as it grows, so a stopping rule can ask for the median and its
    interval after every call (O(n) per insertion: trivial next to a GPU round trip)."""

    __slots__ = ("n", "ordered")

    def __init__(self, samples: Iterable[float] = ()) -> None:
        self.ordered: list[float] = []
        self.n = 0
        for x in samples:
            self.add(x)

    def add(self, x: float) -> None:
        bisect.insort(self.ordered, float(x))
        self.n += 1

    @property
    def median(self) -> float:
        return statistics.median(self.ordered) if self.ordered else math.nan

    def relative_halfwidth(self, confidence: float = 0.95) -> float:
        """Half the width of the median's interval over the median; inf until 2 samples."""
        if self.n < 2:
            return math.inf
        lo, hi = median_interval(self.ordered, confidence)
        middle = self.median
        if middle <= 0:
            return 0.0 if hi == lo else math.inf
        return (hi - lo) / 2.0 / middle
