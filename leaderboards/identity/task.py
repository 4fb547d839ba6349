"""Types of the identity leaderboard."""

from typing import TypedDict

import torch

# (input, output): output is pre-allocated, same shape and dtype as input.
input_t = tuple[torch.Tensor, torch.Tensor]
output_t = torch.Tensor


class TestSpec(TypedDict):
    size: int
    seed: int
