"""WRONG: the grid rounds the pixel count down, so the last partial block is never written."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _gray_kernel(rgb_ptr, out_ptr, BLOCK: tl.constexpr):
    pixels = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = tl.load(rgb_ptr + 3 * pixels)
    g = tl.load(rgb_ptr + 3 * pixels + 1)
    b = tl.load(rgb_ptr + 3 * pixels + 2)
    tl.store(out_ptr + pixels, 0.2989 * r + 0.5870 * g + 0.1140 * b)


def custom_kernel(data: input_t) -> output_t:
    height, width, _ = data.shape
    out = torch.zeros((height, width), device=data.device, dtype=torch.float32)
    block = 256
    grid = (height * width) // block  # bug: floor instead of ceil, and no mask
    if grid:
        _gray_kernel[(grid,)](data, out, BLOCK=block)
    return out
