"""Whose kernels a call launched: the candidate's own, or only PyTorch's and vendor libraries'.

A candidate that defines a kernel and never launches it (a decoy), or that falls back to the
reference's own torch ops, launches only library kernels. Names tell them apart: PyTorch's
kernels live in its namespaces (at::native, at::cuda, c10), cuBLAS, cuDNN, CUTLASS-based
attention and GEMM kernels carry their library's prefixes, and kernels torch.compile writes
are named triton_<kind>_fused_...; a kernel of the candidate's own (Triton, load_inline, a .cu
file, CuPy) carries the name its source gave it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

LIBRARY_KERNEL = re.compile(
    r"at::native|at::cuda|\bc10::|aten::|cublas|cudnn|nvjet|xmma|gemv2|gemmk1|"
    r"gemmSN|splitKreduce|\bcub::|flash_fwd|flash_bwd|fmha|pytorch_flash|"
    # cuBLAS's BLAS kernels by their own names ("void sgemm_largek_lds64<...>(...)")
    r"(?:^|\s)(?:[sdhcz]gemm|gemv|scal_kernel|axpy_kernel|dot_kernel|nrm2_kernel)\w*[<(]|"
    # cuBLAS's own CUTLASS kernels (a submission's CUTLASS kernels are cutlass::Kernel<...>)
    r"^cutlass\d*x?_|cutlass_\d+_|"
    r"^(triton_(poi|red|per|tem|for)_)|^(ampere|sm\d+|volta|turing)_",
    re.IGNORECASE,
)
# Kernels a source defines: Triton's @triton.jit functions, CUDA's __global__ functions.
_TRITON_KERNEL = re.compile(r"@(?:triton\.)?jit\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)")
_CUDA_KERNEL = re.compile(r"__global__\s+(?:[\w:<>,\s*&]*?\s)?(\w+)\s*\(")


def own_kernel_names(source: str) -> set[str]:
    """The kernels a candidate's source defines by name (Triton functions, __global__ ones)."""
    cuda = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", source)
    return set(_TRITON_KERNEL.findall(source)) | set(_CUDA_KERNEL.findall(cuda))


def is_library_kernel(name: str) -> bool:
    return bool(LIBRARY_KERNEL.search(name))


def only_library_kernels(
    kernels: Sequence[tuple[str, float]], own_names: Iterable[str] = ()
) -> bool:
    """The call launched kernels, all of them PyTorch's or a vendor library's, and none the
    candidate's source defines (a decoy defined and never launched leaves this true)."""
    own = [name for name in own_names if name]
    if any(any(mine in name for mine in own) for name, _ in kernels):
        return False
    return bool(kernels) and all(is_library_kernel(name) for name, _ in kernels)


def top_kernels(kernels: Sequence[tuple[str, float]], n: int = 5) -> list[dict[str, float | str]]:
    """The kernels that took longest, summed by name: [{name, calls, device_us}, ...]."""
    totals: dict[str, list[float]] = {}
    for name, duration in kernels:
        entry = totals.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += duration
    ranked = sorted(totals.items(), key=lambda item: -item[1][1])[:n]
    return [
        {
            "name": name,
            "calls": int(calls),
            "device_us": round(total, 3),
            "library": is_library_kernel(name),
        }
        for name, (calls, total) in ranked
    ]


# A call's kernels, run one after another, take at most this much longer than the call's
# timed interval (kernels that overlap on several streams only make the sum larger; the
# profiler adds a little to each).
CENSUS_SLACK = 1.5
CENSUS_SLACK_US = 5.0


def census_exceeds_timing(
    kernels: Sequence[tuple[str, float]] | None, timing: dict | None
) -> str | None:
    """Why a call's timed interval missed work its kernels did, or None.

    The census sees every kernel of the call, on any stream; the timed interval sees the
    stream it fences. Kernels whose device time far exceeds the interval (even summed as if
    they overlapped completely: the longest one alone) ran where the events did not look (a
    stream made outside torch, a cuBLAS handle bound to one), so the time is not the call's."""
    if not kernels or not timing or not timing.get("rank_us"):
        return None
    longest = max(duration for _, duration in kernels)
    measured = float(timing["rank_us"])
    if longest > CENSUS_SLACK * measured + CENSUS_SLACK_US:
        name = max(kernels, key=lambda k: k[1])[0]
        return (
            f"the timed calls took {measured:.1f} us, but one of its kernels alone ran "
            f"{longest:.1f} us ({name[:80]}): it ran outside the timed stream, so that time "
            "is not the call's"
        )
    return None
