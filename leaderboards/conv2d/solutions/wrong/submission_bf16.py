"""WRONG: runs the convolution in bfloat16 for tensor-core speed; 8-bit mantissas are far
outside the 1e-3 tolerance."""

import torch.nn.functional as F
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, w, padding = data
    return F.conv2d(x.bfloat16(), w.bfloat16(), padding=padding).float()
