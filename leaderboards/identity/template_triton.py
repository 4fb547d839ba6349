"""Triton starting point for identity: fill in copy_kernel."""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    # TODO: load from src_ptr and store to dst_ptr (mind the mask for the last block).
    values = tl.load(src_ptr + offsets, mask=mask)
    tl.store(dst_ptr + offsets, values, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    inp, output = data
    n = inp.numel()
    BLOCK = 1024
    copy_kernel[(triton.cdiv(n, BLOCK),)](inp, output, n, BLOCK=BLOCK)
    return output
