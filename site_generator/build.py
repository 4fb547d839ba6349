"""Build the static site: leaderboards/ + results/ -> a folder of HTML, SVG, CSS, JS and JSON.

Layout of the output (all links are relative, so it works from a sub-path and from disk):

    index.html                           a tile per leaderboard
    lb/<name>/index.html                 statement, shapes, and a tab per device
    lb/<name>/runs/<run_id>-<i>.html     one submission (ranked entries and recent runs)
    authors/<author>.html                every entry of one author
    data/<name>/<device>.json            ranking, baseline and history per device
    data/dataset.jsonl                   every filed evaluation, one per line
    static/                              css, js (shipped with the package; no network)
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import multiprocessing
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pygments
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CudaLexer, PythonLexer, TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from pytest_kernelboard import TIMING_METHOD, rankings
from pytest_kernelboard.errors import KernelboardError
from pytest_kernelboard.names import slug
from pytest_kernelboard.presentation import (
    case_speedup,
    fmt_interval,
    fmt_pct,
    fmt_speed_of_light,
    fmt_speedup,
    fmt_us,
    ranked_time,
    times_note,
)
from pytest_kernelboard.stats.speed_of_light import speed_of_light
from pytest_kernelboard.utc import format_utc

from . import charts
from .data import Board, Run, SiteData, code_visible, load_site_data, read_record
from .local import LOCAL_MARK, add_local_runs
from .statement import summary_line, tolerance_note

HERE = Path(__file__).parent
MARKER = ".kernelboard-site"
RECENT_UNRANKED = 10
HEATMAP_ROWS = 40
FASTP_SERIES = 5
LIGHT_STYLE, DARK_STYLE = "friendly", "github-dark"


class BuildError(KernelboardError, RuntimeError):
    """The site cannot be built into the given folder; the message says why."""


# ------------------------------------------------------------------ helpers


def status_of(task, now: dt.datetime) -> tuple[str, str]:
    """(css class, words): open, closing in N days, closed."""
    if task.deadline is None:
        return "open", "open"
    if now >= task.deadline:
        return "closed", "closed"
    days = math.ceil((task.deadline - now).total_seconds() / 86400)
    return "closing", f"closing in {days} day{'s' if days != 1 else ''}"


def fmt_deadline(value: dt.datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else ""


def fast_p_text(
    fp: dict[str, float] | None, raw: dict[str, float] | None = None
) -> tuple[str, str, float]:
    """The fast_1 share for the cell, every threshold for its tooltip (KernelBench's raw
    shares after them), and a sort value. fast_p counts a case as faster than p x only beyond
    noise: its speedup interval above p (results/summary.case_fast_p)."""
    if not fp:
        return "—", "", -1.0
    items = sorted((float(k), v) for k, v in fp.items())
    title = " · ".join(f"fast_{p:g} {fmt_pct(v)}" for p, v in items)
    if raw:
        shares = " · ".join(f"fast_{float(p):g} {fmt_pct(v)}" for p, v in _sorted_shares(raw))
        title += f" (beyond noise) · raw fast_p, KernelBench's definition: {shares}"
    one = next((v for p, v in items if p == 1.0), None)
    return fmt_pct(one), title, -1.0 if one is None else one


def _sorted_shares(shares: dict[str, float]) -> list[tuple[float, float]]:
    return sorted((float(k), v) for k, v in shares.items())


def method_text(method: int | None) -> str:
    """'timing method 4', or what a record without one is."""
    return "an unrecorded timing method (older)" if method is None else f"timing method {method}"


def stale_method(board: Board) -> str:
    """What the ranking's runs were timed by, where that is older than this harness's own
    timing method (empty otherwise): such runs still rank among themselves, and the board says
    they want re-measuring before a newcomer reads them as today's judge's numbers."""
    return method_text(board.current_method) if board.wants_remeasuring else ""


class Paths:
    """URLs of pages relative to the site root."""

    @staticmethod
    def board(name: str) -> str:
        return f"lb/{slug(name)}/index.html"

    @staticmethod
    def run(run: Run) -> str:
        return f"lb/{slug(run.leaderboard)}/runs/{slug(run.key)}.html"

    @staticmethod
    def author(author: str) -> str:
        return f"authors/{slug(author)}.html"

    @staticmethod
    def export(name: str, device: str) -> str:
        return f"data/{slug(name)}/{slug(device)}.json"

    @staticmethod
    def panel(device: str) -> str:
        return f"dev-{slug(device)}"


class Highlighter:
    """Pygments HTML for a submission, cached by content hash (in memory, and on disk when
    given a cache folder: highlighting is the slowest step of a build)."""

    OPTIONS = {"cssclass": "hl", "linenos": "table", "lineanchors": "L", "anchorlinenos": True}

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.formatter = HtmlFormatter(**self.OPTIONS)
        self.cache: dict[str, str] = {}
        self.cache_dir = cache_dir
        if cache_dir is not None:
            salt = f"{pygments.__version__}|{sorted(self.OPTIONS.items())}"
            self.salt = hashlib.sha256(salt.encode()).hexdigest()[:12]

    def _lexer(self, filename: str, lang: str | None):
        if lang == "cu" or filename.endswith((".cu", ".cuh")):
            return CudaLexer()
        if lang == "py" or filename.endswith(".py"):
            return PythonLexer()
        try:
            return get_lexer_for_filename(filename)
        except ClassNotFound:
            return TextLexer()

    def __call__(self, sha256: str, code: str, filename: str, lang: str | None) -> str:
        if sha256 in self.cache:
            return self.cache[sha256]
        cached = None
        if self.cache_dir is not None:
            cached = self.cache_dir / f"{sha256}-{lang or 'x'}-{self.salt}.html"
            if cached.is_file():
                self.cache[sha256] = html = cached.read_text()
                return html
        html = highlight(code, self._lexer(filename, lang), self.formatter)
        self.cache[sha256] = html
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(html)
            tmp.replace(cached)
        return html

    @staticmethod
    def css() -> str:
        def rules(style: str) -> str:
            # Pygments also emits global rules (pre, td.linenos, ...); keep only ours.
            defs = HtmlFormatter(style=style).get_style_defs(".hl").splitlines()
            return "\n".join(line for line in defs if line.startswith(".hl"))

        light, dark_rules = rules(LIGHT_STYLE), rules(DARK_STYLE)
        dark_forced = dark_rules.replace(".hl", ":root[data-theme=dark] .hl")
        dark_auto = dark_rules.replace(".hl", ":root:not([data-theme=light]) .hl")
        return (
            "/* generated from Pygments styles */\n"
            f"{light}\n{dark_forced}\n@media (prefers-color-scheme: dark) {{\n{dark_auto}\n}}\n"
        )


def _markdown() -> MarkdownIt:
    formatter = HtmlFormatter(cssclass="hl", nowrap=True)

    def fence(code: str, lang: str, _attrs: str) -> str:
        try:
            lexer = get_lexer_for_filename(f"x.{lang}") if lang else TextLexer()
        except ClassNotFound:
            lexer = TextLexer()
        return highlight(code, lexer, formatter)

    return MarkdownIt("commonmark", {"html": False, "highlight": fence}).enable("table")


# ------------------------------------------------------------------ page models


@dataclass
class Ctx:
    data: SiteData
    out: Path
    env: jinja2.Environment
    highlighter: Highlighter
    md: MarkdownIt
    pages: int = 0

    def write(self, rel: str, template: str, **context: Any) -> None:
        depth = rel.count("/")
        context.setdefault("root", "../" * depth)
        context.setdefault("generated", self.data.now.strftime("%Y-%m-%d %H:%M UTC"))
        context.setdefault("timing_method", TIMING_METHOD)
        html = self.env.get_template(template).render(**context)
        target = self.out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(html)
        self.pages += 1


def _pr(run: Run) -> dict[str, Any] | None:
    if run.pull_request is None and run.pr_url is None:
        return None
    return {"number": run.pull_request, "url": run.pr_url}


def ranking_rows(board: Board) -> list[dict[str, Any]]:
    """Ranking rows with the reference baseline inserted where its score falls."""
    rows: list[dict[str, Any]] = []
    for entry, run in board.entries:
        fp, fp_title, fp_sort = fast_p_text(run.fast_p, run.fast_p_raw)
        ci = entry.candidate.ci95_us
        rows.append(
            {
                "baseline": False,
                "rank": entry.rank,
                "medal": entry.medal,
                "author": run.author,
                "author_url": Paths.author(run.author),
                "score": run.score_us,
                "score_text": fmt_us(run.score_us),
                "ci_text": fmt_interval(ci),
                "gap_text": "" if entry.gap_us is None else f"+{fmt_us(entry.gap_us)}",
                "gap_pct": "" if entry.gap_pct is None else f"+{entry.gap_pct:.1f}%",
                "gap": entry.gap_us or 0.0,
                "tied": entry.tied_with_above,
                "tied_rank": entry.rank - 1,
                "speedup": run.speedup,
                "speedup_text": fmt_speedup(run.speedup, run.tied),
                "fast_p": fp,
                "fast_p_title": fp_title,
                "fast_p_sort": fp_sort,
                "date": run.date,
                "created_at": run.created_at,
                "pr": _pr(run),
                "url": Paths.run(run),
            }
        )
    base = board.baseline()
    if base is not None:
        baseline = {
            "baseline": True,
            "rank": None,
            "author": "reference",
            "score": base.score_us,
            "score_text": fmt_us(base.score_us),
            "ci_text": fmt_interval(base.ci95_us),
            "source": base.source,
            "speedup_text": fmt_speedup(1.0),
            "speedup": 1.0,
            "url": Paths.run(board.reference) if board.reference else None,
            "date": board.reference.date if board.reference else "",
        }
        rows.insert(rankings.baseline_position([r["score"] for r in rows], base.score_us), baseline)
    return rows


def heatmap(board: Board) -> dict[str, Any] | None:
    columns = sorted(board.cases.items())
    if not columns or not board.ranking:
        return None
    rows = []
    for entry, run in board.entries[:HEATMAP_ROWS]:
        cells = []
        for idx, label in columns:
            value = run.case_speedups.get(idx)
            cells.append(
                {
                    "text": "—" if value is None else f"{value:.2f}",
                    "style": charts.heat_style(value),
                    "title": f"{run.author} · {label}: "
                    + ("no timing" if value is None else f"{fmt_speedup(value)} the reference"),
                    "value": -1 if value is None else value,
                }
            )
        rows.append(
            {"rank": entry.rank, "author": run.author, "url": Paths.run(run), "cells": cells}
        )
    return {
        "columns": [label for _, label in columns],
        "rows": rows,
        "more": max(0, len(board.ranking) - HEATMAP_ROWS),
    }


def recent_unranked(board: Board) -> list[Run]:
    """The latest runs that are not ranked (test mode, failed, late, ...), newest first."""
    runs = [r for r in board.runs if not r.ranked and not r.is_reference]
    return sorted(runs, key=lambda r: r.created_at, reverse=True)[:RECENT_UNRANKED]


def apart_tables(board: Board) -> list[dict[str, Any]]:
    """Runs of older timing methods than the board's ranking: one table per method, ranked
    among themselves only (data.Board.rank)."""
    tables = []
    for method, entries in board.apart:
        tables.append(
            {
                "method": method_text(method),
                "rows": [
                    {
                        "rank": entry.rank,
                        "author": run.author,
                        "author_url": Paths.author(run.author),
                        "score": run.score_us,
                        "score_text": fmt_us(run.score_us),
                        "ci_text": fmt_interval(entry.candidate.ci95_us),
                        "speedup_text": fmt_speedup(run.speedup, run.tied),
                        "date": run.date,
                        "url": Paths.run(run),
                    }
                    for entry, run in ((e, e.candidate.payload) for e in entries)
                ],
            }
        )
    return tables


def panel(board: Board) -> dict[str, Any]:
    points = [(c.created_at, c.score_us, c.author) for c in board.ranked_candidates]
    series = [(run.author, run.fast_p) for _, run in board.entries[:FASTP_SERIES] if run.fast_p]
    unranked = recent_unranked(board)
    return {
        "device": board.device,
        "id": Paths.panel(board.device),
        "rows": ranking_rows(board),
        "ranked": len(board.ranking),
        # every run the panel counts: filed (ranked, apart, unranked, reference) and local
        "runs": len(board.runs) + len(board.local),
        "filed": len(board.runs),
        "method": method_text(board.current_method) if board.apart else "",
        "stale": stale_method(board),
        "apart": apart_tables(board),
        "heat": heatmap(board),
        "history": charts.history_svg(points, board.device),
        "fastp": charts.fast_p_svg(series, board.device),
        "unranked": [
            {
                "author": r.author,
                "author_url": Paths.author(r.author),
                "date": r.date,
                "mode": r.mode,
                "status": r.status,
                "tests": f"{r.tests[0]}/{r.tests[1]}",
                "score_text": fmt_us(r.score_us),
                "url": Paths.run(r),
            }
            for r in unranked
        ],
        "export": Paths.export(board.task.name, board.device),
        "listed": board.device in board.task.gpus,
        "local": [
            {
                "author": r.author,
                "date": r.date,
                "mode": r.mode,
                "status": r.status,
                "tests": f"{r.tests[0]}/{r.tests[1]}",
                "score_text": fmt_us(r.score_us),
                "ci_text": fmt_interval(r.ci95_us),
                "speedup_text": fmt_speedup(r.speedup),
                "would_rank": r.would_rank,
                "file": r.path,
                "url": Paths.run(r),
            }
            for r in sorted(board.local, key=lambda r: r.created_at, reverse=True)
        ],
    }


def shapes(task) -> dict[str, Any]:
    keys: list[str] = []
    for case in task.benchmarks:
        keys.extend(k for k in case if k not in keys)
    return {"columns": keys, "rows": [[case.get(k, "") for k in keys] for case in task.benchmarks]}


# ------------------------------------------------------------------ pages


def render_index(ctx: Ctx) -> None:
    tiles = []
    for name in sorted(ctx.data.catalog.tasks):
        task = ctx.data.catalog.tasks[name]
        css, words = status_of(task, ctx.data.now)
        devices = []
        for board in ctx.data.boards_of(task):
            devices.append(
                {
                    "device": board.device,
                    "url": Paths.board(name) + "#" + Paths.panel(board.device),
                    "top": [
                        {
                            "rank": e.rank,
                            "medal": e.medal,
                            "author": r.author,
                            "score": fmt_us(r.score_us),
                            "url": Paths.run(r),
                        }
                        for e, r in board.entries[:3]
                    ],
                    "ranked": len(board.ranking),
                    "listed": board.device in task.gpus,
                    "local": [
                        {
                            "author": r.author,
                            "mode": r.mode,
                            "status": r.status,
                            "score": fmt_us(r.score_us) if r.score_us is not None else "",
                            "would_rank": r.would_rank,
                            "url": Paths.run(r),
                        }
                        for r in sorted(board.local, key=lambda r: r.created_at, reverse=True)
                    ],
                }
            )
        tiles.append(
            {
                "name": name,
                "url": Paths.board(name),
                "status": css,
                "status_text": words,
                "deadline": fmt_deadline(task.deadline),
                "summary": summary_line(ctx.md, task.description),
                "devices": devices,
            }
        )
    ctx.write(
        "index.html",
        "index.html.j2",
        tiles=tiles,
        total_runs=ctx.data.total_runs,
        local_runs=sum(len(board.local) for board in ctx.data.boards.values()),
        local_mark=LOCAL_MARK,
        title="Leaderboards",
    )


def render_board(ctx: Ctx, task) -> list[dict[str, Any]]:
    css, words = status_of(task, ctx.data.now)
    panels = [panel(b) for b in ctx.data.boards_of(task)]
    ctx.write(
        Paths.board(task.name),
        "leaderboard.html.j2",
        title=task.name,
        task=task,
        status=css,
        status_text=words,
        deadline=fmt_deadline(task.deadline),
        description=ctx.md.render(task.description),
        tolerance=tolerance_note(task),
        shapes=shapes(task),
        panels=panels,
        local=sum(len(p["local"]) for p in panels),
        local_mark=LOCAL_MARK,
        code_visible=code_visible(task, ctx.data.now),
    )
    return panels


def _case_rows(evaluation: dict[str, Any]) -> list[dict[str, Any]]:
    """Per case: the time that ranks (the median) and the reference's, each with its interval,
    their speedup (presentation.case_speedup, as in the PR comment), the mean beside them."""
    rows = []
    for case in evaluation.get("cases") or []:
        timing = case.get("timing") or None
        ranked, ci = ranked_time(timing)
        reference, reference_ci = ranked_time(case.get("reference_timing"))
        value, tie = case_speedup(case)
        light = speed_of_light(timing)
        rows.append(
            {
                "kind": case.get("kind"),
                "id": case.get("id"),
                "spec": ", ".join(f"{k}={v}" for k, v in (case.get("spec") or {}).items()),
                "seed": case.get("seed"),
                "status": case.get("status"),
                "message": case.get("message") or "",
                "time": fmt_us(ranked),
                "time_v": -1 if ranked is None else ranked,
                "ci": fmt_interval(ci),
                "mean": f"{fmt_us(timing.get('mean_us'))} ± {fmt_us(timing.get('std_us'))}"
                if timing
                else "—",
                "n": timing.get("n") if timing else "",
                "reference": fmt_us(reference),
                "reference_ci": fmt_interval(reference_ci),
                "speedup": fmt_speedup(value, tie),
                "speedup_v": -1 if value is None else value,
                "light": fmt_speed_of_light(light),
                "light_v": light if light is not None else -1,
                "spread": charts.spread_svg(timing),
            }
        )
    return rows


def render_run(ctx: Ctx, board: Board, run: Run, rank: int | None, tied: bool) -> None:
    doc = read_record(ctx.data.root, run)
    evaluation = doc["evaluation"]
    task = board.task
    env = doc.get("environment") or {}
    clocks = env.get("clocks") or {}
    harness = doc.get("harness") or {}
    submission = evaluation.get("submission") or {}
    # A local run's code is its author's own: shown wherever its file still has the hash.
    visible = run.local or code_visible(task, ctx.data.now)
    code_html = None
    code_note = ""
    if visible:
        # a local run's from its own file only, never from the store by its claimed hash
        path = None if run.local else ctx.data.code_paths.get(run.sha256)
        places = [ctx.data.root / run.submission_path]
        if run.local:
            places.append(Path(run.path).parent / run.submission_path)
        for candidate in places if path is None else ():
            if candidate.is_file():
                if hashlib.sha256(candidate.read_bytes()).hexdigest() == run.sha256:
                    path = candidate
                    break
        if path is not None:
            code_html = ctx.highlighter(
                run.sha256,
                path.read_text(errors="replace"),
                submission.get("file") or path.name,
                evaluation["leaderboard"].get("lang"),
            )
        elif run.local:
            code_note = (
                f"Your code, from your local run: {run.submission_path or 'the submission'} is "
                "not found here with the hash the run recorded, so it is not shown. A local "
                "run is never filed, and its code is never published."
            )
        else:
            code_note = "The code of this run is not in the results store."
    elif task.deadline is not None:
        code_note = f"The code is shown after the deadline, {fmt_deadline(task.deadline)}."
    else:
        code_note = "Code on this leaderboard is not published."
    seeds = [
        (c.get("id"), c.get("seed"))
        for c in evaluation.get("cases") or []
        if c.get("seed") is not None
    ]
    capsule = [
        ("device", env.get("device")),
        ("GPU", env.get("gpu_name")),
        ("SM clock", f"{clocks['sm_mhz']} MHz" if clocks.get("sm_mhz") else None),
        ("memory clock", f"{clocks['mem_mhz']} MHz" if clocks.get("mem_mhz") else None),
        ("driver", env.get("driver")),
        ("CUDA", env.get("cuda")),
        ("torch", env.get("torch")),
        ("triton", env.get("triton")),
        ("python", env.get("python")),
        ("harness", harness.get("version")),
        ("harness commit", harness.get("commit")),
        ("run id", doc.get("run_id")),
        ("record", run.path),
    ]
    command = reproduce_command(run, submission)
    method_note = ""
    if run.ranked and run.timing_method != board.current_method and board.ranking:
        method_note = (
            f"Timed by {method_text(run.timing_method)}; this board ranks runs of "
            f"{method_text(board.current_method)}, so this run is ranked apart, among runs of its "
            "own method. Re-measure it to compare."
        )
    elif run.local and run.timing_method != board.current_method and board.ranking:
        method_note = (
            f"Timed by {method_text(run.timing_method)}; the filed ranking is of "
            f"{method_text(board.current_method)}, so the rank it would take is among filed "
            "runs of its own method only."
        )
    summary = evaluation.get("summary") or {}
    ctx.write(
        Paths.run(run),
        "submission.html.j2",
        title=f"{run.author} · {task.name} · {run.device}",
        task=task,
        run=run,
        rank=rank,
        medal=rankings.medal(rank),
        tied=tied,
        board_url=Paths.board(task.name) + "#" + Paths.panel(run.device),
        author_url=Paths.author(run.author),
        summary=summary,
        score_text=fmt_us(run.score_us),
        ci_text=fmt_interval(run.ci95_us),
        speedup_text=fmt_speedup(run.speedup, run.tied),
        fast_p=fast_p_text(run.fast_p)[1],
        fast_p_raw=fast_p_text(run.fast_p_raw)[1],
        method_note=method_note,
        method=method_text(run.timing_method),
        cases=_case_rows(evaluation),
        statistic=times_note(c.get("timing") for c in evaluation.get("cases") or []) or "medians",
        local_mark=LOCAL_MARK,
        would_rank=run.would_rank,
        code_html=code_html,
        code_note=code_note,
        capsule=[(k, v) for k, v in capsule if v not in (None, "")],
        seeds=seeds,
        command=command,
        pr=_pr(run),
    )


def reproduce_command(run: Run, submission: dict[str, Any]) -> str:
    """The command that reruns a run in its own mode; a leaderboard run reuses its recorded
    seeds (`--kb-replay`, which only leaderboard mode draws afresh)."""
    path = run.submission_path or submission.get("path", "submission.py")
    mode = run.mode or "test"
    command = f"pytest {path} --kb-mode {mode}"
    if mode == "leaderboard":
        command += f" --kb-replay {run.path}"
    return command


def render_author(
    ctx: Ctx, author: str, runs: list[Run], ranks: dict[str, tuple[int, int]]
) -> None:
    entries = []
    for run in runs:
        if run.key in ranks:
            rank, total = ranks[run.key]
            entries.append(
                {
                    "leaderboard": run.leaderboard,
                    "board_url": Paths.board(run.leaderboard) + "#" + Paths.panel(run.device),
                    "device": run.device,
                    "rank": rank,
                    "total": total,
                    "medal": rankings.medal(rank),
                    "score": run.score_us,
                    "score_text": fmt_us(run.score_us),
                    "speedup_text": fmt_speedup(run.speedup),
                    "date": run.date,
                    "url": Paths.run(run),
                }
            )
    entries.sort(key=lambda e: (e["leaderboard"], e["device"]))
    statuses: dict[str, int] = {}
    for run in runs:
        statuses[run.status] = statuses.get(run.status, 0) + 1
    ctx.write(
        Paths.author(author),
        "author.html.j2",
        title=author,
        author=author,
        entries=entries,
        runs=len(runs),
        statuses=sorted(statuses.items()),
        leaderboards=len({r.leaderboard for r in runs}),
    )


def write_export(ctx: Ctx, board: Board, rows: list[dict[str, Any]]) -> None:
    base = board.baseline()
    doc = {
        "leaderboard": board.task.name,
        "device": board.device,
        "generated_at": format_utc(ctx.data.now),
        "ranking_by": board.task.ranking_by,
        "reference": None
        if base is None
        else {
            "score_us": base.score_us,
            "score_ci95_us": list(base.ci95_us) if base.ci95_us else None,
            "source": base.source,
        },
        "ranking": [
            {
                "rank": e.rank,
                "author": r.author,
                "score_us": r.score_us,
                "score_ci95_us": list(r.ci95_us) if r.ci95_us else None,
                "gap_us": e.gap_us,
                "tied_with_above": e.tied_with_above,
                "speedup": r.speedup,
                "fast_p": r.fast_p,
                "fast_p_raw": r.fast_p_raw,
                "created_at": r.created_at,
                "run_id": r.run_id,
                "evaluation": r.index,
                "record": r.path,
                "pull_request": r.pull_request,
                "case_speedups": {
                    board.cases.get(i, str(i)): v for i, v in sorted(r.case_speedups.items())
                },
            }
            for e, r in board.entries
        ],
        "history": [
            {"created_at": c.created_at, "author": c.author, "score_us": c.score_us}
            for c in sorted(board.ranked_candidates, key=lambda c: c.created_at)
        ],
        # The ranking's timing method, and runs of older ones, ranked among themselves only.
        "timing_method": board.current_method,
        "apart": [
            {
                "timing_method": method,
                "ranking": [
                    {
                        "rank": e.rank,
                        "author": e.author,
                        "score_us": e.score_us,
                        "score_ci95_us": list(e.candidate.ci95_us) if e.candidate.ci95_us else None,
                        "speedup": e.candidate.payload.speedup,
                        "created_at": e.candidate.created_at,
                        "run_id": e.candidate.run_id,
                        "evaluation": e.candidate.index,
                        "record": e.candidate.payload.path,
                    }
                    for e in entries
                ],
            }
            for method, entries in board.apart
        ],
    }
    target = ctx.out / Paths.export(board.task.name, board.device)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(doc, separators=(",", ":"), allow_nan=False))


# ------------------------------------------------------------------ entry point


def _prepare_out(out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise BuildError(f"{out} exists and is not a folder")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise BuildError(
                f"{out} is not empty and was not made by `kernelboard site build`; refusing to clear it"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("built by kernelboard site build\n")
    (out / ".nojekyll").write_text("")
    shutil.copytree(HERE / "static", out / "static")
    (out / "static" / "pygments.css").write_text(Highlighter.css())


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        auto_reload=False,  # templates do not change during a build: no stat per page
    )
    env.filters["slug"] = slug
    return env


@dataclass
class _Plan:
    """Every page to render after the data is loaded, split into shares for workers."""

    boards: list[str]  # leaderboard names: index page, device panels, exports
    runs: list[tuple[tuple[str, str], Run, int | None, bool]]  # board key, run, rank, tied
    authors: list[str]
    ranks: dict[str, tuple[int, int]]  # run key -> (rank, ranked entries on its board)


def _plan(data: SiteData) -> _Plan:
    plan = _Plan(sorted(data.catalog.tasks), [], sorted(data.runs_by_author), {})
    for name in plan.boards:
        for board in data.boards_of(data.catalog.tasks[name]):
            key = (name, board.device)
            for entry, run in board.entries:
                plan.ranks[run.key] = (entry.rank, len(board.ranking))
                plan.runs.append((key, run, entry.rank, entry.tied_with_above))
            for _method, entries in board.apart:
                plan.runs.extend((key, e.candidate.payload, None, False) for e in entries)
            for run in recent_unranked(board):
                plan.runs.append((key, run, None, False))
            if board.reference is not None:
                plan.runs.append((key, board.reference, None, False))
            plan.runs.extend((key, run, None, False) for run in board.local)
    return plan


_RENDER: dict[str, Any] = {}
MIN_PAGES_PER_WORKER = 200  # below this, a process costs more than it saves


def _render_share(share: int) -> int:
    """Render the pages of one share (of `workers`); returns how many were written."""
    data, out, plan, workers, cache_dir = (
        _RENDER[k] for k in ("data", "out", "plan", "workers", "cache_dir")
    )
    ctx = Ctx(data, out, _environment(), Highlighter(cache_dir), _markdown())
    for i, name in enumerate(plan.boards):
        if i % workers == share:
            task = data.catalog.tasks[name]
            panels = render_board(ctx, task)
            for board, info in zip(data.boards_of(task), panels, strict=True):
                write_export(ctx, board, info["rows"])
    for key, run, rank, tied in plan.runs:
        # the same code lands in the same share, so it is highlighted once
        if int(run.sha256[:8], 16) % workers == share:
            render_run(ctx, data.boards[key], run, rank, tied)
    for i, author in enumerate(plan.authors):
        if i % workers == share:
            render_author(ctx, author, data.runs_by_author[author], plan.ranks)
    return ctx.pages


def build_site(
    root: Path,
    out: Path,
    now: dt.datetime | None = None,
    workers: int | None = None,
    cache_dir: Path | None = None,
    local: Sequence[Path] = (),
) -> dict[str, Any]:
    """Build the site from `root` (the repository) into `out`. Returns timings and counts.

    workers: processes for reading and rendering (default: the CPU count; small stores use
    one). cache_dir: where highlighted code is kept between builds (default: not kept).
    local: results documents of local runs to preview, marked local and unranked (local.py).
    """
    started = time.perf_counter()
    root, out = Path(root).resolve(), Path(out).resolve()
    now = now or dt.datetime.now(dt.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=dt.UTC)
    if workers is None:
        workers = min(os.cpu_count() or 1, 8)
    if "fork" not in multiprocessing.get_all_start_methods():
        workers = 1
    _prepare_out(out)
    (out / "data").mkdir(exist_ok=True)
    data = load_site_data(root, now, out / "data" / "dataset.jsonl", workers)
    local_runs = add_local_runs(data, local)
    loaded = time.perf_counter()
    plan = _plan(data)
    ctx = Ctx(data, out, _environment(), Highlighter(cache_dir), _markdown())
    render_index(ctx)
    pages = ctx.pages
    share_count = max(1, min(workers, len(plan.runs) // MIN_PAGES_PER_WORKER or 1))
    _RENDER.update(data=data, out=out, plan=plan, workers=share_count, cache_dir=cache_dir)
    try:
        if share_count > 1:
            with multiprocessing.get_context("fork").Pool(share_count) as pool:
                pages += sum(pool.map(_render_share, range(share_count)))
        else:
            pages += _render_share(0)
    finally:
        _RENDER.clear()
    finished = time.perf_counter()
    return {
        "runs": data.total_runs,
        "pages": pages,
        "skipped": len(data.skipped),
        "local": local_runs,
        "workers": share_count,
        "load_s": loaded - started,
        "render_s": finished - loaded,
        "total_s": finished - started,
    }
