"""WRONG: one program per row, but the row offset uses the row index instead of row * N."""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def _row_add_kernel(a_ptr, b_ptr, c_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    base = row  # bug: should be row * n_cols
    a = tl.load(a_ptr + base + cols, mask=mask)
    b = tl.load(b_ptr + base + cols, mask=mask)
    tl.store(c_ptr + base + cols, a + b, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    n_rows, n_cols = a.shape
    _row_add_kernel[(n_rows,)](a, b, c, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return c
