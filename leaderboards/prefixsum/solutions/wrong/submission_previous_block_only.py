"""WRONG: each block adds only the total of the block just before it, not of all earlier blocks."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _scan_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    scan = tl.cumsum(x, axis=0)
    # bug: the carry should be the sum of *all* earlier blocks
    prev = offsets - BLOCK
    carry = tl.sum(tl.load(x_ptr + prev, mask=mask & (prev >= 0), other=0.0), axis=0)
    tl.store(out_ptr + offsets, scan + carry, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    n = data.numel()
    out = torch.empty_like(data)
    block = 1024
    _scan_kernel[(triton.cdiv(n, block),)](data, out, n, BLOCK=block)
    return out
