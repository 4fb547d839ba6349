"""Correct conv2d as im2col + GEMM: unfold the padded input into patches, then one matmul."""

import torch
import torch.nn.functional as F
from task import input_t, output_t

torch.backends.cuda.matmul.allow_tf32 = False


def custom_kernel(data: input_t) -> output_t:
    x, w, padding = data
    batch, _, height, width = x.shape
    k, c, r, s = w.shape
    out_h = height + 2 * padding - r + 1
    out_w = width + 2 * padding - s + 1
    cols = F.unfold(x, kernel_size=(r, s), padding=padding)  # (batch, c*r*s, out_h*out_w)
    out = torch.matmul(w.reshape(k, c * r * s), cols)  # (batch, k, out_h*out_w)
    return out.reshape(batch, k, out_h, out_w)
