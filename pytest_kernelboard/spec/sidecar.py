"""`kernelboard.yml`: what a leaderboard folder says about itself beside an unmodified task.yml.

GPU MODE keeps a problem's leaderboard name, deadline and devices in a competition YAML, and
their task.yml parser rejects unknown keys; so an imported folder keeps task.yml byte for byte
and carries these values in a small sidecar next to it, which task loading merges in (the
sidecar wins over task.yml).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .values import TaskError, parse_deadline

SIDECAR_NAME = "kernelboard.yml"
SIDECAR_KEYS = {
    "name": "leaderboard name",
    "deadline": "UTC, 'YYYY-MM-DD[ HH:MM]'",
    "gpus": "devices the leaderboard ranks on",
    "open_code": "show submitted code before the deadline",
    "tolerance": "free-form note shown on the site",
    "competition": "the competition the problem was imported from (informational)",
    "read_only_inputs": "a submission that writes into its input data fails",
}


def read_sidecar(folder: Path) -> dict[str, Any]:
    """The validated values of folder/kernelboard.yml, or {} when there is none."""

    path = folder / SIDECAR_NAME
    if not path.is_file():
        return {}
    try:
        raw = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, ValueError) as exc:
        raise TaskError(path, f"not valid YAML: {exc}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TaskError(path, "expected a mapping of keys at the top level")
    unknown = sorted(set(raw) - set(SIDECAR_KEYS))
    if unknown:
        raise TaskError(
            path,
            f"unknown key(s) {', '.join(map(repr, unknown))} (known: {', '.join(SIDECAR_KEYS)})",
        )
    values = dict(raw)
    values.pop("competition", None)
    if "name" in values and (not isinstance(values["name"], str) or not values["name"].strip()):
        raise TaskError(path, f"key 'name': expected a non-empty string, got {values['name']!r}")
    if values.get("deadline"):
        values["deadline"] = parse_deadline(values["deadline"], path)
    gpus = values.get("gpus")
    if gpus is not None and (
        not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus)
    ):
        raise TaskError(path, f"key 'gpus': expected a list of device names, got {gpus!r}")
    return values


def write_sidecar(folder: Path, values: dict[str, Any]) -> Path:
    """Write folder/kernelboard.yml (keys in SIDECAR_KEYS; None values left out)."""
    path = folder / SIDECAR_NAME
    body = {k: v for k, v in values.items() if v is not None and k in SIDECAR_KEYS}
    header = "# Read by kernelboard next to task.yml, which stays as the problem set ships it.\n"
    path.write_text(header + yaml.safe_dump(body, sort_keys=False))
    return path
