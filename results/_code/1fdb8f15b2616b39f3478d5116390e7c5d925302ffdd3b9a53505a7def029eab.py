"""Reference for matmul: float32 accumulation with TF32 off, rounded to the input dtype."""

import math

import torch
from task import input_t, output_t
from utils import DeterministicContext, device, make_generator, match_reference

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
# dtype -> (rtol, atol); C is of order 1 by construction.
TOLERANCES = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2)}


def generate_input(m: int, n: int, k: int, dtype: str, seed: int) -> input_t:
    """A ~ N(0, 1) of shape (m, k) and B ~ N(0, 1/k) of shape (k, n), in the case's dtype."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    gen = make_generator(seed)
    a = torch.randn((m, k), device=device(), dtype=torch.float32, generator=gen)
    b = torch.randn((k, n), device=device(), dtype=torch.float32, generator=gen)
    b /= math.sqrt(k)
    return a.to(DTYPES[dtype]), b.to(DTYPES[dtype])


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    with DeterministicContext():
        return (a.to(torch.float32) @ b.to(torch.float32)).to(a.dtype)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    rtol, atol = TOLERANCES[data[0].dtype]
    return match_reference(data, output, ref_kernel, rtol=rtol, atol=atol)
