"""WRONG: the tail block is loaded with other=0 but the histogram itself is not masked,
so the padding lanes are counted as zeros (bin 0 is too large whenever size % BLOCK != 0)."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _histogram_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, BINS: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0).to(tl.int32)
    counts = tl.histogram(x, BINS)  # bug: should pass mask=mask
    tl.atomic_add(out_ptr + tl.arange(0, BINS), counts)


def custom_kernel(data: input_t) -> output_t:
    out = torch.zeros(256, device=data.device, dtype=torch.int32)
    n = data.numel()
    block = 1024
    _histogram_kernel[(triton.cdiv(n, block),)](data, out, n, BLOCK=block, BINS=256)
    return out
