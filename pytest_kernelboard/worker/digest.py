"""A digest of tensors' bytes on their device: has this output changed since it arrived?

Two sums per tensor over its bytes read as integers, one of them weighted by position (mod
2**64, wrapping), in chunks so that the temporaries stay small. It is not a cryptographic hash:
it catches a worker's leftover work writing into an output while the judge reads it, which does
not know the digest is taken, let alone when.
"""

from __future__ import annotations

from typing import Any

from .leaves import tensor_leaves

CHUNK_ELEMENTS = 1 << 24  # 16 Mi int32s (64 MiB) per step: the temporaries are a few of these


def of(obj: Any) -> tuple[int, ...]:
    """The digest of every tensor in obj (tuples, lists, dicts), in order."""
    return tuple(value for _, tensor in tensor_leaves(obj) for value in _tensor(tensor))


def _tensor(tensor: Any) -> tuple[int, int]:
    import torch

    flat = tensor.detach().reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    raw = flat.view(torch.uint8)
    if raw.numel() % 4 == 0:
        words = raw.view(torch.int32)
    else:
        words = raw.to(torch.int32)
    plain = torch.zeros((), dtype=torch.int64, device=words.device)
    weighted = torch.zeros((), dtype=torch.int64, device=words.device)
    ramp = None
    for start in range(0, words.numel(), CHUNK_ELEMENTS):
        chunk = words[start : start + CHUNK_ELEMENTS].to(torch.int64)
        if ramp is None or ramp.numel() != chunk.numel():
            ramp = torch.arange(1, chunk.numel() + 1, dtype=torch.int64, device=words.device)
        plain += chunk.sum()
        weighted += (chunk * (ramp + start)).sum()
    return int(plain), int(weighted)
