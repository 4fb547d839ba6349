"""Markdown for the pull-request comment, the job summary and the commit statuses.

Everything a run document says came from a process that executed untrusted code, so every
string taken from it is escaped (table cells) or fenced (failure messages) and truncated:
it can neither mention people, nor inject HTML or links, nor break the layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..presentation import (
    TIE,
    case_speedup,
    fmt_pct,
    fmt_ranked_time,
    fmt_speed_of_light,
    fmt_speedup,
    fmt_us,
    fmt_with_interval,
    times_note,
)
from ..results.summary import case_fast_p
from ..stats.scoring import TIE_TOLERANCE
from ..stats.speed_of_light import speed_of_light
from .gate import GateResult

MARKER = "<!-- kernelboard:pr-comment -->"
STATUS_CONTEXT = "kernelboard/{device}"
MAX_CELL = 80
MAX_MESSAGE_LINES = 12
MAX_MESSAGE_CHARS = 1500
MAX_FAILURES_SHOWN = 5
ICONS = {
    "passed": "✅",
    "failed": "❌",
    "error": "💥",
    "crashed": "💥",
    "timeout": "⏱️",
    "skipped": "⏭️",
}


@dataclass(frozen=True)
class DeviceOutcome:
    """What publication knows about one device of the matrix."""

    device: str
    run: dict[str, Any] | None  # the verified run document, if any
    problem: str | None = None  # why there is no usable run (missing, invalid, ...)

    @property
    def evaluation(self) -> dict[str, Any] | None:
        if self.run and self.run.get("evaluations"):
            return self.run["evaluations"][0]
        return None

    @property
    def passed(self) -> bool:
        ev = self.evaluation
        return ev is not None and ev["summary"]["status"] == "passed"


# ----------------------------------------------------------------------------- escaping


def cell(value: Any, limit: int = MAX_CELL) -> str:
    """Text safe inside a markdown table cell: no HTML, mentions, pipes, newlines or code."""
    text = " ".join(str(value).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    for old, new in (
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("|", "&#124;"),
        ("@", "&#64;"),
        ("`", "&#96;"),
        ("[", "&#91;"),
        ("]", "&#93;"),
        ("*", "&#42;"),
        ("_", "&#95;"),
        ("~", "&#126;"),
        ("#", "&#35;"),
        ("!", "&#33;"),
    ):
        text = text.replace(old, new)
    return text


def code(value: Any) -> str:
    """Inline code for a trusted-but-odd string (paths, names): backticks removed."""
    return "`" + str(value).replace("`", "'").replace("\n", " ") + "`"


def fenced(text: str) -> str:
    """A fenced block showing the first lines of an untrusted message verbatim."""
    lines = str(text).replace("\r", "").splitlines()
    shown = lines[:MAX_MESSAGE_LINES]
    body = "\n".join(shown)
    if len(body) > MAX_MESSAGE_CHARS:
        body = body[:MAX_MESSAGE_CHARS] + " …"
    elif len(lines) > len(shown):
        body += f"\n… ({len(lines) - len(shown)} more lines)"
    body = body.replace("~~~", "~\u200b~~")
    return f"~~~text\n{body}\n~~~"


# ----------------------------------------------------------------------------- ranking


def rank_line(run: dict[str, Any], task: Any, records: Iterable[Any]) -> str:
    """'Would rank 2 of 5, 1.2 µs (+10%) behind first' — or why it would not be ranked."""
    from .. import rankings

    evaluation = run["evaluations"][0]
    device = run["environment"]["device"]
    if not rankings.is_ranked(run, evaluation, task):
        return "**Rank:** not ranked (ranking needs a passing leaderboard-mode run on a listed device before the deadline)."
    # Only runs timed by this run's own timing method are comparable with it.
    method = rankings.timing_method(run)
    groups = rankings.by_method(rankings.candidates(records, task, device))
    ranking = rankings.rank(groups.pop(method, []))
    apart = sum(len(rankings.best_per_author(group)) for group in groups.values())
    projection = rankings.would_rank(run, 0, ranking)
    where = f"**Rank it would take:** {projection.rank} of {projection.total}"
    if projection.rank == 1:
        gap = "first place"
    else:
        gap = (
            f"gap to first: +{fmt_us(projection.gap_to_first_us)} "
            f"(+{projection.gap_to_first_pct:.1f}%)"
        )
    extra = []
    if not projection.improves_own_best and projection.previous_rank is not None:
        extra.append(f"your earlier entry (rank {projection.previous_rank}) stays your best")
    if projection.tied_with:
        extra.append("within noise of " + ", ".join(cell(a) for a in projection.tied_with))
    if apart:
        extra.append(
            f"{apart} filed {'entry' if apart == 1 else 'entries'} timed by another timing "
            "method not compared"
        )
    tail = f" ({'; '.join(extra)})" if extra else ""
    return f"{where} · {gap}{tail}"


# ----------------------------------------------------------------------------- sections


def case_table(evaluation: dict[str, Any]) -> list[str]:
    """One row per case: its time and the reference's, each the statistic that ranks (the
    median) with its interval, and the speedup of those two (presentation.case_speedup)."""
    lines = [
        "| case | status | time [95% CI] | reference [95% CI] | speedup | of peak bandwidth |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for case in evaluation.get("cases", []):
        timing = case.get("timing") or {}
        status = case.get("status", "?")
        lines.append(
            f"| {cell(case.get('kind', ''))} {cell(case.get('id', ''))} "
            f"| {ICONS.get(status, '')} {cell(status)} | {fmt_ranked_time(timing)} "
            f"| {fmt_ranked_time(case.get('reference_timing'))} "
            f"| {fmt_speedup(*case_speedup(case))} "
            f"| {fmt_speed_of_light(speed_of_light(timing))} |"
        )
    return lines


def fast_p_lines(evaluation: dict[str, Any]) -> list[str]:
    """fast_p over the benchmark cases, faster beyond noise (a case's speedup interval above
    p; results/summary.case_fast_p), with KernelBench's raw fast_p beside it; nothing when no
    case was timed."""
    shares = case_fast_p(evaluation.get("cases") or [])
    if shares is None:
        return []
    noise_aware, raw = shares

    def row(values: Mapping[str, float]) -> str:
        return " · ".join(
            f"fast_{p} {fmt_pct(v)}" for p, v in sorted(values.items(), key=_threshold) if p != "0"
        )

    return [
        f"**fast_p** (benchmark cases correct and faster than p× the reference beyond noise): "
        f"{row(noise_aware)} · raw fast_p (KernelBench's definition, noise counted as wins): "
        f"{row(raw)}",
        "",
    ]


def _threshold(item: tuple[str, float]) -> float:
    return float(item[0])


def failures(evaluation: dict[str, Any]) -> list[str]:
    bad = [c for c in evaluation.get("cases", []) if c.get("status") not in ("passed", "skipped")]
    if not bad:
        return []
    lines = ["", f"**Failures** ({len(bad)}):", ""]
    for case in bad[:MAX_FAILURES_SHOWN]:
        lines.append(
            f"- {cell(case.get('kind', ''))} {cell(case.get('id', ''))}: {cell(case.get('status'))}"
        )
        lines.append("")
        lines.append(fenced(case.get("message") or "(no message)"))
        lines.append("")
    if len(bad) > MAX_FAILURES_SHOWN:
        lines.append(f"… and {len(bad) - MAX_FAILURES_SHOWN} more.")
    return lines


def device_section(
    outcome: DeviceOutcome,
    task: Any = None,
    records: Iterable[Any] | None = None,
    rank_problem: str | None = None,
) -> list[str]:
    """rank_problem: why the rank line cannot be computed (pipeline.RankInputError), shown in
    its place: a comment never silently lacks its rank."""
    ev = outcome.evaluation
    if ev is None:
        reason = outcome.problem or "no results were produced"
        return [f"### {cell(outcome.device)} — ⚠️ no result", "", cell(reason, 500), ""]
    summary = ev["summary"]
    status = summary["status"]
    counts = f"{summary['tests_passed']}/{summary['tests_total']} tests"
    if summary.get("benchmarks_total"):
        counts += (
            f", {summary.get('benchmarks_passed', 0)}/{summary['benchmarks_total']} benchmarks"
        )
    lines = [f"### {cell(outcome.device)} — {ICONS.get(status, '')} {cell(status)} ({counts})", ""]
    lines += case_table(ev)
    lines.append("")
    if summary.get("score_us") is not None:
        score = fmt_with_interval(summary["score_us"], summary.get("score_ci95_us"))
        ranking_by = (ev.get("leaderboard") or {}).get("ranking_by", "?")
        line = f"**Score** ({cell(ranking_by)} of the benchmark cases): {score}"
        if summary.get("reference_score_us") is not None:
            line += f" · **reference:** {fmt_us(summary['reference_score_us'])}"
        # The one speedup of a run: the reference's score over this score (see summary.py).
        speed = fmt_speedup(summary.get("speedup"), summary.get("tied_with_reference"))
        lines.append(f"{line} · **speedup over the reference:** {speed}")
        lines.append("")
    lines += fast_p_lines(ev)
    if rank_problem is not None and outcome.run is not None:
        lines.append(f"**Rank:** unavailable ({cell(rank_problem, 500)})")
        lines.append("")
    elif task is not None and records is not None and outcome.run is not None:
        try:
            lines.append(rank_line(outcome.run, task, records))
        except Exception as exc:  # a ranking problem must not hide the results
            lines.append(f"**Rank:** unavailable ({cell(exc)})")
        lines.append("")
    lines += failures(ev)
    return lines


def verdict(gate: GateResult, outcomes: Sequence[DeviceOutcome]) -> str:
    """accepted | rejected (gate) | failed | incomplete."""
    if not gate.accepted:
        return "rejected"
    if not outcomes or any(o.evaluation is None for o in outcomes):
        return "incomplete"
    return "accepted" if all(o.passed for o in outcomes) else "failed"


HEADLINES = {
    "accepted": "✅ **Accepted.** Every device passed; the results are being added to the leaderboard.",
    "failed": "❌ **Not accepted.** The submission failed on at least one device (see below); nothing was recorded.",
    "rejected": "🚫 **Not evaluated.** The pull request did not pass the gate:",
    "incomplete": "⚠️ **Incomplete.** Some devices produced no usable result; nothing was recorded.",
    "pending": "⏳ **Evaluation pending.**",
}


def render_comment(
    gate: GateResult,
    outcomes: Sequence[DeviceOutcome],
    *,
    tasks: Mapping[str, Any] | None = None,
    records: Iterable[Any] | None = None,
    run_url: str | None = None,
    state: str | None = None,
    rank_problem: str | None = None,
) -> str:
    """The whole comment (starts with the hidden marker used to update it in place)."""
    state = state or verdict(gate, outcomes)
    lines = [MARKER, "## kernelboard", ""]
    if gate.submission:
        lines.append(
            f"Submission {code(gate.submission)} by {cell(gate.author or '?')} "
            f"at commit `{gate.head[:12]}`."
        )
        lines.append("")
    lines.append(HEADLINES[state])
    lines.append("")
    if not gate.accepted:
        for p in gate.problems:
            lines.append(f"- {p.message}")
        lines.append("")
    task = (tasks or {}).get(gate.leaderboard) if gate.leaderboard else None
    records = list(records) if records is not None else None
    for outcome in outcomes:
        lines += device_section(outcome, task, records, rank_problem)
    notes = []
    if run_url:
        notes.append(f"[Workflow run]({run_url})")
    notes += footer_notes(outcomes)
    if notes:
        lines.append(" · ".join(notes) + ".")
    return "\n".join(lines).rstrip() + "\n"


def footer_notes(outcomes: Sequence[DeviceOutcome]) -> list[str]:
    """What the numbers are: the statistic shown (what ranks), and how a speedup and a tie read."""
    timings = [
        case.get(key)
        for outcome in outcomes
        if outcome.evaluation
        for case in outcome.evaluation.get("cases", [])
        for key in ("timing", "reference_timing")
    ]
    statistic = times_note(timings)
    if not statistic:
        return []
    return [
        f"Times are {statistic} (the statistic that ranks) with their 95% intervals",
        "speedup = the reference's time ÷ the submission's",
        f"({TIE}) = the two intervals overlap or differ by less than {TIE_TOLERANCE:.0%}: "
        "the data cannot order them",
    ]


def render_summary(outcomes: Sequence[DeviceOutcome], tasks=None, records=None) -> str:
    """The same per-device tables, for $GITHUB_STEP_SUMMARY."""
    lines = ["## kernelboard", ""]
    for outcome in outcomes:
        task = None
        if tasks and outcome.evaluation:
            task = tasks.get(outcome.evaluation["leaderboard"]["name"])
        lines += device_section(outcome, task, records)
    notes = footer_notes(outcomes)
    if notes:
        lines.append(" · ".join(notes) + ".")
    return "\n".join(lines).rstrip() + "\n"


def commit_status(outcome: DeviceOutcome, gate: GateResult | None = None) -> tuple[str, str]:
    """(state, description) of the device's commit status; description ≤ 140 characters."""
    if gate is not None and not gate.accepted:
        return "failure", "rejected at the gate"
    ev = outcome.evaluation
    if ev is None:
        return "error", (outcome.problem or "no result")[:140]
    summary = ev["summary"]
    text = f"{summary['status']}: {summary['tests_passed']}/{summary['tests_total']} tests"
    if summary.get("score_us") is not None:
        text += f", score {fmt_us(summary['score_us'])}"
    return ("success" if outcome.passed else "failure"), text[:140]
