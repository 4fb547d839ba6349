"""WRONG: quantises A and B to float8 e4m3 ("twice the tensor-core rate"); 3 mantissa bits
put the products' rounding error far above the tolerance."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    a8 = a.to(torch.float8_e4m3fn).to(torch.float32)
    b8 = b.to(torch.float8_e4m3fn).to(torch.float32)
    return (a8 @ b8).to(a.dtype)
