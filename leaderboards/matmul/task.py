"""Types of the matmul leaderboard."""

from typing import TypedDict

import torch

# (A, B): A is (m, k), B is (k, n), both float16 or both bfloat16.
input_t = tuple[torch.Tensor, torch.Tensor]
output_t = torch.Tensor  # (m, n), same dtype as the inputs


class TestSpec(TypedDict):
    m: int
    n: int
    k: int
    dtype: str  # "float16" or "bfloat16"
    seed: int
