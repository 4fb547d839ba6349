"""Reference for conv2d: torch's float32 conv2d with TF32 off (DeterministicContext)."""

import math

import torch
import torch.nn.functional as F
from task import input_t, output_t
from utils import DeterministicContext, device, make_generator, match_reference


def generate_input(
    batch: int,
    in_channels: int,
    out_channels: int,
    height: int,
    width: int,
    kernel_size: int,
    padding: int,
    seed: int,
) -> input_t:
    """x ~ N(0, 1); w ~ N(0, 1 / (in_channels * kernel_size**2)) so outputs are of order 1."""
    gen = make_generator(seed)
    x = torch.randn((batch, in_channels, height, width), device=device(), generator=gen)
    w = torch.randn(
        (out_channels, in_channels, kernel_size, kernel_size), device=device(), generator=gen
    )
    w /= math.sqrt(in_channels * kernel_size * kernel_size)
    return x, w, padding


def ref_kernel(data: input_t) -> output_t:
    x, w, padding = data
    with DeterministicContext():
        return F.conv2d(x, w, stride=1, padding=padding)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    return match_reference(data, output, ref_kernel, rtol=1e-3, atol=1e-3)
