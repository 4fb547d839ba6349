"""WRONG: only whole blocks are copied; the last partial block is never written."""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets))


def custom_kernel(data: input_t) -> output_t:
    inp, output = data
    block = 256
    full_blocks = inp.numel() // block  # bug: drops the tail instead of masking it
    if full_blocks:
        _copy_kernel[(full_blocks,)](inp, output, BLOCK=block)
    return output
