"""WRONG: padding lanes are loaded as 0 instead of -inf, so they add exp(0 - max) to the sum
whenever cols is not a power of two."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)  # bug
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    rows, cols = data.shape
    out = torch.empty_like(data)
    _softmax_kernel[(rows,)](data, out, cols, BLOCK=triton.next_power_of_2(cols))
    return out
