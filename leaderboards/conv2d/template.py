"""Starting point for conv2d: float32 NCHW, stride 1, zero padding `padding`."""

import torch
import torch.nn.functional as F
from task import input_t, output_t

# cuDNN uses TF32 for float32 convolutions by default; it is not accurate enough here.
torch.backends.cudnn.allow_tf32 = False


def custom_kernel(data: input_t) -> output_t:
    x, w, padding = data
    # TODO: replace with your own kernel.
    return F.conv2d(x, w, padding=padding)
