"""Starting point for softmax: row-wise softmax over the last dim, same dtype out."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    # TODO: replace with your own kernel.
    return torch.softmax(data.float(), dim=-1).to(data.dtype)
