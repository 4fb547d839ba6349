"""What task.yml and its sidecar (kernelboard.yml) share: the error that names the file and key,
and the deadline's format."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from ..errors import KernelboardError


class TaskError(KernelboardError, ValueError):
    """A task.yml (or a file it names) is invalid; the message says where."""

    def __init__(self, path: Path | str, message: str):
        self.path = Path(path)
        super().__init__(f"{path}: {message}")


def parse_deadline(value: Any, path: Path) -> dt.datetime:
    """Parse a UTC deadline 'YYYY-MM-DD[ HH:MM]' (YAML may already give a date)."""
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        for fmt in ("%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d"):
            try:
                parsed = dt.datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
        else:
            raise TaskError(path, f"key 'deadline': {value!r} is not 'YYYY-MM-DD[ HH:MM]' (UTC)")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
