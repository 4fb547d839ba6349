"""WRONG: scans in bfloat16 to halve the bytes moved; its rounding error is far above the budget."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return torch.cumsum(data.to(torch.bfloat16), dim=0).to(torch.float32)
