"""Shared by every KernelBench leaderboard; `kernelboard import kernelbench` copies this file
verbatim to `leaderboards/kernelbench/kernelbench_utils.py`, beside the problem folders.

A KernelBench problem file defines module-level shape constants, `class Model(nn.Module)`,
`get_inputs()` and `get_init_inputs()`. A case's input is a dict: `inputs` (get_inputs(), on
the device), `init_inputs` (get_init_inputs()) and `weights` (the seed both models are built
under: seed, then construct, as KernelBench does). `scale` > 1 shrinks the shape constants for
the correctness cases that must run on a CPU; the benchmark cases keep KernelBench's sizes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import torch

ATOL = RTOL = 1e-2  # KernelBench's tolerance
SHRINK_FROM = 16  # constants below this (kernel sizes, strides, dims) keep their value
SHRINK_FLOOR = 4  # a shrunk constant never goes below this
MODEL_CACHE = 4  # models kept per process (one per weights seed and shape)


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def shape_constants(problem: ModuleType) -> dict[str, int]:
    """The problem's module-level integers: what get_inputs()/get_init_inputs() read."""
    return {
        name: value
        for name, value in vars(problem).items()
        if not name.startswith("_") and type(value) is int
    }


@contextlib.contextmanager
def scaled(problem: ModuleType, scale: int) -> Iterator[dict[str, int]]:
    """The problem's shape constants divided by `scale` (large ones only) for the duration."""
    original = shape_constants(problem)
    shrunk = {
        name: max(SHRINK_FLOOR, value // scale) if scale > 1 and value >= SHRINK_FROM else value
        for name, value in original.items()
    }
    try:
        for name, value in shrunk.items():
            setattr(problem, name, value)
        yield shrunk
    finally:
        for name, value in original.items():
            setattr(problem, name, value)


def _to_device(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device())
    if isinstance(value, list | tuple):
        return type(value)(_to_device(v) for v in value)
    return value


def make_input(problem: ModuleType, seed: int, weights: int, scale: int) -> dict[str, Any]:
    with scaled(problem, scale):
        torch.manual_seed(weights)
        init_inputs = list(problem.get_init_inputs())
        torch.manual_seed(seed)
        # Drawn on the device itself: a fresh input per timed call at KernelBench's sizes would
        # otherwise cost seconds of CPU random numbers each.
        with device():
            inputs = [_to_device(x) for x in problem.get_inputs()]
    return {"inputs": inputs, "init_inputs": init_inputs, "weights": weights}


def model_kernel(model_class: type) -> Callable[[dict[str, Any]], Any]:
    """kernel(data) running model_class(*init_inputs), built under the weights seed once per
    (seed, init inputs): the reference's Model and a submission's ModelNew alike."""
    models: dict[tuple[int, str], Any] = {}

    def kernel(data: dict[str, Any]) -> Any:
        key = (data["weights"], repr(data["init_inputs"]))
        model = models.get(key)
        if model is None:
            torch.manual_seed(data["weights"])
            model = model_class(*data["init_inputs"]).to(device()).eval()
            if len(models) >= MODEL_CACHE:
                models.pop(next(iter(models)))
            models[key] = model
        with torch.no_grad():
            return model(*data["inputs"])

    return kernel


CHECK_CHUNK = 1 << 24  # elements compared at a time


def _slices(tensor: torch.Tensor) -> Iterator[torch.Tensor]:
    """The tensor as views of at most CHECK_CHUNK elements (or one row, where a row of the
    last dimension is longer), in order: two tensors of one shape give matching views."""
    if tensor.dim() <= 1 and tensor.numel() > CHECK_CHUNK:
        for start in range(0, tensor.numel(), CHECK_CHUNK):
            yield tensor[start : start + CHECK_CHUNK]
        return
    if tensor.dim() == 0 or tensor.numel() <= CHECK_CHUNK:
        yield tensor
        return
    rows = CHECK_CHUNK // max(1, tensor[0].numel())
    if rows == 0:  # one row alone is too large: into its rows
        for row in tensor:
            yield from _slices(row)
        return
    for start in range(0, tensor.shape[0], rows):
        yield tensor[start : start + rows]


def check(expected: Any, received: Any) -> tuple[bool, str]:
    """KernelBench's verdict: same shape, and allclose at atol = rtol = 1e-2."""
    if not isinstance(received, torch.Tensor):
        return False, f"expected a tensor, got {type(received).__name__}"
    if received.shape != expected.shape:
        return False, f"shape {tuple(received.shape)}, expected {tuple(expected.shape)}"
    received = received.to(expected.device, expected.dtype)
    # In slices along the first dimension: isclose over a 6 GiB output would make several
    # full-size temporaries in the judge, and flattening a strided output (attention's is
    # transposed) would copy it whole; a slice of each is a view.
    bad_count, worst = 0, 0.0
    for got, want in zip(_slices(received), _slices(expected), strict=True):
        bad = ~torch.isclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=False)
        if bad.any():
            bad_count += int(bad.sum())
            worst = max(worst, (got - want).abs().nan_to_num(float("inf")).max().item())
    if bad_count:
        return False, (
            f"{bad_count} of {expected.numel()} elements differ beyond atol=rtol={ATOL} "
            f"(largest difference {worst:.4g})"
        )
    return True, ""
