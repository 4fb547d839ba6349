"""Which inputs a call wrote: the submission's, compared with what the reference writes.

A kernel that writes its result into an input it was not asked to write (`a.add_(b); return
a`) passes a check made against pristine inputs, yet it is no drop-in replacement for a pure
function. "Asked to write" is what the leaderboard's own ref_kernel writes on the same input
(GPU MODE problems hand out an output buffer in `data` that both fill). Tensors are compared
byte for byte, so an unwritten NaN stays equal to itself.
"""

from __future__ import annotations

from typing import Any

from ..channel.leaves import tensor_leaves


def _same_bytes(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.detach().reshape(-1).contiguous(), b.detach().reshape(-1).contiguous()
    return torch.equal(a.view(torch.uint8), b.view(torch.uint8).to(a.device))


def written_leaves(before: Any, after: Any) -> list[str]:
    """Paths of the tensors of `before` whose bytes differ in `after` (same structure)."""
    after_leaves = dict(tensor_leaves(after))
    return [
        path
        for path, tensor in tensor_leaves(before)
        if path in after_leaves and not _same_bytes(tensor, after_leaves[path])
    ]
