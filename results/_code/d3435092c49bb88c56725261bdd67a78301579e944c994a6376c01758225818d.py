"""Correct softmax in Triton: one program per row, online (running max and sum) over chunks.

Pass 1 walks the row in BLOCK-wide chunks keeping the running maximum m and the sum of
exp(x - m), rescaled whenever m grows. Pass 2 writes exp(x - m) / sum. Arithmetic is in
float32 whatever the input dtype; rows of any length work with a bounded block size.
The chunk count is a compile-time constant (one specialisation per row length), which
also keeps the loop usable under the Triton CPU interpreter.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    out_row = out_ptr + row * n_cols
    running_max = tl.full([], float("-inf"), tl.float32)
    running_sum = tl.full([], 0.0, tl.float32)
    for chunk in range(CHUNKS):
        cols = chunk * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(
            tl.exp(x - new_max), axis=0
        )
        running_max = new_max
    for chunk in range(CHUNKS):
        cols = chunk * BLOCK + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - running_max) / running_sum
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    rows, cols = data.shape
    out = torch.empty_like(data)
    block = min(triton.next_power_of_2(cols), 4096)
    chunks = triton.cdiv(cols, block)
    num_warps = 8 if block >= 2048 else 4
    _softmax_kernel[(rows,)](data, out, cols, BLOCK=block, CHUNKS=chunks, num_warps=num_warps)
    return out
