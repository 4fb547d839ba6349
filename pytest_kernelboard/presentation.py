"""How numbers read, the same on the site, in the pull-request comment and in the terminal.

Times are microseconds in the records; here they get a unit. A missing or non-finite value
reads as an em dash, never as 'None' or 'nan'. A case's time is the statistic that ranks it
(`stats.scoring.rank_us`: the median, the mean for records older than it), with that
statistic's interval, and a speedup is the ratio of those: what is shown is what ranks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .stats.scoring import rank_us, speedup, tied
from .stats.speed_of_light import COMM_KEY, comm_speed_of_light

MISSING = "—"
TIE = "tie"


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def fmt_us(value: float | None) -> str:
    """A time in microseconds, 4 significant digits, with a readable unit."""
    if not _finite(value):
        return MISSING
    if value >= 1e6:
        return f"{value / 1e6:.4g} s"
    if value >= 1e3:
        return f"{value / 1e3:.4g} ms"
    return f"{value:.4g} µs"


def fmt_interval(ci: Sequence[float] | None) -> str:
    """'9 µs – 11 µs'; '' when there is no interval."""
    if not ci or len(ci) != 2:
        return ""
    return f"{fmt_us(ci[0])} – {fmt_us(ci[1])}"


def fmt_with_interval(value: float | None, ci: Sequence[float] | None) -> str:
    """'10 µs [9 µs, 11 µs]' (the interval left out when unknown)."""
    text = fmt_us(value)
    if ci and len(ci) == 2:
        text += f" [{fmt_us(ci[0])}, {fmt_us(ci[1])}]"
    return text


def fmt_speedup(value: float | None, tie: bool | None = None) -> str:
    """'2.00×': how many times faster than the reference; '1.01× (tie)' when the data cannot
    order the two (scoring.tied). Two decimals: anything not tied is more than 2% from 1."""
    if not _finite(value):
        return MISSING
    return f"{value:.2f}× ({TIE})" if tie else f"{value:.2f}×"


def fmt_against_reference(
    value: float | None,
    interval: Sequence[float] | None = None,
    tie: bool | None = None,
    timed_once: bool = False,
) -> str:
    """A run's speedup in words: '1.38× the reference (interval 1.21× – 1.52×)'; where the
    data cannot order the two (scoring.tied), '0.79× the reference: a tie, within noise (the
    interval 0.55× – 1.13× holds 1×)', never a bare '0.79× ... (tied)'. timed_once: a case of
    the run (or of the reference) was timed in one call, so no interval is shown (one_call)."""
    if not _finite(value):
        return f"{MISSING} the reference"
    text = f"{value:.2f}× the reference"
    bounds = (
        f"{interval[0]:.2f}× – {interval[1]:.2f}×"
        if interval and len(interval) == 2 and all(_finite(x) for x in interval)
        else None
    )
    if timed_once:
        bounds = None
    if tie:
        text += ": a tie, within noise"
        if bounds:
            return text + f" (the interval {bounds} holds 1×)"
    elif bounds:
        return text + f" (interval {bounds})"
    return text + (" (a case was timed once: no interval)" if timed_once else "")


# -- a case's timing as it ranks -------------------------------------------------------------


def one_call(timing: Mapping[str, Any] | None) -> bool:
    """Whether a timing holds a single timed call: its stored interval is that one time twice,
    which says nothing about the noise, so it is never shown (nor used to call a tie)."""
    return bool(timing) and timing.get("n") == 1


def ranked_time(
    timing: Mapping[str, Any] | None,
) -> tuple[float | None, tuple[float, float] | None]:
    """(the statistic a case ranks by, its 95% interval): rank_us and rank_ci95_us, or the mean
    and its interval for a record older than rank_us; (None, None) without a timing. A timing
    of one call has no interval (one_call)."""
    if not timing:
        return None, None
    value = rank_us(timing)
    ci = timing.get("rank_ci95_us") if timing.get("rank_us") is not None else timing.get("ci95_us")
    if one_call(timing):
        ci = None
    return value, (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 else None


def statistic_of(timing: Mapping[str, Any]) -> str:
    """'median' or 'mean': which statistic ranked_time shows for this timing."""
    return "median" if timing.get("rank_us") is not None else "mean"


def case_speedup(case: Mapping[str, Any]) -> tuple[float | None, bool | None]:
    """(speedup, tied) of one case, both from the statistic that ranks: the reference's ranked
    time over the submission's (scoring.speedup), and whether their intervals cannot order them.
    A case without both timings keeps the speedup it was stored with, tie unknown."""
    value, ci = ranked_time(case.get("timing"))
    reference, reference_ci = ranked_time(case.get("reference_timing"))
    if value is None or reference is None or not value > 0:
        stored = case.get("speedup")
        return (float(stored) if _finite(stored) else None), None
    tie = tied(value, ci, reference, reference_ci) if ci and reference_ci else None
    return speedup(reference, value), tie


def fmt_ranked_time(timing: Mapping[str, Any] | None) -> str:
    """'10 µs [9 µs, 11 µs]': the ranked statistic with its interval; '1.2 s (1 call: no
    interval)' from a single call; '—' without a timing."""
    value, ci = ranked_time(timing)
    if not timing:
        return MISSING
    if one_call(timing):
        return f"{fmt_us(value)} ({NO_INTERVAL})"
    return fmt_with_interval(value, ci)


