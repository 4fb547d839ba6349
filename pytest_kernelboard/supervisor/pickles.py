"""What crosses between judge and worker: pickles that name a leaderboard's own classes.

Inputs may hold objects of classes defined in the leaderboard's reference.py (a config
dataclass, a cache object). The judge imports reference.py under a private module table
(reference_loader.py), so plain pickling cannot find `reference.Config`. Sending, such a class
is written as a lookup by module and name, which the worker resolves in its own staged copy of
the same files. Receiving, the judge unpickles with an allow-list: the leaderboard's own
classes (from the judge's trusted copy), torch/NumPy classes and their rebuild functions, a few
builtin types. A reply that names anything else (a submission's module, `os.system`, ...) is
refused, so unpickling a reply never imports or runs participant code in the judge.
"""

from __future__ import annotations

import importlib
import io
import pickle
from collections.abc import Mapping
from multiprocessing.reduction import ForkingPickler
from types import ModuleType
from typing import Any

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
        return NotImplemented


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
