"""What crosses between judge and worker: pickles that name a leaderboard's own classes.

Inputs may hold objects of classes defined in the leaderboard's reference.py (a config
dataclass, a cache object). The judge imports reference.py under a private module table
(reference_loader.py), so plain pickling cannot find `reference.Config`. Sending, such a class
is written as a lookup by module and name, which the worker resolves in its own staged copy of
the same files. Receiving, the judge unpickles with an allow-list: the leaderboard's own
classes (from the judge's trusted copy), torch/NumPy classes and their rebuild functions, a few
builtin types. A reply that names anything else (a submission's module, `os.system`, ...) is
refused, so unpickling a reply never imports or runs participant code in the judge.

A CPU tensor's shared-memory file is registered, both ways, with the judge's registry
(shm_manager.registry_socket), never with torch's manager of either side: a request's handles
name the registry, and a reply's are mapped through it whatever manager they name (a worker's
own could be made to never answer, and the judge would wait on it forever).
"""

from __future__ import annotations

import importlib
import io
import pickle
import sys
from collections.abc import Mapping
from multiprocessing.reduction import ForkingPickler
from types import ModuleType
from typing import Any

from .shm_manager import registry_socket

# Builtin and standard-library types whose construction runs no code of consequence.
_SAFE_GLOBALS = {
    "builtins": {
        "bool",
        "bytearray",
        "bytes",
        "complex",
        "dict",
        "float",
        "frozenset",
        "int",
        "list",
        "object",
        "range",
        "set",
        "slice",
        "str",
        "tuple",
    },
    "collections": {"OrderedDict", "defaultdict", "deque", "Counter"},
    "copyreg": {"_reconstructor"},
    "types": {"SimpleNamespace"},
    "datetime": {"date", "datetime", "time", "timedelta", "timezone"},
    "fractions": {"Fraction"},
    "decimal": {"Decimal"},
    "enum": {"Enum", "IntEnum"},
    "_codecs": {"encode"},  # how older pickle protocols write bytes
    # CUDA tensors in the worker's window: judge code that checks each slot and copies it out.
    "pytest_kernelboard.channel.window": {"Slot", "from_window", "from_host"},
}
# Libraries whose classes, and whose functions that rebuild shared tensors/arrays, may appear.
_SAFE_ROOTS = ("torch", "numpy")
_REBUILD_PREFIXES = (
    "rebuild_",
    "_rebuild",
    "_reconstruct",
    "_load_from_bytes",
    "_frombuffer",
    "scalar",
)


class RefusedGlobal(pickle.UnpicklingError):
    """A reply names a global that the judge does not load."""


def lookup_class(module: str, qualname: str) -> type:
    """Worker side of a leaderboard class sent by the judge: from the worker's staged files."""
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


# torch's rebuild of a CPU storage from its shared-memory file and its manager's socket.
REBUILD_FROM_FILE = ("torch.multiprocessing.reductions", "rebuild_storage_filename")


def rebuild_storage_via_registry(cls: type, manager: bytes, handle: bytes, size: int, *dtype: Any):
    """A reply's shared-memory storage, mapped with the judge's registry whatever manager the
    worker named."""
    from torch.multiprocessing.reductions import rebuild_storage_filename

    return rebuild_storage_filename(cls, registry_socket().encode(), handle, size, *dtype)


def _reduce_cpu_storage(storage: Any) -> Any:
    """torch's reduction of a CPU storage into a shared-memory file, its handle naming the
    judge's registry for the worker to register with."""
    from torch.multiprocessing.reductions import rebuild_storage_filename, reduce_storage

    rebuild, args = reduce_storage(storage)
    if rebuild is rebuild_storage_filename:
        args = (args[0], registry_socket().encode(), *args[2:])
    return rebuild, args


class _JudgePickler(ForkingPickler):
    """ForkingPickler (torch's shared-memory tensors) that writes leaderboard classes by name."""

    def __init__(self, file: io.BytesIO, trusted: Mapping[str, ModuleType], cuda: Any = None):
        super().__init__(file)
        self._trusted = trusted
        self._cuda = cuda

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type) and obj.__module__ in self._trusted:
            return lookup_class, (obj.__module__, obj.__qualname__)
        if self._cuda is not None and getattr(obj, "is_cuda", False) is True:
            reduced = self._cuda.reduce(obj)
            if reduced is not None:
                return reduced
        if _is_cpu_storage(obj):
            return _reduce_cpu_storage(obj)
        return NotImplemented


def _is_cpu_storage(obj: Any) -> bool:
    """An untyped CPU storage: what every tensor's and typed storage's pickle comes down to."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.UntypedStorage) and obj.device.type == "cpu"


def dumps(obj: Any, trusted: Mapping[str, ModuleType], cuda: Any = None) -> bytes:
    """Pickle a request; `trusted` maps the leaderboard's module names to the judge's modules.
    `cuda`, where given, reduces CUDA tensors (channel/window.py's Packer)."""
    buffer = io.BytesIO()
    _JudgePickler(buffer, trusted, cuda).dump(obj)
    return buffer.getvalue()


class _JudgeUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, trusted: Mapping[str, ModuleType]):
        super().__init__(file)
        self._trusted = trusted

    def find_class(self, module: str, name: str) -> Any:
        refused = RefusedGlobal(
            f"the worker's reply refers to {module}.{name}, which the judge does not load "
            "(only tensors, arrays, builtin values and the leaderboard's own classes cross)"
        )
        if (module, name) == REBUILD_FROM_FILE:
            return rebuild_storage_via_registry
        if module in self._trusted:
            obj = _resolve(self._trusted[module], name)
            if isinstance(obj, type) and obj.__module__ == module:
                return obj
            raise refused
        if name in _SAFE_GLOBALS.get(module, ()):
            return super().find_class(module, name)
        if module.split(".")[0] in _SAFE_ROOTS:
            try:
                obj = super().find_class(module, name)
            except (ImportError, AttributeError):
                raise refused from None
            if _safe_library_object(obj):
                return obj
        raise refused


def _resolve(module: ModuleType, qualname: str) -> Any:
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _safe_library_object(obj: Any) -> bool:
    origin = str(getattr(obj, "__module__", "") or "").split(".")[0]
    if isinstance(obj, type):
        return origin in _SAFE_ROOTS
    if callable(obj) and origin in _SAFE_ROOTS:  # functions: only the rebuild helpers
        return getattr(obj, "__name__", "").startswith(_REBUILD_PREFIXES)
    # torch.float32, torch.strided, torch.channels_last: plain values pickled by name
    import torch

    return isinstance(obj, torch.dtype | torch.layout | torch.memory_format)


def loads(data: bytes, trusted: Mapping[str, ModuleType]) -> Any:
    """Unpickle a reply with the allow-list above."""
    return _JudgeUnpickler(io.BytesIO(data), trusted).load()
