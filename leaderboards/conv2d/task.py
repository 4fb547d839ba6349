"""Types of the conv2d leaderboard."""

from typing import TypedDict

import torch

# (x, w, padding): x is (batch, C, H, W), w is (K, C, R, R), padding is an int.
input_t = tuple[torch.Tensor, torch.Tensor, int]
output_t = torch.Tensor  # (batch, K, H + 2p - R + 1, W + 2p - R + 1), float32


class TestSpec(TypedDict):
    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel_size: int
    padding: int
    seed: int
