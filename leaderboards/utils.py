"""Helpers shared by every leaderboard's reference.py (and usable from submissions).

A leaderboard lists this file in its task.yml as
``{"name": "utils.py", "source": "../utils.py"}``, so it is importable as ``utils``
beside reference.py, task.py and the submission.

Everything here runs on CPU as well as on CUDA: ``device()`` is the one place where a
leaderboard picks its device.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

__all__ = [
    "DeterministicContext",
    "ceil_div",
    "device",
    "make_generator",
    "match_reference",
    "set_seed",
    "verbose_allclose",
    "verbose_allequal",
]


def device() -> torch.device:
    """The device every leaderboard generates its inputs on: CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def set_seed(seed: int = 42) -> None:
    """Seed Python's, NumPy's (when installed) and torch's global generators."""
    random.seed(seed)
    with contextlib.suppress(ImportError):
        import numpy as np

        np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def make_generator(seed: int, dev: torch.device | None = None) -> torch.Generator:
    """A seeded generator on `dev` (default: device()), so inputs are created where they are used."""
    gen = torch.Generator(device=dev or device())
    gen.manual_seed(seed)
    return gen


# --------------------------------------------------------------------------- comparison


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _index(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(idx))


def _shape_problem(received: Any, expected: torch.Tensor) -> list[str]:
    if not isinstance(received, torch.Tensor):
        return [f"expected a torch.Tensor, got {type(received).__name__}"]
    if tuple(received.shape) != tuple(expected.shape):
        return [
            f"SIZE MISMATCH: received shape {tuple(received.shape)}, expected {tuple(expected.shape)}"
        ]
    return []


# Tensors larger than this are compared a block at a time, so that the float64 temporaries
# stay small (a few times 8 MiB): a 16384 x 16384 output compared whole held about 10 GiB of
# them, and took longer on a 2-core CPU (14.9 s, against 5.6 s in blocks). The verdict and
# every message are those of one comparison of the whole. Much smaller blocks cost more than
# they save on a busy host: every operation on a block is a parallel region of its own, which
# waits for its slowest thread.
BLOCK_ELEMENTS = 1 << 20
# On a GPU every operation on a block is a kernel launch of a few microseconds, so blocks are
# larger there (a few times 32 MiB of temporaries): 64 blocks for a 16384 x 16384 output.
BLOCK_ELEMENTS_CUDA = 1 << 22


