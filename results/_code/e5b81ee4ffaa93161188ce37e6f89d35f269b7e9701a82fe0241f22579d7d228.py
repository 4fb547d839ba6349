"""Correct identity in Triton: a masked, vectorised copy."""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets, mask=mask), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    inp, output = data
    n = inp.numel()
    block = 4096
    _copy_kernel[(triton.cdiv(n, block),)](inp, output, n, BLOCK=block, num_warps=8)
    return output
