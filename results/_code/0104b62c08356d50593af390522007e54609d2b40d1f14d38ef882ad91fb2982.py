"""Example vectoradd submission: C = A + B, written into the pre-allocated output.

`data` is (A, B, C): two float16 (N, N) input matrices and the float16 output C,
which arrives filled with NaN. Every element of C must be written; the result is
checked against the reference with rtol = atol = 1e-3.

Test it locally with:  pytest submissions/vectoradd/example/submission.py
"""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    # One kernel launch: add and write straight into C (no temporary, no extra copy).
    torch.add(a, b, out=c)
    return c
