"""Types of the softmax leaderboard."""

from typing import TypedDict

import torch

input_t = torch.Tensor  # (rows, cols), float32 or bfloat16
output_t = torch.Tensor  # same shape and dtype, softmax over the last dim


class TestSpec(TypedDict):
    rows: int
    cols: int
    dtype: str  # "float32" or "bfloat16"
    scale: int
    seed: int
