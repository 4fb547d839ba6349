"""WRONG: treats the image as BGR, so the red and blue weights are swapped."""

import torch
from task import input_t, output_t

WEIGHTS = (0.1140, 0.5870, 0.2989)  # bug: B, G, R order


def custom_kernel(data: input_t) -> output_t:
    weights = torch.tensor(WEIGHTS, device=data.device, dtype=data.dtype)
    return (data * weights).sum(dim=-1)
