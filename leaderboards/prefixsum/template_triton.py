"""Triton starting point for prefixsum: block-local scans plus a carry per block."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def block_scan_kernel(x_ptr, out_ptr, sums_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, tl.cumsum(x, axis=0), mask=mask)
    tl.store(sums_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def add_carry_kernel(out_ptr, carry_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    carry = tl.load(carry_ptr + pid)
    values = tl.load(out_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, values + carry, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    n = data.numel()
    BLOCK = 4096
    blocks = triton.cdiv(n, BLOCK)
    out = torch.empty_like(data)
    sums = torch.empty(blocks, device=data.device, dtype=torch.float32)
    block_scan_kernel[(blocks,)](data, out, sums, n, BLOCK=BLOCK)
    # TODO: the carries are computed by torch here; a single-pass scan (decoupled
    # look-back) avoids the second read and write of the output.
    carry = (torch.cumsum(sums, dim=0) - sums).contiguous()
    add_carry_kernel[(blocks,)](out, carry, n, BLOCK=BLOCK)
    return out
