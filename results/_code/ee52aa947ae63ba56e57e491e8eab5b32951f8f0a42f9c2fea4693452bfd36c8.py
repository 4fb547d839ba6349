"""Correct vectoradd in Triton: masked element-wise add over the flattened matrices."""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a + b, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    n = a.numel()
    block = 4096
    _add_kernel[(triton.cdiv(n, block),)](a, b, c, n, BLOCK=block, num_warps=8)
    return c
