"""WRONG: the grid covers only whole blocks, so the last partial block of C stays unwritten."""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _add_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets))


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    block = 1024
    grid = a.numel() // block  # bug: should be triton.cdiv(n, block) with a mask
    if grid:
        _add_kernel[(grid,)](a, b, c, BLOCK=block)
    return c
