"""The closed word lists of task.yml that other modules check against: one place each."""

from __future__ import annotations

from enum import StrEnum


class RankingBy(StrEnum):
    """How per-case timings become a score (GPU MODE's names); see stats/scoring.py."""

    LAST = "last"  # the last benchmark case only
    MEAN = "mean"  # arithmetic mean of the case means
    GEOM = "geom"  # geometric mean of the case means


class Lang(StrEnum):
    """The language of a leaderboard's submissions."""

    PY = "py"
    CU = "cu"


RANKINGS: tuple[str, ...] = tuple(r.value for r in RankingBy)
LANGS: tuple[str, ...] = tuple(lang.value for lang in Lang)
