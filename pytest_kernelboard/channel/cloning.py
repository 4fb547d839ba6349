"""Private copies of inputs and outputs, tensor by tensor.

`copy.deepcopy` refuses tensors that are not graph leaves ("Only Tensors created explicitly by
the user (graph leaves) support the deepcopy protocol"), which references that build weights
with autograd history produce. Here every tensor is copied detached from its graph; containers,
dataclasses, `nn.Module`s and plain objects are rebuilt around the copies; anything else falls
back to deepcopy. Tensors that shared storage (views, tied weights) still share it in the copy.

`shared=True` puts the copies of CPU tensors in shared memory from the start (the file torch's
file_system strategy hands the worker), so sending them copies nothing more: a copy made in the
process's own memory would be copied once more into a shared file when pickled, and both would
be alive at once.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

_ATOMIC = (type(None), bool, int, float, complex, str, bytes, type, range)


def clone_data(data: Any, shared: bool = False) -> Any:
    """A copy of `data` that shares no tensor memory or autograd graph with it; with `shared`,
    its CPU tensors' storages lie in shared memory."""
    return _clone(data, {_SHARED: True} if shared else {})


_SHARED = "kernelboard.shared"  # a memo key: CPU storages are copied into shared memory


def _clone(obj: Any, memo: dict[Any, Any]) -> Any:
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


def _clone_tensor(tensor: Any, memo: dict[Any, Any], torch: Any) -> Any:
    # deepcopy through the shared memo keeps views of one storage sharing the copy's storage;
    # a non-leaf goes through its detached alias, which deepcopy accepts.
    source = tensor if tensor.is_leaf else tensor.detach()
    if memo.get(_SHARED) and tensor.device.type == "cpu" and type(tensor) is torch.Tensor:
        _share_storage(source, memo, torch)
    copied = copy.deepcopy(source, memo)
    memo[id(tensor)] = copied
    return copied


def _share_storage(tensor: Any, memo: dict[Any, Any], torch: Any) -> None:
    """Where deepcopy will find the copy of the tensor's storage (its memo, keyed by the
    storage, as torch's own __deepcopy__ keeps it): a new shared-memory storage with its bytes,
    made before deepcopy would clone it into ordinary memory."""
    if tensor.is_sparse or tensor.is_quantized:
        return
    storage = tensor.untyped_storage()
    if storage.nbytes() == 0:
        return
    copies = memo.setdefault("torch", {})
    if storage._cdata not in copies:
        shared = torch.UntypedStorage._new_shared(storage.nbytes())
        shared.copy_(storage)
        copies[storage._cdata] = shared


def release_lost_holds(data: Any) -> None:
    """After a worker died holding a request's `data` (killed mid-call, or before it read the
    request), give up the hold it had on each shared-memory storage in it.

    A file_system-shared storage counts its holders in the file itself, and the file is
    unlinked when the count reaches 0: pickling a storage adds one (the receiver's to take),
    unpickling turns it into the receiver's mapping, and a process that lets go takes one off.
    A process killed while it holds one takes nothing off, so without this the file (the whole
    input of a 16384 x 16384 call) stays in /dev/shm until the judge itself exits. One per
    storage: where the worker had let go already (it died after replying), the count only goes
    below 0 and the file stays as it would have; it is never unlinked while mapped."""
    torch = _torch()
    if torch is None:
        return
    for storage in _shared_storages(data, torch):
        storage._shared_decref()


def _shared_storages(data: Any, torch: Any) -> list[Any]:
    """The distinct shared CPU storages of the tensors in `data` (containers, dataclasses,
    plain objects, modules)."""
    found: dict[int, Any] = {}
    seen: set[int] = set()
    todo = [data]
    while todo:
        obj = todo.pop()
        if isinstance(obj, _ATOMIC) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            if obj.device.type == "cpu" and not (obj.is_sparse or obj.is_quantized):
                storage = obj.untyped_storage()
                if storage.nbytes() and storage.is_shared():
                    found.setdefault(storage._cdata, storage)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
        elif hasattr(obj, "__dict__"):
            todo.extend(vars(obj).values())
    return list(found.values())


def _clone_builtin(obj: Any, memo: dict[Any, Any]) -> Any:
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


def _clone_object(obj: Any, memo: dict[Any, Any]) -> Any:
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
