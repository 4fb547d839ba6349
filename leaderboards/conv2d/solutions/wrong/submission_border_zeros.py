"""WRONG: computes the unpadded ("valid") convolution and pads the *output* with zeros,
so every border element of a padded case is wrong."""

import torch
import torch.nn.functional as F
from task import input_t, output_t

torch.backends.cudnn.allow_tf32 = False


def custom_kernel(data: input_t) -> output_t:
    x, w, padding = data
    valid = F.conv2d(x, w)
    return F.pad(valid, (padding, padding, padding, padding))
