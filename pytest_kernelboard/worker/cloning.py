"""Private copies of inputs and outputs, tensor by tensor.

`copy.deepcopy` refuses tensors that are not graph leaves ("Only Tensors created explicitly by
the user (graph leaves) support the deepcopy protocol"), which references that build weights
with autograd history produce. Here every tensor is copied detached from its graph; containers,
dataclasses, `nn.Module`s and plain objects are rebuilt around the copies; anything else falls
back to deepcopy. Tensors that shared storage (views, tied weights) still share it in the copy.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

_ATOMIC = (type(None), bool, int, float, complex, str, bytes, type, range)


def clone_data(data: Any) -> Any:
    """A copy of `data` that shares no tensor memory or autograd graph with it."""
    return _clone(data, {})


def _clone(obj: Any, memo: dict[int, Any]) -> Any:
    if isinstance(obj, _ATOMIC):
        return obj
    key = id(obj)
    if key in memo:
        return memo[key]
    torch = _torch()
    if torch is not None and isinstance(obj, torch.Tensor):
        return _clone_tensor(obj, memo, torch)
    if torch is not None and isinstance(obj, torch.nn.Module):
        return _clone_object(obj, memo)
    if type(obj) in (list, tuple, dict, set, frozenset):
        return _clone_builtin(obj, memo)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        copied = type(obj)(*(_clone(x, memo) for x in obj))
    elif isinstance(obj, dict):  # OrderedDict, defaultdict, ...: keep the subclass's extras
        copied = copy.copy(obj)
        copied.clear()
        copied.update((_clone(k, memo), _clone(v, memo)) for k, v in obj.items())
    elif isinstance(obj, list):
        copied = copy.copy(obj)
        copied[:] = [_clone(x, memo) for x in obj]
    elif dataclasses.is_dataclass(obj) or _plain_object(obj):
        return _clone_object(obj, memo)
    else:
        return copy.deepcopy(obj, memo)
    memo[key] = copied
    return copied


def _clone_tensor(tensor: Any, memo: dict[int, Any], torch: Any) -> Any:
    # deepcopy through the shared memo keeps views of one storage sharing the copy's storage;
    # a non-leaf goes through its detached alias, which deepcopy accepts.
    source = tensor if tensor.is_leaf else tensor.detach()
    copied = copy.deepcopy(source, memo)
    memo[id(tensor)] = copied
    return copied


def _clone_builtin(obj: Any, memo: dict[int, Any]) -> Any:
    if isinstance(obj, list):
        copied: Any = []
        memo[id(obj)] = copied  # registered first: a list may contain itself
        copied.extend(_clone(x, memo) for x in obj)
        return copied
    if isinstance(obj, dict):
        copied = {}
        memo[id(obj)] = copied
        copied.update((_clone(k, memo), _clone(v, memo)) for k, v in obj.items())
        return copied
    copied = type(obj)(_clone(x, memo) for x in obj)
    memo[id(obj)] = copied
    return copied


def _plain_object(obj: Any) -> bool:
    """An instance whose state is its attributes (no custom copy or pickle protocol)."""
    cls = type(obj)
    return (
        hasattr(obj, "__dict__")
        and not hasattr(cls, "__deepcopy__")
        and cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
        and getattr(cls, "__getstate__", object.__getstate__) is object.__getstate__
    )


def _clone_object(obj: Any, memo: dict[int, Any]) -> Any:
    """A new instance of the same class with every attribute cloned (frozen dataclasses too)."""
    cls = type(obj)
    copied = cls.__new__(cls)
    memo[id(obj)] = copied
    for name, value in vars(obj).items() if hasattr(obj, "__dict__") else ():
        object.__setattr__(copied, name, _clone(value, memo))
    for name in _slot_names(cls):
        if hasattr(obj, name):
            object.__setattr__(copied, name, _clone(getattr(obj, name), memo))
    return copied


def _slot_names(cls: type) -> list[str]:
    names = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                names.append(name)
    return names


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # the clone still works for inputs without tensors
        return None
    return torch
