"""WRONG: computes the exclusive scan (out[i] = x[0] + ... + x[i-1]): off by one element."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    out = torch.zeros_like(data)
    out[1:] = torch.cumsum(data[:-1], dim=0)
    return out
