"""Rankings, derived from filed results and never stored.

A ranking holds the best eligible run per (leaderboard, device, author), ordered by score
(microseconds, lower is better). Whether a run may be ranked at all is decided in exactly
one place: `is_ranked`. Everything else here (the site, `kernelboard results list`, the
pull-request comment) goes through it.

Runs timed by different timing methods (`harness.timing_method`, bumped whenever how a call is
timed changes) are not comparable: `by_method` splits candidates by it, and the site and the
pull-request comment rank only runs of one method together (the newest method on a board is its
ranking; older ones are shown apart). A record without a timing method predates the field and
counts as older than every numbered method.

Public API:
    is_ranked(run, evaluation, task) -> bool
    is_baseline(run, evaluation, task) -> bool      (a filed reference run fit for the baseline)
    baseline(reference, measured) -> Baseline | None
    medal(rank) -> str | None
    candidates(records, task, device) -> list[Candidate]
    rank(candidates) -> list[RankedEntry]
    rank_entries(records, task, device) -> list[RankedEntry]
    would_rank(run, evaluation, ranking) -> Projection
    intervals_overlap(a, b) -> bool
    timing_method(run) -> int | None
    by_method(candidates) -> dict[int | None, list[Candidate]]   (newest method first)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .spec.task import TaskSpec
from .utc import parse_utc

RANKED_MODE = "leaderboard"
MEDALS = {1: "gold", 2: "silver", 3: "bronze"}


def medal(rank: int | None) -> str | None:
    """'gold', 'silver', 'bronze' for the podium, else None."""
    return MEDALS.get(rank) if rank is not None else None


def is_ranked(run: dict[str, Any], evaluation: dict[str, Any], task: TaskSpec) -> bool:
    """The one rule for ranking eligibility.

    A run is ranked when it was made in leaderboard mode for this leaderboard, passed every
    check, has a score, ran on a device the leaderboard lists, is not the reference
    implementation, and was created no later than the leaderboard's deadline.
    """
    summary = evaluation.get("summary") or {}
    submission = evaluation.get("submission") or {}
    if run.get("mode") != RANKED_MODE:
        return False
    if (evaluation.get("leaderboard") or {}).get("name") != task.name:
        return False
    if summary.get("status") != "passed" or summary.get("score_us") is None:
        return False
    if (run.get("environment") or {}).get("device") not in task.gpus:
        return False
    if submission.get("is_reference"):
        return False
    if task.deadline is not None:
        try:
            if parse_utc(run["created_at"]) > task.deadline:
                return False
        except (KeyError, TypeError, ValueError):
            return False
    return True


def is_baseline(run: dict[str, Any], evaluation: dict[str, Any], task: TaskSpec) -> bool:
    """Whether a filed run of the reference implementation may stand as the baseline row:
    made in leaderboard mode for this leaderboard, every check passed."""
    summary = evaluation.get("summary") or {}
    return (
        bool((evaluation.get("submission") or {}).get("is_reference"))
        and run.get("mode") == RANKED_MODE
        and (evaluation.get("leaderboard") or {}).get("name") == task.name
        and summary.get("status") == "passed"
    )


@dataclass(frozen=True)
class Baseline:
    """The reference's score on a board, shown as an unranked row where its score falls."""

    score_us: float
    ci95_us: tuple[float, float] | None
    source: str  # where the number comes from, in words


def baseline(
    reference: tuple[float, tuple[float, float] | None] | None,
    measured: Iterable[tuple[str, float | None]] = (),
) -> Baseline | None:
    """The baseline: the latest filed reference run's (score, ci95) when there is one, else
    the reference score measured alongside the latest ranked run ((created_at, score) pairs)."""
    if reference is not None and reference[0] is not None:
        return Baseline(reference[0], reference[1], "reference run")
    latest = sorted((created, score) for created, score in measured if score is not None)
    if latest:
        return Baseline(latest[-1][1], None, "measured alongside the latest ranked run")
    return None


def baseline_position(scores: Sequence[float], score_us: float) -> int:
    """Where the baseline row goes among rows ordered by score: before the first slower one."""
    return next((i for i, s in enumerate(scores) if s > score_us), len(scores))


def timing_method(run: dict[str, Any]) -> int | None:
    """The timing method a run was measured by (`harness.timing_method`); None for a record
    older than the field."""
    value = (run.get("harness") or {}).get("timing_method")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def method_order(method: int | None) -> int:
    """Sort key of a timing method: None (unrecorded) before every numbered method."""
    return -1 if method is None else method


def by_method(found: Iterable[Candidate]) -> dict[int | None, list[Candidate]]:
    """Candidates grouped by their timing method, the newest method first: runs of one group
    may be ranked together, runs of two may not."""
    groups: dict[int | None, list[Candidate]] = {}
    for candidate in found:
        groups.setdefault(candidate.timing_method, []).append(candidate)
    return dict(sorted(groups.items(), key=lambda item: -method_order(item[0])))


