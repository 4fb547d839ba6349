"""A digest of tensors' bytes on their device: has this output changed since it arrived?

Two sums per tensor over its bytes read as integers, one of them weighted by position (mod
2**64, wrapping), in chunks so that the temporaries stay small. It is not a cryptographic hash:
it catches a worker's leftover work writing into an output while the judge reads it, which does
not know the digest is taken, let alone when. A CPU tensor's bytes are hashed instead (SHA-1,
as two 64-bit integers): the sums' integer temporaries took 2 - 4 s for 512 MiB on two cores,
the hash 0.4 s, with no temporary at all.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..channel.leaves import tensor_leaves
from ..stats.floors import storage_span

CHUNK_BYTES = 1 << 26  # 64 MiB (16 Mi int32 words) per step: the temporaries are a few of these


def of(obj: Any) -> tuple[int, ...]:
    """The digest of every tensor in obj (tuples, lists, dicts), in order."""
    return tuple(value for _, tensor in tensor_leaves(obj) for value in _tensor(tensor))


def _tensor(tensor: Any) -> tuple[int, int]:
    import torch

    raw = _bytes_spanned(tensor)
    if raw.device.type == "cpu":
        hashed = hashlib.sha1(raw.numpy()).digest()
        return int.from_bytes(hashed[:8], "little"), int.from_bytes(hashed[8:16], "little")
    plain = torch.zeros((), dtype=torch.int64, device=raw.device)
    weighted = torch.zeros((), dtype=torch.int64, device=raw.device)
    ramp = None
    for start in range(0, raw.numel(), CHUNK_BYTES):
        piece = raw[start : start + CHUNK_BYTES]
        # Read as int32 words where the bytes allow (every chunk but an odd-sized last one).
        words = piece.view(torch.int32) if piece.numel() % 4 == 0 else piece.to(torch.int32)
        chunk = words.to(torch.int64)
        if ramp is None or ramp.numel() != chunk.numel():
            ramp = torch.arange(1, chunk.numel() + 1, dtype=torch.int64, device=raw.device)
        plain += chunk.sum()
        weighted += (chunk * (ramp + start)).sum()
    return int(plain), int(weighted)


def _bytes_spanned(tensor: Any) -> Any:
    """The bytes of the tensor's storage from its first element to its last, as a uint8 view:
    no copy, whatever its strides (a transposed output, as attention returns, would otherwise
    be copied whole into the judge's memory to be read; seen on the H100: 2 GiB)."""
    import torch

    whole = torch.empty(0, dtype=torch.uint8, device=tensor.device)
    if tensor.numel() == 0:
        return whole
    whole.set_(tensor.untyped_storage())
    start, end = storage_span(tensor)
    return whole[start:end]
