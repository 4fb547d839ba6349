"""A job as a client posts it, checked field by field: every refusal names the field.

{"leaderboard": "...", "mode": "test"|"benchmark",
 "candidates": [{"id": "...", "source": "...", "lang": "py"|"cu"}, ...]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..batch.candidates import Candidate
from ..errors import KernelboardError
from ..vocabulary import Lang

MODES = ("test", "benchmark")
LANGS = tuple(lang.value for lang in Lang)
MAX_SOURCE_CHARS = 1_000_000  # one kernel; a generated file far larger is not a kernel
MAX_ID_CHARS = 200
_JOB_KEYS = {"leaderboard", "mode", "candidates"}
_CANDIDATE_KEYS = {"id", "source", "lang"}


class BadJob(KernelboardError, ValueError):
    """A job the server refuses as written (HTTP 400); `field` is where the problem is."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


@dataclass(frozen=True)
class JobRequest:
    leaderboard: str
    mode: str
    candidates: tuple[Candidate, ...]  # the batch judge's own

    def to_json(self) -> dict[str, Any]:
        return {
            "leaderboard": self.leaderboard,
            "mode": self.mode,
            "candidates": [
                {"id": c.id, "source": c.source, "lang": c.lang} for c in self.candidates
            ],
        }


def parse_job(body: Any, *, max_candidates: int) -> JobRequest:
    """The job in a request body (already decoded JSON), or BadJob naming the field."""
    if not isinstance(body, dict):
        raise BadJob("body", f"expected a JSON object, got {_kind(body)}")
    _no_unknown_keys(body, _JOB_KEYS, "")
    leaderboard = _text(body, "leaderboard", "leaderboard", limit=MAX_ID_CHARS)
    mode = body.get("mode", "test")
    if mode not in MODES:
        raise BadJob("mode", f"expected one of {', '.join(map(repr, MODES))}, got {mode!r}")
    items = body.get("candidates")
    if not isinstance(items, list) or not items:
        raise BadJob("candidates", f"expected a non-empty list, got {_kind(items)}")
    if len(items) > max_candidates:
        raise BadJob(
            "candidates", f"{len(items)} candidates; this server takes at most {max_candidates}"
        )
    candidates = tuple(_candidate(item, f"candidates[{i}]") for i, item in enumerate(items))
    seen: dict[str, int] = {}
    for i, candidate in enumerate(candidates):
        if candidate.id in seen:
            raise BadJob(
                f"candidates[{i}].id",
                f"{candidate.id!r} is also candidates[{seen[candidate.id]}]'s id; ids name "
                "records, so they must differ within a job",
            )
        seen[candidate.id] = i
    return JobRequest(leaderboard=leaderboard, mode=mode, candidates=candidates)


def _candidate(item: Any, where: str) -> Candidate:
    if not isinstance(item, dict):
        raise BadJob(where, f"expected an object, got {_kind(item)}")
    _no_unknown_keys(item, _CANDIDATE_KEYS, f"{where}.")
    lang = item.get("lang", "py")
    if lang not in LANGS:
        raise BadJob(
            f"{where}.lang", f"expected one of {', '.join(map(repr, LANGS))}, got {lang!r}"
        )
    return Candidate(
        id=_text(item, "id", f"{where}.id", limit=MAX_ID_CHARS),
        source=_text(item, "source", f"{where}.source", limit=MAX_SOURCE_CHARS),
        lang=lang,
    )


def _text(mapping: dict[str, Any], key: str, field: str, *, limit: int) -> str:
    value = mapping.get(key)
    if not isinstance(value, str) or not value.strip():
        raise BadJob(field, f"expected a non-empty string, got {_kind(value)}")
    if len(value) > limit:
        raise BadJob(field, f"{len(value)} characters; at most {limit}")
    return value


def _no_unknown_keys(mapping: dict[str, Any], known: set[str], prefix: str) -> None:
    unknown = sorted(set(mapping) - known)
    if unknown:
        raise BadJob(f"{prefix}{unknown[0]}", f"unknown field (known: {', '.join(sorted(known))})")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (missing or null)"
    if isinstance(value, str):
        return "an empty string" if not value.strip() else "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