@dataclass(frozen=True)
class Candidate:
    """One eligible evaluation, reduced to what ordering needs. `payload` is the caller's."""

    author: str
    score_us: float
    ci95_us: tuple[float, float] | None
    created_at: str
    run_id: str
    index: int
    payload: Any = field(default=None, compare=False, repr=False)
    timing_method: int | None = None  # harness.timing_method; None: not recorded (older)

    @classmethod
    def of(cls, run: dict[str, Any], index: int, payload: Any = None) -> Candidate:
        """The candidate of evaluation `index` of `run` (a run document or a filed record).

        `index` counts within the document; the candidate's own index is the evaluation's
        place in the original run (a filed record holds one evaluation and says which).
        """
        evaluation = run["evaluations"][index]
        summary = evaluation["summary"]
        ci = summary.get("score_ci95_us")
        return cls(
            author=evaluation["submission"]["author"],
            score_us=float(summary["score_us"]),
            ci95_us=(float(ci[0]), float(ci[1])) if ci and len(ci) == 2 else None,
            created_at=run["created_at"],
            run_id=run["run_id"],
            index=run.get("evaluation_index", 0) + index,
            payload=payload,
            timing_method=timing_method(run),
        )

    @property
    def order_key(self) -> tuple[float, str, str, str, int]:
        # Equal scores: the earlier run wins; then a stable, arbitrary order.
        return (self.score_us, self.created_at, self.author, self.run_id, self.index)


@dataclass(frozen=True)
class RankedEntry:
    """One row of a ranking."""

    rank: int  # 1-based
    candidate: Candidate
    gap_us: float | None  # to the row above; None for the first row
    gap_pct: float | None
    tied_with_above: bool  # 95% intervals of this row and the one above overlap

    @property
    def author(self) -> str:
        return self.candidate.author

    @property
    def score_us(self) -> float:
        return self.candidate.score_us

    @property
    def medal(self) -> str | None:
        return medal(self.rank)


def intervals_overlap(a: Sequence[float] | None, b: Sequence[float] | None) -> bool:
    """Whether two closed intervals [lo, hi] share a point; False when either is unknown."""
    if not a or not b:
        return False
    return max(a[0], b[0]) <= min(a[1], b[1])


def candidates(
    records: Iterable[dict[str, Any] | tuple[Any, dict[str, Any]]], task: TaskSpec, device: str
) -> list[Candidate]:
    """Eligible evaluations of `task` on `device`. A record is a run document or (key, run);
    the key (e.g. the record's path) becomes the candidate's payload."""
    found = []
    for record in records:
        key, run = record if isinstance(record, tuple) else (None, record)
        if (run.get("environment") or {}).get("device") != device:
            continue
        for index, evaluation in enumerate(run.get("evaluations") or []):
            if is_ranked(run, evaluation, task):
                found.append(Candidate.of(run, index, key))
    return found


def best_per_author(found: Iterable[Candidate]) -> list[Candidate]:
    best: dict[str, Candidate] = {}
    for candidate in found:
        current = best.get(candidate.author)
        if current is None or candidate.order_key < current.order_key:
            best[candidate.author] = candidate
    return sorted(best.values(), key=lambda c: c.order_key)


def rank(found: Iterable[Candidate]) -> list[RankedEntry]:
    """Best candidate per author, ordered by score, with gaps and ties to the row above."""
    entries: list[RankedEntry] = []
    above: Candidate | None = None
    for position, candidate in enumerate(best_per_author(found), start=1):
        gap = gap_pct = None
        tied = False
        if above is not None:
            gap = candidate.score_us - above.score_us
            gap_pct = 100.0 * gap / above.score_us if above.score_us > 0 else None
            tied = intervals_overlap(above.ci95_us, candidate.ci95_us)
        entries.append(RankedEntry(position, candidate, gap, gap_pct, tied))
        above = candidate
    return entries


def rank_entries(
    records: Iterable[dict[str, Any] | tuple[Any, dict[str, Any]]], task: TaskSpec, device: str
) -> list[RankedEntry]:
    """The ranking of `task` on `device` from run documents (see `candidates`)."""
    return rank(candidates(records, task, device))


@dataclass(frozen=True)
class Projection:
    """Where a new run would land in an existing ranking."""

    rank: int
    total: int  # rows in the ranking with the new run in it
    gap_to_first_us: float  # 0 when it would be first
    gap_to_first_pct: float
    previous_rank: int | None  # the author's rank before, if ranked
    improves_own_best: bool  # False: the author's earlier run stays their entry
    tied_with: tuple[str, ...]  # authors of adjacent rows within noise


def would_rank(
    run: dict[str, Any], evaluation_index: int, ranking: Sequence[RankedEntry]
) -> Projection:
    """Project a passing, scored evaluation into `ranking` (check `is_ranked` first)."""
    new = Candidate.of(run, evaluation_index)
    previous = next((e for e in ranking if e.author == new.author), None)
    rows = [e.candidate for e in ranking if e.author != new.author]
    improves = previous is None or new.order_key < previous.candidate.order_key
    mine = new if improves else previous.candidate
    rows = sorted([*rows, mine], key=lambda c: c.order_key)
    position = rows.index(mine)
    first = rows[0]
    gap = mine.score_us - first.score_us
    neighbours = [rows[i] for i in (position - 1, position + 1) if 0 <= i < len(rows)]
    return Projection(
        rank=position + 1,
        total=len(rows),
        gap_to_first_us=gap,
        gap_to_first_pct=100.0 * gap / first.score_us if first.score_us > 0 else 0.0,
        previous_rank=previous.rank if previous else None,
        improves_own_best=improves,
        tied_with=tuple(c.author for c in neighbours if intervals_overlap(c.ci95_us, mine.ci95_us)),
    )