NO_INTERVAL = "1 call: no interval"


def fmt_timed_case(
    timing: Mapping[str, Any], budget_s: float | None = None, stop_reason: str | None = None
) -> str:
    """A timed case's median as the terminal shows it: 'median 59.98 ms (95% interval 53.12 ms
    – 98.25 ms)', or, where the case's time budget allowed one call only, 'median 1.159 s (1
    call in the 10 s budget: no interval)'."""
    value, ci = ranked_time(timing)
    text = f"{statistic_of(timing)} {fmt_us(value)}"
    if one_call(timing):
        if budget_s is not None and stop_reason == "time_budget":
            text += f" (1 call in the {budget_s:g} s budget: no interval)"
        else:
            text += f" ({NO_INTERVAL})"
    elif ci:
        text += f" (95% interval {fmt_interval(ci)})"
    comm = fmt_comm_speed_of_light(timing)
    return f"{text}; {comm}" if comm else text


def fmt_comm_speed_of_light(timing: Mapping[str, Any]) -> str:
    """A multi-GPU case's communication ceiling and the share of it the case reached:
    'communication ceiling 41.2 µs (all-reduce of 4 MiB on 2 ranks, bus 152 GB/s): 87% of
    light'; '' for a case without one."""
    ceiling = timing.get(COMM_KEY)
    if not isinstance(ceiling, Mapping):
        return ""
    return (
        f"communication ceiling {fmt_us(ceiling.get('ceiling_us'))} (all-reduce of "
        f"{fmt_bytes(ceiling.get('comm_bytes'))} on {ceiling.get('world_size')} ranks, bus "
        f"{fmt_gbps(ceiling.get('bus_gbps'))}): "
        f"{fmt_speed_of_light(comm_speed_of_light(timing))} of light"
    )


def fmt_bytes(value: float | None) -> str:
    """A byte count in binary units: '512 B', '16 KiB', '4 MiB', '1.5 GiB'."""
    if not _finite(value):
        return MISSING
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= size:
            return f"{value / size:.4g} {unit}"
    return f"{value:.0f} B"


def fmt_gbps(value: float | None) -> str:
    """A bandwidth in GB/s (1e9 bytes/s), 3 significant digits: '152 GB/s', '0.0412 GB/s'."""
    return f"{value:.3g} GB/s" if _finite(value) else MISSING


def fmt_progress(n: int, median_us: float, relative_halfwidth: float) -> str:
    """A case still being timed: '4 calls, median 56.16 ms ± 26.1%'; '1 call, 61.9 ms (no
    interval yet)' until a second call gives the noise a size."""
    if n < 2 or not math.isfinite(relative_halfwidth):
        calls = "1 call" if n == 1 else f"{n} calls"
        return f"{calls}, median {fmt_us(median_us)} (no interval yet)"
    return f"{n} calls, median {fmt_us(median_us)} ± {100 * relative_halfwidth:.1f}%"


def times_note(timings: Iterable[Mapping[str, Any] | None]) -> str:
    """What the shown times are: 'medians', 'means' (records older than rank_us), or both;
    '' without a timing."""
    kinds = sorted({statistic_of(t) for t in timings if t}, reverse=True)
    return " and ".join(f"{kind}s" for kind in kinds)


def fmt_pct(value: float | None) -> str:
    """A share as a whole percentage: 0.5 -> '50%'."""
    return f"{value:.0%}" if _finite(value) else MISSING


def fmt_speed_of_light(value: float | None) -> str:
    """'83%' of peak bandwidth, '—' when unknown (the site and the PR comment show the same)."""
    if not _finite(value):
        return MISSING
    percent = 100.0 * value
    return f"{percent:.1f}%" if percent < 10 else f"{percent:.0f}%"
