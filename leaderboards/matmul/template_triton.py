"""Triton starting point for matmul: one program computes one BLOCK_M x BLOCK_N tile of C."""

import os

import torch
import triton
import triton.language as tl
from task import input_t, output_t

# The Triton CPU interpreter (TRITON_INTERPRET=1) computes tl.dot on bfloat16 operands
# wrongly (triton 3.6); there, and only there, the tiles are upcast to float32 first.
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, K_TILES: tl.constexpr,
    UPCAST: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kt in range(K_TILES):
        ks = kt * BLOCK_K + tl.arange(0, BLOCK_K)
        a = tl.load(
            a_ptr + rows[:, None] * K + ks[None, :],
            mask=(rows[:, None] < M) & (ks[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * N + cols[None, :],
            mask=(ks[:, None] < K) & (cols[None, :] < N),
            other=0.0,
        )
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    # TODO: tune the tile sizes, add grouped program ordering, num_stages, ...
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(
        c_ptr + rows[:, None] * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N)
    )


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    BM, BN, BK = 64, 64, 32
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
    upcast = _INTERPRETED and a.dtype == torch.bfloat16
    matmul_kernel[grid](
        a, b, c, M, N, K,
        BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, K_TILES=triton.cdiv(K, BK), UPCAST=upcast,
    )  # fmt: skip
    return c
