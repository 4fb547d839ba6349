"""WRONG: computes in float16 to halve memory traffic; the 1e-4 tolerance forbids it."""

import torch
from task import input_t, output_t

WEIGHTS = (0.2989, 0.5870, 0.1140)


def custom_kernel(data: input_t) -> output_t:
    half = data.half()
    weights = torch.tensor(WEIGHTS, device=data.device, dtype=torch.float16)
    return (half * weights).sum(dim=-1, dtype=torch.float16).float()
