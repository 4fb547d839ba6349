"""Reference for softmax: row-wise over the last dim, computed in float32."""

import torch
from task import input_t, output_t
from utils import device, make_generator, match_reference

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# dtype -> (rtol, atol)
TOLERANCES = {torch.float32: (1e-5, 1e-6), torch.bfloat16: (1e-2, 1e-4)}


def generate_input(rows: int, cols: int, dtype: str, scale: int, seed: int) -> input_t:
    """Standard-normal logits times `scale`, in the case's dtype."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    gen = make_generator(seed)
    x = torch.randn((rows, cols), device=device(), dtype=torch.float32, generator=gen)
    return (x * scale).to(DTYPES[dtype])


def ref_kernel(data: input_t) -> output_t:
    return torch.softmax(data.to(torch.float32), dim=-1).to(data.dtype)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    rtol, atol = TOLERANCES[data.dtype]
    return match_reference(data, output, ref_kernel, rtol=rtol, atol=atol)
