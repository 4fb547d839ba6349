"""The tensors inside a case's data or a call's output, in order, each with its path.

One walk for every side that looks at tensors one by one: the worker's reply packing, the
digest of an output read in place, the judge's mutation check and its diagnosis of a mismatch.
Tuples, lists and dicts are walked (what inputs and outputs are made of); other objects are
leaves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def tensor_leaves(data: Any, path: str = "data") -> Iterator[tuple[str, Any]]:
    """(path, tensor) for every tensor in tuples, lists and dicts of `data`, in order."""
    import torch

    if isinstance(data, torch.Tensor):
        yield path, data
    elif isinstance(data, (list, tuple)):
        for index, item in enumerate(data):
            yield from tensor_leaves(item, f"{path}[{index}]")
    elif isinstance(data, dict):
        for key, item in data.items():
            yield from tensor_leaves(item, f"{path}[{key!r}]")
