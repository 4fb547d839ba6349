"""Reference for grayscale: Y = 0.2989 R + 0.5870 G + 0.1140 B."""

import torch
from task import input_t, output_t
from utils import device, make_generator, match_reference

WEIGHTS = (0.2989, 0.5870, 0.1140)


def generate_input(height: int, width: int, seed: int) -> input_t:
    """A (height, width, 3) float32 RGB image with values uniform in [0, 1)."""
    gen = make_generator(seed)
    return torch.rand((height, width, 3), device=device(), dtype=torch.float32, generator=gen)


def ref_kernel(data: input_t) -> output_t:
    r, g, b = data[..., 0], data[..., 1], data[..., 2]
    return WEIGHTS[0] * r + WEIGHTS[1] * g + WEIGHTS[2] * b


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    return match_reference(data, output, ref_kernel, rtol=1e-4, atol=1e-4)
