"""Starting point for prefixsum: float32 (size,) -> its inclusive prefix sum."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # TODO: replace with your own kernel.
    return torch.cumsum(data, dim=0)
