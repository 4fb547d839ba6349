"""Shared by every KernelBench leaderboard; `kernelboard import kernelbench` copies this file
verbatim to `leaderboards/kernelbench/kernelbench_utils.py`, beside the problem folders.

A KernelBench problem file defines module-level shape constants, `class Model(nn.Module)`,
`get_inputs()` and `get_init_inputs()`. A case's input is a dict: `inputs` (get_inputs(), on
the device), `init_inputs` (get_init_inputs()), `weights` (the seed both models are built
under: seed, then construct, as KernelBench does, but on the device) and `scale`. `scale` > 1
shrinks the shape constants (integers and tuples of integers) for the correctness cases that
must run on a CPU, while the inputs are drawn and while the model is built and called (some
models read them: level 3's RNNs size their hidden state by `batch_size`); the benchmark cases
keep KernelBench's sizes.
"""

from __future__ import annotations

import contextlib
import sys
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


def _is_shape(value: Any) -> bool:
    """An int, or a tuple or list of ints (`input_shape = (32768,)`), bools aside."""
    if type(value) is int:
        return True
    return isinstance(value, tuple | list) and bool(value) and all(type(v) is int for v in value)


def shape_constants(problem: ModuleType) -> dict[str, Any]:
    """The problem's module-level integers and tuples of integers: what get_inputs() and
    get_init_inputs() read."""
    return {
        name: value
        for name, value in vars(problem).items()
        if not name.startswith("_") and _is_shape(value)
    }


def shrink(value: Any, scale: int) -> Any:
    """A shape constant at `scale`: large integers divided (to no less than SHRINK_FLOOR), small
    ones (kernel sizes, strides, dims) kept; a tuple or list element by element, so that
    `batch_size` and `input_shape = (batch_size,)` stay equal."""
    if type(value) is not int:
        return type(value)(shrink(v, scale) for v in value)
    if scale > 1 and value >= SHRINK_FROM:
        return max(SHRINK_FLOOR, value // scale)
    return value


@contextlib.contextmanager
def scaled(problem: ModuleType, scale: int) -> Iterator[dict[str, Any]]:
    """The problem's shape constants divided by `scale` (large ones only) for the duration."""
    original = shape_constants(problem)
    shrunk = {name: shrink(value, scale) for name, value in original.items()}
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
    return {"inputs": inputs, "init_inputs": init_inputs, "weights": weights, "scale": scale}


def problem_modules(model_class: type) -> list[ModuleType]:
    """The problem files whose shape constants a model may read while it is built or called:
    the leaderboard's problem.py, and the module of `Model` where model_class is or extends it.
    A submission's own module is left alone (its large integers may be tile sizes)."""
    found: list[ModuleType] = []
    candidates = [sys.modules.get("problem")] + [
        sys.modules.get(cls.__module__)
        for cls in getattr(model_class, "__mro__", ())
        if cls.__name__ == "Model"
    ]
    for module in candidates:
        if module is not None and hasattr(module, "get_inputs") and module not in found:
            found.append(module)
    return found


def model_kernel(model_class: type) -> Callable[[dict[str, Any]], Any]:
    """kernel(data) running model_class(*init_inputs), built under the weights seed once per
    (seed, init inputs, scale): the reference's Model and a submission's ModelNew alike. At a
    shrunk scale the problem's shape constants are shrunk while it is built and called."""
    models: dict[tuple[int, str, int], Any] = {}
    problems = problem_modules(model_class)

    def kernel(data: dict[str, Any]) -> Any:
        scale = data.get("scale", 1)
        with contextlib.ExitStack() as stack:
            if scale > 1:  # KernelBench's sizes: nothing to change, nothing added to a timed call
                for problem in problems:
                    stack.enter_context(scaled(problem, scale))
            key = (data["weights"], repr(data["init_inputs"]), scale)
            model = models.get(key)
            if model is None:
                torch.manual_seed(data["weights"])
                # Built on the device: a GEMM's weights at KernelBench's sizes (8192 x 8192)
                # take seconds of CPU random numbers and a copy; the device draws them in
                # milliseconds. Both models come from the same device generator under the same
                # seed, so they start identical; the draws differ from KernelBench's CPU ones,
                # from the same distributions.
                with device():
                    model = model_class(*data["init_inputs"])
                model = model.to(device()).eval()
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
