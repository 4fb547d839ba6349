"""Why an output failed its check, in terms a program can act on: a wrong structure, shape or
dtype, or wrong numbers (and by how much). The leaderboard's own check decides pass or fail;
this only explains a failure, against the reference's own output on the same input.

Large tensors are compared a block at a time: the float64 difference of a 16384 x 16384 output
held whole took 6 GiB of temporaries in the judge (8.99 GB at its peak on a CPU machine)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Any

from ..channel.leaves import tensor_leaves


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
        error = _max_abs_error(a.detach(), b.detach().to(a.device))
        if worst["max_abs_error"] is None or error > worst["max_abs_error"]:
            worst = {"kind": "numerical", "where": path, "max_abs_error": error}
    if worst["max_abs_error"] is not None and not math.isfinite(worst["max_abs_error"]):
        worst["max_abs_error"] = None  # NaN or inf where a number was expected
        worst["non_finite"] = True
    return worst


BLOCK_ELEMENTS = 1 << 22  # 32 MiB of float64 per temporary


def _max_abs_error(a: Any, b: Any) -> float:
    """max |a - b| in float64, NaN counting as inf and an infinite difference as the largest
    float (torch.nan_to_num's own rule), one block of elements at a time."""
    error = -math.inf
    for index in _blocks(a.shape):
        diff = (a[index].double() - b[index].double()).abs_()
        error = max(error, float(diff.nan_to_num_(nan=math.inf).max()))
    return error


def _blocks(shape: Sequence[int]) -> Iterator[Any]:
    """Indexes that cover a tensor of `shape` in blocks of at most BLOCK_ELEMENTS (the whole,
    or slices of its rows, the leading dimensions walked index by index where a row is larger)."""
    if math.prod(shape) <= BLOCK_ELEMENTS or len(shape) == 0:
        yield Ellipsis
        return
    cut, inner = len(shape), 1
    while inner * shape[cut - 1] <= BLOCK_ELEMENTS:
        inner *= shape[cut - 1]
        cut -= 1
    step = max(1, BLOCK_ELEMENTS // inner)
    for outer in itertools.product(*(range(n) for n in shape[: cut - 1])):
        for start in range(0, shape[cut - 1], step):
            yield (*outer, slice(start, start + step))
