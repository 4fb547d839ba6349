"""The numerics settings a verdict depended on, for the results document's environment.

GPU MODE references fix their own numerics (TF32 off inside a DeterministicContext,
deterministic algorithms on) and the harness never overrides them; what it records is the
process-wide state the reference's check ran under, and the library versions behind it.
"""

from __future__ import annotations

import functools
import importlib.metadata
from collections.abc import Callable
from typing import Any

# pip wheels that carry the cuBLAS a torch build loads, newest CUDA first.
_CUBLAS_WHEELS = ("nvidia-cublas-cu13", "nvidia-cublas-cu12", "nvidia-cublas-cu11")


def _try(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception:  # a build without the backend: the setting does not exist
        return None


@functools.cache
def cublas_version() -> str | None:
    """cuBLAS as shipped in a pip wheel; None when torch links a system CUDA (see `cuda`)."""
    for dist in _CUBLAS_WHEELS:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def numerics_environment() -> dict[str, Any]:
    """TF32 flags, matmul precision, determinism switches, cuDNN / cuBLAS / CUDA versions."""
    try:
        import torch
    except ImportError:
        return {}
    cudnn = torch.backends.cudnn
    return {
        "matmul_allow_tf32": _try(lambda: bool(torch.backends.cuda.matmul.allow_tf32)),
        "cudnn_allow_tf32": _try(lambda: bool(cudnn.allow_tf32)),
        "float32_matmul_precision": _try(torch.get_float32_matmul_precision),
        "matmul_allow_fp16_reduced_precision": _try(
            lambda: bool(torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction)
        ),
        "deterministic_algorithms": _try(torch.are_deterministic_algorithms_enabled),
        "cudnn_deterministic": _try(lambda: bool(cudnn.deterministic)),
        "cudnn_benchmark": _try(lambda: bool(cudnn.benchmark)),
        "cudnn_enabled": _try(lambda: bool(cudnn.enabled)),
        "cudnn_version": _try(cudnn.version),
        "cuda_runtime": torch.version.cuda,
        "cublas": cublas_version(),
    }
