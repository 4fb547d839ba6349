"""Charts as inline SVG, drawn at build time so they show without JavaScript.

Colours come from CSS classes (site.css), so light and dark themes both apply.
Every mark carries a <title>, which browsers show as a tooltip; site.js upgrades it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from html import escape

from pytest_kernelboard.presentation import fmt_us
from pytest_kernelboard.utc import parse_utc

W, H = 640, 260
PAD_L, PAD_R, PAD_T, PAD_B = 64, 16, 14, 34


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    ticks = []
    value = start
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _log_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for exp in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0**exp
            if lo <= v <= hi:
                ticks.append(v)
    return ticks or [lo, hi]


class _Scale:
    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False):
        self.log = log and lo > 0
        f = math.log10 if self.log else (lambda v: v)
        self.f = f
        self.lo, self.hi = f(lo), f(hi)
        if self.hi == self.lo:
            self.lo, self.hi = self.lo - 0.5, self.hi + 0.5
        self.a, self.b = a, b

    def __call__(self, v: float) -> float:
        return self.a + (self.f(v) - self.lo) / (self.hi - self.lo) * (self.b - self.a)


def _svg_open(label: str, kind: str) -> list[str]:
    return [
        f'<svg class="chart {kind}" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(label)}"'
        ' preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(label)}</title>",
    ]


def _axes(parts: list[str], ylabels: list[tuple[float, str]], xlabels: list[tuple[float, str]]):
    parts.append(
        f'<g class="axis"><line x1="{PAD_L}" y1="{H - PAD_B}" x2="{W - PAD_R}" y2="{H - PAD_B}"/>'
    )
    for y, text in ylabels:
        parts.append(
            f'<line class="grid" x1="{PAD_L}" y1="{y:.1f}" x2="{W - PAD_R}" y2="{y:.1f}"/>'
            f'<text x="{PAD_L - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(text)}</text>'
        )
    for i, (x, text) in enumerate(xlabels):
        anchor = "start" if i == 0 else "end" if i == len(xlabels) - 1 else "middle"
        parts.append(
            f'<text x="{x:.1f}" y="{H - PAD_B + 18}" text-anchor="{anchor}">{escape(text)}</text>'
        )
    parts.append("</g>")


SINGLE_INSTANT_PAD_S = 1800  # every point at one instant: the axis spans an hour around it
TIME_MARGIN = 0.05  # else: a twentieth of the points' span on either side


def time_span(first: float, last: float) -> tuple[float, float]:
    """The time axis (epoch seconds) for points from `first` to `last`: their span with a
    small margin, or an hour around one instant; never a fixed day that dwarfs the data."""
    if last <= first:
        return first - SINGLE_INSTANT_PAD_S, first + SINGLE_INSTANT_PAD_S
    margin = (last - first) * TIME_MARGIN
    return first - margin, last + margin


def time_format(span_s: float) -> str:
    """Tick labels fine enough for the axis: days, then hours and minutes, then seconds."""
    if span_s > 4 * 86400:
        return "%Y-%m-%d"
    if span_s > 600:
        return "%m-%d %H:%M"
    return "%H:%M:%S"


def history_svg(points: Sequence[tuple[str, float, str]], device: str) -> str:
    """Best score over time: every ranked run as a dot, the best-so-far as a step line.

    points: (created_at, score_us, author) of every eligible run.
    """
    label = f"Best score over time on {device}"
    if not points:
        return ""
    data = sorted((parse_utc(t), s, a) for t, s, a in points)
    t0, t1 = time_span(data[0][0].timestamp(), data[-1][0].timestamp())
    scores = [s for _, s, _ in data]
    lo, hi = min(scores), max(scores)
    log = lo > 0 and hi / lo > 20
    if not log:
        span = (hi - lo) or abs(hi) * 0.1 or 1.0
        lo, hi = max(0.0, lo - span * 0.08), hi + span * 0.08
    else:
        lo, hi = lo / 1.3, hi * 1.3
    sx = _Scale(t0, t1, PAD_L + 6, W - PAD_R - 6)
    sy = _Scale(lo, hi, H - PAD_B, PAD_T, log=log)
    parts = _svg_open(label, "history")
    yt = _log_ticks(lo, hi) if log else _nice_ticks(lo, hi)
    fmt = time_format(t1 - t0)
    xlabels: list[tuple[float, str]] = []
    for i in range(5):
        t = t0 + (t1 - t0) * i / 4
        text = dt.datetime.fromtimestamp(t, dt.UTC).strftime(fmt)
        if not xlabels or xlabels[-1][1] != text:
            xlabels.append((sx(t), text))
    _axes(parts, [(sy(v), fmt_us(v)) for v in yt if lo <= v <= hi], xlabels)
    # thin dots for every run (capped for very large boards: every k-th, keeping the best)
    step = max(1, len(data) // 1500)
    dots = [
        f'<circle class="run" cx="{sx(t.timestamp()):.1f}" cy="{sy(s):.1f}" r="2.5"/>'
        for i, (t, s, _) in enumerate(data)
        if i % step == 0
    ]
    parts.append('<g class="runs">' + "".join(dots) + "</g>")
    best = math.inf
    path: list[str] = []
    marks: list[str] = []
    for t, s, author in data:
        if s < best:
            x, y = sx(t.timestamp()), sy(s)
            if path:
                path.append(f"H{x:.1f}V{y:.1f}")
            else:
                path.append(f"M{x:.1f},{y:.1f}")
            best = s
            tip = f"{author}: {fmt_us(s)} on {t:%Y-%m-%d}"
            marks.append(
                f'<circle class="best" cx="{x:.1f}" cy="{y:.1f}" r="4" tabindex="0">'
                f"<title>{escape(tip)}</title></circle>"
            )
    path.append(f"H{W - PAD_R - 6:.1f}")
    parts.append(f'<path class="best-line" d="{"".join(path)}"/>')
    parts.append('<g class="marks">' + "".join(marks) + "</g>")
    parts.append("</svg>")
    return "".join(parts)


def fast_p_svg(series: Sequence[tuple[str, dict[str, float]]], device: str) -> str:
    """fast_p curves: share of benchmark cases faster than p × the reference, per entry."""
    label = f"fast_p curves on {device}"
    series = [(name, fp) for name, fp in series if fp]
    if not series:
        return ""
    thresholds = sorted({float(k) for _, fp in series for k in fp})
    if len(thresholds) < 2:
        thresholds = [*thresholds, thresholds[0] + 1] if thresholds else [0.0, 1.0]
    sx = _Scale(thresholds[0], thresholds[-1], PAD_L + 6, W - PAD_R - 110)
    sy = _Scale(0.0, 1.0, H - PAD_B, PAD_T)
    parts = _svg_open(label, "fastp")
    _axes(
        parts,
        [(sy(v), f"{v:.0%}") for v in (0, 0.25, 0.5, 0.75, 1.0)],
        [(sx(p), f"p={p:g}") for p in thresholds],
    )
    for i, (name, fp) in enumerate(series):
        pts = sorted((float(k), float(v)) for k, v in fp.items())
        d = "M" + "L".join(f"{sx(p):.1f},{sy(v):.1f}" for p, v in pts)
        parts.append(f'<g class="series s{i % 6}"><path d="{d}"/>')
        for p, v in pts:
            tip = f"{name}: fast_{p:g} = {v:.0%}"
            parts.append(
                f'<circle cx="{sx(p):.1f}" cy="{sy(v):.1f}" r="3.5" tabindex="0">'
                f"<title>{escape(tip)}</title></circle>"
            )
        y = PAD_T + 8 + i * 18
        parts.append(
            f'<line x1="{W - PAD_R - 100}" y1="{y}" x2="{W - PAD_R - 84}" y2="{y}"/>'
            f'<text class="legend" x="{W - PAD_R - 80}" y="{y + 4}">{escape(name[:14])}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def heat_style(speedup: float | None) -> str:
    """Cell colour for a speedup over the reference: red below 1, neutral at 1, blue above."""
    if speedup is None or speedup <= 0:
        return ""
    x = max(-1.0, min(1.0, math.log2(speedup) / 3))  # saturates at 8× either way
    if x >= 0:
        hue, sat, light = 212, 30 + 55 * x, 92 - 42 * x
    else:
        hue, sat, light = 4, 30 + 55 * -x, 92 - 40 * -x
    ink = "#fff" if light < 62 else "#111"
    return f"background:hsl({hue} {sat:.0f}% {light:.0f}%);color:{ink}"


def spread_svg(timing: dict | None) -> str:
    """One case's timing spread: min–max whisker, the median's 95% interval box (the mean's in
    records older than rank_ci95_us), median tick."""
    if not timing:
        return ""
    lo, hi = timing.get("min_us"), timing.get("max_us")
    ci = timing.get("rank_ci95_us") or timing.get("ci95_us") or [None, None]
    med = timing.get("median_us")
    if lo is None or hi is None or med is None:
        return ""
    span = (hi - lo) or max(hi * 0.01, 1e-9)
    a, b = lo - span * 0.05, hi + span * 0.05
    sx = _Scale(a, b, 2, 158)
    tip = f"min {fmt_us(lo)} · median {fmt_us(med)} · max {fmt_us(hi)}"
    box = ""
    if ci[0] is not None and ci[1] is not None:
        x0, x1 = sx(ci[0]), sx(ci[1])
        box = f'<rect class="ci" x="{x0:.1f}" y="3" width="{max(x1 - x0, 1.5):.1f}" height="10"/>'
    return (
        '<svg class="spread" viewBox="0 0 160 16" width="160" height="16" role="img" '
        f'aria-label="{escape(tip)}"><title>{escape(tip)}</title>'
        f'<line class="whisker" x1="{sx(lo):.1f}" y1="8" x2="{sx(hi):.1f}" y2="8"/>{box}'
        f'<line class="median" x1="{sx(med):.1f}" y1="1" x2="{sx(med):.1f}" y2="15"/></svg>'
    )
