"""Local runs on the site, for a preview: `kernelboard site build --local RUN.json`.

A results document written by `pytest ... --kb-results RUN.json` is read where it lies (never
copied under results/) and each of its evaluations is shown on its leaderboard, under its
device, marked "local, unranked": never among the ranking's rows, nor in the exports, the
dataset or an author's page. A device the leaderboard does not list gets a tab of its own
(a laptop's CPU run still previews). Where the run could be ranked, the page says the rank
it would take if it were filed (rankings.would_rank, as the pull-request comment does), among
the filed runs of its own timing method.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pytest_kernelboard import rankings
from pytest_kernelboard.errors import KernelboardError
from pytest_kernelboard.results.records import RecordError, read_run

from .data import Board, SiteData, case_label, reduce_run

LOCAL_MARK = "local, unranked"


class LocalRunError(KernelboardError, ValueError):
    """A local run cannot be previewed; the message names the file and why."""


def add_local_runs(data: SiteData, paths: Iterable[Path]) -> int:
    """Put every evaluation of the documents at `paths` on its board; returns how many."""
    added = 0
    for path in paths:
        path = Path(path).resolve()
        try:
            doc = read_run(path)
        except RecordError as exc:
            raise LocalRunError(str(exc)) from None
        device = doc["environment"]["device"]
        for offset, evaluation in enumerate(doc["evaluations"]):
            if evaluation["submission"].get("is_reference"):
                continue  # the reference's timing, already shown beside each case
            name = evaluation["leaderboard"]["name"]
            task = data.catalog.tasks.get(name)
            if task is None:
                known = ", ".join(sorted(data.catalog.tasks)) or "none"
                raise LocalRunError(
                    f"{path}: evaluation {offset} is for leaderboard {name!r}, which is not in "
                    f"{data.root / 'leaderboards'} (known: {known})"
                )
            board = data.boards.setdefault((name, device), Board(task, device))
            run = reduce_run(
                doc, evaluation, doc.get("evaluation_index", 0) + offset, str(path), task
            )
            run.local, run.ranked = True, False
            if rankings.is_ranked(doc, evaluation, task):
                # against the filed runs of its own timing method only (data.Board.rank)
                ranking = board.ranking_for(run.timing_method)
                run.would_rank = rankings.would_rank(doc, offset, ranking)
            for case in evaluation.get("cases") or ():
                if case.get("kind") == "benchmark":
                    board.cases.setdefault(case.get("index", 0), case_label(case))
            board.local.append(run)
            added += 1
    return added
