"""Types of the histogram leaderboard."""

from typing import TypedDict

import torch

input_t = torch.Tensor  # uint8 (size,)
output_t = torch.Tensor  # int32 (256,)


class TestSpec(TypedDict):
    size: int
    contention: int  # percent of elements forced to one value
    seed: int
