"""The results document: one JSON file per pytest run, the single source of truth downstream.

Shape (schema "kernelboard.run/1"); times are microseconds, durations seconds:

    run_id, created_at, mode, harness{version, commit, timing_method}, environment{device, ...},
    provenance{repository, pull_request, commit}?      (added by CI when filed)
    evaluations: [{
        leaderboard{name, path, ranking_by, lang},
        submission{path, file, author, sha256, is_reference},
        cases: [{kind, index, id, spec, seed, status, message, duration_s,
                 timing?, reference_timing?, reference_run?, speedup?, profile?}],
        summary{status, tests_passed, tests_total, benchmarks_passed, benchmarks_total,
                score_us?, score_ci95_us?, reference_score_us?, speedup?, fast_p?}
    }]

New fields may be added (readers ignore what they do not know); a field's meaning never changes
within a schema version. The typed model of this shape, and the JSON schema generated from it,
live in result_model.py; this module validates, writes and reads documents.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from pathlib import Path
from typing import Any

import jsonschema

from ..errors import KernelboardError
from ..utc import format_utc, now_utc
from .result_model import SCHEMA_ID as SCHEMA_ID  # re-exported: the id lives with the model
from .result_model import (
    CaseKind,
    Environment,
    Harness,
    Mode,
    ModelError,
    Run,
    Status,
    Timing,
    run_schema,
    type_schema,
)

MODES = tuple(m.value for m in Mode)
CASE_KINDS = tuple(k.value for k in CaseKind)
# passed: verified; failed: wrong output; error: the submission raised; crashed: the worker died
# (signal or exit); timeout: past the task's limit; skipped: cannot run here (e.g. needs CUDA).
CASE_STATUSES = tuple(s.value for s in Status)

# Generated from the typed model (result_model.py): its field types, plus the constraints
# (minimums, patterns, const) its fields carry in their metadata.
TIMING_SCHEMA: dict[str, Any] = type_schema(Timing | None)
RUN_SCHEMA: dict[str, Any] = run_schema()
_VALIDATOR = jsonschema.Draft202012Validator(RUN_SCHEMA)


class RecordError(KernelboardError, ValueError):
    """A results document is malformed; the message names the field."""


def _non_finite_paths(value: Any, path: str = "$") -> list[str]:
    if isinstance(value, float) and not math.isfinite(value):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _non_finite_paths(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _non_finite_paths(v, f"{path}[{i}]")]
    return []


def validate_run(doc: Any) -> None:
    """Raise RecordError naming the first problem: schema violation or a non-finite number."""
    errors = sorted(_VALIDATOR.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "$" + "".join(
            f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path
        )
        raise RecordError(f"{where}: {first.message}")
    bad = _non_finite_paths(doc)
    if bad:
        raise RecordError(f"{bad[0]}: not a finite number")


def new_run(mode: str, environment: dict[str, Any], harness: Harness) -> Run:
    """An empty run document: a fresh run id, created now."""
    return Run(
        run_id=uuid.uuid4().hex,
        created_at=format_utc(now_utc()),
        mode=Mode(mode),
        harness=harness,
        environment=Environment.from_json(environment),
        seeds={},
        evaluations=(),
    )


def parse_run(doc: Any) -> Run:
    """A results document, validated, in the typed model (RecordError names the problem)."""
    validate_run(doc)
    try:
        return Run.from_json(doc)
    except ModelError as exc:
        raise RecordError(str(exc)) from None


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def write_run(doc: Run | dict[str, Any], path: Path) -> None:
    """Validate, then write atomically (a reader never sees half a file)."""
    if isinstance(doc, Run):
        doc = doc.to_json()
    validate_run(doc)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False, allow_nan=False) + "\n")
    tmp.replace(path)


def read_run(path: Path) -> dict[str, Any]:
    """Load and validate a results document; errors name the file."""
    try:
        doc = json.loads(Path(path).read_text(), parse_constant=_reject_constant)
    except (OSError, json.JSONDecodeError, ValueError) as exc:
        raise RecordError(f"{path}: cannot read a results document: {exc}") from None
    try:
        validate_run(doc)
    except RecordError as exc:
        raise RecordError(f"{path}: {exc}") from None
    return doc


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")
