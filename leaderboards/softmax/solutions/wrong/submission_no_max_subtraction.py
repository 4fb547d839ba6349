"""WRONG: exp(x) / sum(exp(x)) without subtracting the row maximum overflows for large logits."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    e = torch.exp(data.float())
    return (e / e.sum(dim=-1, keepdim=True)).to(data.dtype)
