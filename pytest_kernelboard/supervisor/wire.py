"""Reading the worker's replies as untrusted input: framing with a size cap and a deadline, and
an unpickler that builds only data (tensors, arrays, containers). Each reply's keys and types
are checked against the written protocol (protocol.py).

A pickle can name any importable callable; a worker that writes its own bytes to the socket
could otherwise run code in the judge. Only the globals a tensor, a NumPy array or a plain
container needs are allowed.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import time
from typing import Any

from ..channel.protocol import ProtocolError
from .pickles import REBUILD_FROM_FILE, rebuild_storage_via_registry

__all__ = ["MAX_REPLY_BYTES", "FrameTimeout", "ProtocolError", "loads", "read_frame"]

MAX_REPLY_BYTES = 512 << 20  # tensors travel as shared-memory handles: a reply itself is small

_TORCH_REBUILD = {
    "rebuild_tensor",
    "rebuild_cuda_tensor",
    "rebuild_typed_storage",
    "rebuild_typed_storage_child",
    "rebuild_storage_filename",
    "rebuild_storage_empty",
    "rebuild_nested_tensor",
}
_ALLOWED: dict[str, set[str]] = {
    "torch.multiprocessing.reductions": _TORCH_REBUILD,
    "torch": {"Size", "Tensor", "device", "UntypedStorage", "TypedStorage"},
    "torch.storage": {"UntypedStorage", "TypedStorage"},
    "torch.nn.parameter": {"Parameter"},
    "torch._utils": {"_rebuild_tensor_v2", "_rebuild_parameter"},
    "torch._tensor": {"_rebuild_from_type_v2"},
    "numpy": {"ndarray", "dtype"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "builtins": {"complex", "slice", "set", "frozenset", "bytearray", "range"},
    "collections": {"OrderedDict"},
}


class _DataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == REBUILD_FROM_FILE:
            return rebuild_storage_via_registry  # never through the worker's own manager
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and name.endswith("Storage") or _is_dtype(module, name):
            return super().find_class(module, name)
        if module == "numpy.dtypes" and name.endswith("DType"):
            return super().find_class(module, name)
        raise ProtocolError(f"the reply names {module}.{name}, which is not data")


def _is_dtype(module: str, name: str) -> bool:
    if module != "torch":
        return False
    import torch

    return isinstance(getattr(torch, name, None), torch.dtype)


def loads(data: bytes) -> Any:
    try:
        return _DataUnpickler(io.BytesIO(data)).load()
    except ProtocolError:
        raise
    except Exception as exc:  # any malformed pickle
        raise ProtocolError(f"the reply cannot be read: {type(exc).__name__}: {exc}") from None


class FrameTimeout(Exception):
    """The deadline passed while a reply was still arriving."""


def read_frame(fd: int, deadline: float, max_bytes: int = MAX_REPLY_BYTES) -> bytes:
    """One multiprocessing.connection frame from fd, by the deadline (time.perf_counter).

    Connection.recv_bytes would block until the whole announced frame arrived: a worker that
    announces a reply and stops sending would hang the judge. Raises EOFError when the peer
    closed, FrameTimeout past the deadline, ProtocolError for a frame over max_bytes.
    """
    header = _read_exactly(fd, 4, deadline)
    (size,) = struct.unpack("!i", header)
    if size == -1:
        (size,) = struct.unpack("!Q", _read_exactly(fd, 8, deadline))
    if size < 0 or size > max_bytes:
        raise ProtocolError(f"a reply of {size} bytes (the limit is {max_bytes >> 20} MiB)")
    return _read_exactly(fd, size, deadline)


def _read_exactly(fd: int, size: int, deadline: float) -> bytes:
    chunks, missing = [], size
    while missing:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise FrameTimeout()
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)