def _blocks(shape: Sequence[int], limit: int = BLOCK_ELEMENTS) -> Iterator[tuple[Any, int]]:
    """(index, flat offset) of each block, in row-major order: the whole tensor where it is
    small, else slices of the last dimensions' rows that together fit a block."""
    if math.prod(shape) <= limit or len(shape) == 0:
        yield Ellipsis, 0
        return
    # Dimensions `cut` on fit a block whole (`inner` elements); dimension cut - 1 is sliced,
    # and the ones before it are walked index by index.
    cut, inner = len(shape), 1
    while inner * shape[cut - 1] <= limit:
        inner *= shape[cut - 1]
        cut -= 1
    step = max(1, limit // inner)
    sliced = shape[cut - 1]
    for outer in itertools.product(*(range(n) for n in shape[: cut - 1])):
        base = 0
        for index, size in zip(outer, shape[: cut - 1], strict=True):
            base = base * size + index
        base *= sliced * inner
        for start in range(0, sliced, step):
            yield (*outer, slice(start, start + step)), base + start * inner


def _wrong_per_block(
    expected: torch.Tensor, wrong_in: Callable[[Any], torch.Tensor]
) -> list[tuple[Any, int, int]]:
    """(index, flat offset, how many wrong) of each block whose `wrong_in(index)` mask has any.

    Every block's count stays on the device until all are queued, then comes back at once: on
    a GPU, reading each block's count as it was made waited for the device once per block (a
    16384 x 16384 output: 256 waits, 96 - 130 ms a timed call's check on an H200)."""
    limit = BLOCK_ELEMENTS_CUDA if expected.is_cuda else BLOCK_ELEMENTS
    blocks = list(_blocks(expected.shape, limit))
    counts = [wrong_in(index).sum() for index, _ in blocks]
    found = torch.stack(counts).tolist()
    return [(index, offset, n) for (index, offset), n in zip(blocks, found, strict=True) if n]


class _Mismatches:
    """The elements found wrong, block by block: how many, and the first few."""

    def __init__(self, max_print: int, numel: int):
        self.max_print = max_print
        self.count = 0
        self.numel = numel
        self.positions: list[int] = []

    def add(self, bad: torch.Tensor, offset: int, found: int) -> None:
        """A block's mask of wrong elements, `found` of them, at flat `offset`."""
        self.count += found
        wanted = self.max_print - len(self.positions)
        if found and wanted > 0:
            first = torch.nonzero(bad.reshape(-1))[:wanted, 0].tolist()
            self.positions.extend(offset + pos for pos in first)

    def report(self, received: torch.Tensor, expected: torch.Tensor, what: str) -> list[str]:
        """Messages for the first `max_print` wrong elements (flattened row-major)."""
        if self.count == 0:
            return []
        lines = [f"{self.count} of {self.numel} elements {what}"]
        for pos in self.positions:
            at = _index(pos, expected.shape)
            lines.append(
                f"at {at}: received {_fmt(received[at].item())}, "
                f"expected {_fmt(expected[at].item())}"
            )
        if self.count > self.max_print:
            lines.append(f"... and {self.count - self.max_print} more")
        return lines


def verbose_allclose(
    received: Any,
    expected: torch.Tensor,
    rtol: float = 1e-5,
    atol: float | torch.Tensor = 1e-8,
    max_print: int = 5,
) -> list[str]:
    """Compare element-wise: |received - expected| <= atol + rtol * |expected|.

    Returns a list of messages, empty when everything matches. The shapes are checked
    first; NaN matches only NaN and an infinity only the same infinity. `atol` may also
    be a tensor broadcastable to the shape (a per-element tolerance; one that is not raises
    ValueError, naming both shapes). Values are compared in float64, so the received dtype
    does not matter here.
    """
    problems = _shape_problem(received, expected)
    if problems:
        return problems
    if received.device != expected.device:
        received = received.to(expected.device)
    tolerance = atol  # per block: a tensor is broadcast to the shape, then sliced like it
    if isinstance(atol, torch.Tensor):
        atol = atol.to(device=expected.device, dtype=torch.float64)
        try:
            tolerance = torch.broadcast_to(atol, expected.shape)
        except RuntimeError:
            raise ValueError(
                f"atol of shape {tuple(atol.shape)} does not broadcast to the output's shape "
                f"{tuple(expected.shape)}"
            ) from None

    def compare(index: Any) -> dict[str, torch.Tensor]:
        rec = received[index].detach().to(torch.float64)
        exp = expected[index].detach().to(torch.float64)
        tol = tolerance[index] if isinstance(tolerance, torch.Tensor) else tolerance
        rec_nan, exp_nan = torch.isnan(rec), torch.isnan(exp)
        rec_inf, exp_inf = torch.isinf(rec), torch.isinf(exp)
        special = rec_nan | exp_nan | rec_inf | exp_inf
        # NaN must meet NaN; an infinity must meet the same infinity.
        special_bad = special & ~((rec_nan & exp_nan) | (rec_inf & exp_inf & (rec == exp)))
        diff = (rec - exp).abs_()
        bound = exp.abs().mul_(rtol)  # atol + rtol * |exp|
        bound = bound + tol if isinstance(tol, torch.Tensor) else bound.add_(tol)
        close = diff <= bound
        bad = special_bad | (~special & ~close)
        return {
            "bad": bad,
            "diff": diff,
            "special": special,
            "rec_nan": rec_nan,
            "exp_nan": exp_nan,
        }

    wrong_blocks = _wrong_per_block(expected, lambda index: compare(index)["bad"])
    if not wrong_blocks:
        return []
    # Only an output with wrong elements gets here: its blocks that have any are compared
    # again, for the messages.
    wrong = _Mismatches(max_print, expected.numel())
    largest: float | None = None
    nan_count = 0
    for index, offset, found in wrong_blocks:
        block = compare(index)
        wrong.add(block["bad"], offset, found)
        finite_bad = block["bad"] & ~block["special"]
        if bool(finite_bad.any()):
            block_largest = float(block["diff"][finite_bad].max())
            largest = block_largest if largest is None else max(largest, block_largest)
        nan_count += int((block["rec_nan"] & ~block["exp_nan"]).sum())
    lines = wrong.report(received, expected, f"differ (rtol={rtol}, atol={_atol_text(atol)})")
    if largest is not None:
        lines.append(f"largest absolute difference: {_fmt(largest)}")
    if nan_count:
        lines.append(f"{nan_count} received values are NaN where the expected value is not")
    return lines


def _atol_text(atol: float | torch.Tensor) -> str:
    if isinstance(atol, torch.Tensor):
        return f"per element, {_fmt(float(atol.min()))}..{_fmt(float(atol.max()))}"
    return _fmt(float(atol))


def verbose_allequal(received: Any, expected: torch.Tensor, max_print: int = 5) -> list[str]:
    """Exact comparison (shapes first, then every element). Empty list when equal."""
    problems = _shape_problem(received, expected)
    if problems:
        return problems
    if received.device != expected.device:
        received = received.to(expected.device)
    floating = received.is_floating_point() or expected.is_floating_point()

    def unequal(index: Any) -> torch.Tensor:
        rec, exp = received[index], expected[index]
        if rec.dtype != exp.dtype:
            common = torch.promote_types(rec.dtype, exp.dtype)
            bad = rec.to(common) != exp.to(common)
        else:
            bad = rec != exp
        if floating:
            bad = bad & ~(torch.isnan(rec.to(torch.float64)) & torch.isnan(exp.to(torch.float64)))
        return bad

    wrong = _Mismatches(max_print, expected.numel())
    for index, offset, found in _wrong_per_block(expected, unequal):
        wrong.add(unequal(index), offset, found)
    return wrong.report(received, expected, "differ")


def _leaves(value: Any, path: str = "output") -> list[tuple[str, Any]]:
    if isinstance(value, list | tuple):
        out = []
        for i, item in enumerate(value):
            out.extend(_leaves(item, f"{path}[{i}]"))
        return out
    return [(path, value)]


def match_reference(
    data: Any,
    output: Any,
    ref_kernel: Callable[[Any], Any],
    rtol: float = 1e-5,
    atol: float = 1e-8,
    *,
    exact: bool = False,
    check_dtype: bool = True,
    max_print: int = 5,
) -> tuple[bool, str]:
    """Run `ref_kernel(data)` and compare `output` with it: the body of most check_implementations.

    `data` must be the judge's own copy of the inputs (never the one the submission saw).
    Outputs may be a tensor or a (nested) tuple/list of tensors. With `exact`, values must be
    equal; otherwise `verbose_allclose(rtol, atol)` decides. With `check_dtype`, the received
    dtype must equal the reference's.
    """
    expected = ref_kernel(data)
    exp_leaves = _leaves(expected)
    if isinstance(expected, list | tuple):
        if not isinstance(output, list | tuple) or len(output) != len(expected):
            return False, (
                f"expected a {type(expected).__name__} of {len(expected)} items, "
                f"got {type(output).__name__}"
                + (f" of {len(output)} items" if isinstance(output, list | tuple) else "")
            )
    rec_leaves = _leaves(output) if isinstance(expected, list | tuple) else [("output", output)]
    if len(rec_leaves) != len(exp_leaves):
        return False, f"expected {len(exp_leaves)} output tensors, got {len(rec_leaves)}"
    for (name, rec), (_, exp) in zip(rec_leaves, exp_leaves, strict=True):
        if not isinstance(exp, torch.Tensor):
            if rec != exp:
                return False, f"{name}: received {rec!r}, expected {exp!r}"
            continue
        problems = _shape_problem(rec, exp)
        if not problems and check_dtype and rec.dtype != exp.dtype:
            problems = [f"DTYPE MISMATCH: received {rec.dtype}, expected {exp.dtype}"]
        if not problems:
            problems = (
                verbose_allequal(rec, exp, max_print=max_print)
                if exact
                else verbose_allclose(rec, exp, rtol=rtol, atol=atol, max_print=max_print)
            )
        if problems:
            prefix = f"{name}: " if len(exp_leaves) > 1 else ""
            return False, prefix + "\n".join(problems)
    return True, "match"


# --------------------------------------------------------------------------- numerics settings


class DeterministicContext:
    """Numerics that do not depend on global defaults, restored on exit.

    Inside the block: TF32 is off for matmul and cuDNN, float32 matmul precision is
    "highest", cuDNN picks deterministic algorithms without benchmarking, and torch's
    deterministic-algorithms mode is on (warn-only, so an op without a deterministic
    implementation still runs). Use it around reference computations whose result would
    otherwise depend on the machine's settings (fp32 conv2d / matmul).
    """

    def __enter__(self) -> DeterministicContext:
        cuda_matmul = torch.backends.cuda.matmul
        cudnn = torch.backends.cudnn
        self._saved = {
            "matmul_tf32": _try(lambda: cuda_matmul.allow_tf32),
            "cudnn_tf32": _try(lambda: cudnn.allow_tf32),
            "cudnn_deterministic": cudnn.deterministic,
            "cudnn_benchmark": cudnn.benchmark,
            "precision": torch.get_float32_matmul_precision(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
            "cublas_env": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        }
        # cuBLAS needs a fixed workspace to be deterministic; set it only when unset.
        if self._saved["cublas_env"] is None:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.set_float32_matmul_precision("highest")
        with contextlib.suppress(RuntimeError):
            cuda_matmul.allow_tf32 = False
        with contextlib.suppress(RuntimeError):
            cudnn.allow_tf32 = False
        cudnn.deterministic = True
        cudnn.benchmark = False
        torch.use_deterministic_algorithms(True, warn_only=True)
        return self

    def __exit__(self, *exc: object) -> None:
        saved = self._saved
        torch.use_deterministic_algorithms(saved["deterministic"], warn_only=saved["warn_only"])
        torch.backends.cudnn.deterministic = saved["cudnn_deterministic"]
        torch.backends.cudnn.benchmark = saved["cudnn_benchmark"]
        if saved["cudnn_tf32"] is not None:
            with contextlib.suppress(RuntimeError):
                torch.backends.cudnn.allow_tf32 = saved["cudnn_tf32"]
        if saved["matmul_tf32"] is not None:
            with contextlib.suppress(RuntimeError):
                torch.backends.cuda.matmul.allow_tf32 = saved["matmul_tf32"]
        torch.set_float32_matmul_precision(saved["precision"])
        if saved["cublas_env"] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)


def _try(getter: Callable[[], Any]) -> Any:
    try:
        return getter()
    except RuntimeError:  # a mix of torch's legacy and new TF32 settings
        return None


def ceil_div(a: int, b: int) -> int:
    """Integer ceil(a / b), handy for grid sizes."""
    return -(-a // b)
