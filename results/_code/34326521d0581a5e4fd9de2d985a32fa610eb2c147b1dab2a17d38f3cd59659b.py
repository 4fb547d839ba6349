"""Reference for prefixsum: inclusive scan, checked against float64 with a length-aware bound."""

import torch
from task import input_t, output_t
from utils import device, make_generator, verbose_allclose

# Relative error budget per unit of "running sum of magnitudes" (see check_implementation).
RTOL = 1e-5


def generate_input(size: int, seed: int) -> input_t:
    """`size` standard-normal float32 values."""
    gen = make_generator(seed)
    return torch.randn(size, device=device(), dtype=torch.float32, generator=gen)


def ref_kernel(data: input_t) -> output_t:
    return torch.cumsum(data.to(torch.float64), dim=0).to(torch.float32)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    """Compare with a float64 scan.

    A float32 scan's rounding error at position i is bounded by a small multiple of
    eps * sum(|x[:i+1]|), whatever the order of additions, so the allowed error grows
    with that running sum (and hence with the length) rather than being one constant.
    """
    if not isinstance(output, torch.Tensor):
        return False, f"expected a torch.Tensor, got {type(output).__name__}"
    if output.dtype != torch.float32:
        return False, f"DTYPE MISMATCH: received {output.dtype}, expected torch.float32"
    x = data.to(torch.float64)
    expected = torch.cumsum(x, dim=0)
    budget = RTOL * torch.cumsum(x.abs(), dim=0)
    problems = verbose_allclose(output, expected, rtol=RTOL, atol=budget)
    if problems:
        return False, "\n".join(problems)
    return True, "match"
