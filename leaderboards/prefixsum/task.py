"""Types of the prefixsum leaderboard."""

from typing import TypedDict

import torch

input_t = torch.Tensor  # float32 (size,)
output_t = torch.Tensor  # float32 (size,), inclusive scan


class TestSpec(TypedDict):
    size: int
    seed: int
