"""Types of the grayscale leaderboard."""

from typing import TypedDict

import torch

input_t = torch.Tensor  # float32 (H, W, 3), RGB interleaved
output_t = torch.Tensor  # float32 (H, W)


class TestSpec(TypedDict):
    height: int
    width: int
    seed: int
