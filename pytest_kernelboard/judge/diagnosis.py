"""Why an output failed its check, in terms a program can act on: a wrong structure, shape or
dtype, or wrong numbers (and by how much). The leaderboard's own check decides pass or fail;
this only explains a failure, against the reference's own output on the same input."""

from __future__ import annotations

import math
from typing import Any

from ..worker.leaves import tensor_leaves


def diagnose(expected: Any, output: Any) -> dict[str, Any]:
    """{"kind": "structure"|"shape"|"dtype"|"numerical", "where": path, "max_abs_error": x}."""
    import torch

    got = list(tensor_leaves(output))
    want = list(tensor_leaves(expected))
    if [p for p, _ in got] != [p for p, _ in want]:
        return {"kind": "structure", "where": None, "max_abs_error": None}
    worst: dict[str, Any] = {"kind": "numerical", "where": None, "max_abs_error": None}
    for (path, a), (_, b) in zip(got, want, strict=True):
        if a.shape != b.shape:
            return {"kind": "shape", "where": path, "max_abs_error": None}
        if a.dtype != b.dtype:
            return {"kind": "dtype", "where": path, "max_abs_error": None}
        if a.numel() == 0 or a.dtype == torch.bool:
            continue
        diff = (a.detach().double() - b.detach().to(a.device).double()).abs()
        error = float(torch.nan_to_num(diff, nan=math.inf).max())
        if worst["max_abs_error"] is None or error > worst["max_abs_error"]:
            worst = {"kind": "numerical", "where": path, "max_abs_error": error}
    if worst["max_abs_error"] is not None and not math.isfinite(worst["max_abs_error"]):
        worst["max_abs_error"] = None  # NaN or inf where a number was expected
        worst["non_finite"] = True
    return worst
