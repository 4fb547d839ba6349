"""Correct prefixsum in Triton: scan-then-propagate in three steps.

1. every program scans its BLOCK elements with tl.cumsum and writes its block total;
2. the (much shorter) vector of block totals is scanned in float64 to get each block's carry;
3. every program adds its carry to its block.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _block_scan_kernel(x_ptr, out_ptr, sums_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.cumsum(x, axis=0), mask=mask)
    tl.store(sums_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def _add_carry_kernel(out_ptr, carry_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    carry = tl.load(carry_ptr + pid)
    tl.store(out_ptr + offsets, tl.load(out_ptr + offsets, mask=mask) + carry, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    n = data.numel()
    block = 4096
    blocks = triton.cdiv(n, block)
    out = torch.empty_like(data)
    if n == 0:
        return out
    sums = torch.empty(blocks, device=data.device, dtype=torch.float32)
    _block_scan_kernel[(blocks,)](data, out, sums, n, BLOCK=block, num_warps=8)
    if blocks > 1:
        sums64 = sums.to(torch.float64)
        carry = (torch.cumsum(sums64, dim=0) - sums64).to(torch.float32)
        _add_carry_kernel[(blocks,)](out, carry, n, BLOCK=block, num_warps=8)
    return out
