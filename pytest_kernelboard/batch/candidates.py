"""Candidates: the kernels a batch judges. A source file, a folder of them, or a JSONL of
`{id, source, lang}`; a file's id is its name."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import KernelboardError
from ..spec.discovery import SUBMISSION_SUFFIXES
from ..vocabulary import Lang


class CandidateError(KernelboardError, ValueError):
    """A candidate cannot be read; the message names the file, line or field."""


@dataclass(frozen=True)
class Candidate:
    """One kernel to judge: its id (unique in a batch), its source text, its language."""

    id: str
    source: str
    lang: str = "py"

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise CandidateError(f"a candidate's id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.source, str):
            raise CandidateError(f"candidate {self.id!r}: source must be a string")
        if self.lang not in {lang.value for lang in Lang}:
            raise CandidateError(
                f"candidate {self.id!r}: lang must be one of "
                f"{', '.join(lang.value for lang in Lang)}, got {self.lang!r}"
            )

    @property
    def file_name(self) -> str:
        return f"submission.{self.lang}"


def load_candidates(paths: Iterable[str | Path]) -> list[Candidate]:
    """Every candidate the paths name, in the order given; ids must be unique."""
    found: list[Candidate] = []
    for path in map(Path, paths):
        found.extend(_from_path(path))
    seen: set[str] = set()
    for candidate in found:
        if candidate.id in seen:
            raise CandidateError(f"candidate id {candidate.id!r} is given twice")
        seen.add(candidate.id)
    return found


def _from_path(path: Path) -> Iterator[Candidate]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUBMISSION_SUFFIXES)
        if not files:
            raise CandidateError(f"{path}: no .py or .cu files in this folder")
        for file in files:
            yield from _from_path(file)
    elif path.suffix == ".jsonl":
        yield from _from_jsonl(path)
    elif path.suffix in SUBMISSION_SUFFIXES:
        try:
            source = path.read_text()
        except OSError as exc:
            raise CandidateError(f"{path}: cannot read it: {exc.strerror}") from None
        yield Candidate(path.name, source, path.suffix.removeprefix("."))
    elif not path.exists():
        raise CandidateError(f"{path}: no such file or folder")
    else:
        raise CandidateError(f"{path}: a candidate is a .py or .cu file, a folder, or a .jsonl")


def _from_jsonl(path: Path) -> Iterator[Candidate]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise CandidateError(f"{path}: cannot read it: {exc.strerror}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CandidateError(f"{where}: not JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise CandidateError(f"{where}: expected an object {{id, source, lang}}")
        missing = [key for key in ("id", "source") if key not in item]
        if missing:
            raise CandidateError(f"{where}: missing key(s) {', '.join(missing)}")
        try:
            yield Candidate(item["id"], item["source"], item.get("lang", "py"))
        except CandidateError as exc:
            raise CandidateError(f"{where}: {exc}") from None
