"""WRONG: textbook convolution flips the kernel; conv2d here is a cross-correlation."""

import torch
import torch.nn.functional as F
from task import input_t, output_t

torch.backends.cudnn.allow_tf32 = False


def custom_kernel(data: input_t) -> output_t:
    x, w, padding = data
    return F.conv2d(x, torch.flip(w, dims=(-2, -1)), padding=padding)
