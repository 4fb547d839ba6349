"""Reference for histogram: 256 int32 bin counts of a uint8 vector."""

import torch
from task import input_t, output_t
from utils import device, make_generator, match_reference

NUM_BINS = 256


def generate_input(size: int, contention: int, seed: int) -> input_t:
    """`size` uniform random bytes; about `contention` percent of them replaced by one value."""
    gen = make_generator(seed)
    data = torch.randint(0, NUM_BINS, (size,), device=device(), dtype=torch.uint8, generator=gen)
    if contention > 0:
        hot = torch.rand(size, device=device(), generator=gen) < contention / 100.0
        value = int(torch.randint(0, NUM_BINS, (1,), device=device(), generator=gen).item())
        data.masked_fill_(hot, value)
    return data


def ref_kernel(data: input_t) -> output_t:
    return torch.bincount(data, minlength=NUM_BINS).to(torch.int32)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    return match_reference(data, output, ref_kernel, exact=True)
