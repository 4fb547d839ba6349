"""Reference for vectoradd_cu (the same as vectoradd): C = A + B in float16."""

import torch
from task import input_t, output_t
from utils import device, make_generator, match_reference


def generate_input(size: int, seed: int) -> input_t:
    """Two (size, size) float16 matrices of normal values and a NaN-filled output."""
    gen = make_generator(seed)
    shape = (size, size)
    a = torch.randn(shape, device=device(), dtype=torch.float16, generator=gen)
    b = torch.randn(shape, device=device(), dtype=torch.float16, generator=gen)
    c = torch.full_like(a, float("nan"))
    return a, b, c


def ref_kernel(data: input_t) -> output_t:
    a, b, c = data
    torch.add(a, b, out=c)
    return c


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    return match_reference(data, output, ref_kernel, rtol=1e-3, atol=1e-3)
