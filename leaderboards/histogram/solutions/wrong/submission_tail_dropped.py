"""WRONG: only whole blocks are counted; the last partial block is ignored."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _histogram_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets).to(tl.int32)
    tl.atomic_add(out_ptr + tl.arange(0, BINS), tl.histogram(x, BINS))


def custom_kernel(data: input_t) -> output_t:
    out = torch.zeros(256, device=data.device, dtype=torch.int32)
    block = 1024
    grid = data.numel() // block  # bug: floor, and no mask for the rest
    if grid:
        _histogram_kernel[(grid,)](data, out, BLOCK=block, BINS=256)
    return out
