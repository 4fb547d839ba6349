"""CUDA tensors between judge and worker through two shared device windows.

The judge owns two VMM allocations (cuda_vmm.py) per worker and hands each to the worker once,
as a file descriptor over their socket: the inbound window carries a request's CUDA tensors to
the worker, the outbound window carries a reply's back. Pickling a message puts each CUDA
tensor's storage at an offset of the window and writes a `Slot` (offset, dtype, shape, strides)
in its place; unpickling rebuilds the tensor from the window at that offset. The copies are
device-to-device and the mappings persist, so nothing is mapped, opened or staged through the
host per request, and it works across the sandbox's PID namespace, where CUDA IPC does not.

The judge unpickles replies with an allow-list (supervisor/pickles.py): `from_window` and `from_host`
are judge code that checks every slot against its window and copies the tensor out into the
judge's own memory at once, so a worker that rewrites its window later changes nothing.
"""

from __future__ import annotations

import io
import math
import os
import socket
import threading
from contextlib import contextmanager
from multiprocessing.reduction import ForkingPickler
from typing import Any, NamedTuple

from . import cuda_vmm, fences
from .leaves import tensor_leaves

ALIGN = 512  # every storage starts on this boundary: any dtype, any vector width
HEADROOM = 1.25  # a grown window leaves room for the next, slightly larger case
HEADROOM_MAX_BYTES = 64 << 20
# Windows above this are let go at their case's end (judge/core.py) and made again for the next
# case: they get no headroom, which no call of their own case would use.
KEPT_WINDOW_MAX = 256 << 20


class Slot(NamedTuple):
    """Where one tensor lies in a window: its storage's bytes at `offset`, then a view."""

    offset: int
    nbytes: int
    dtype: str
    size: tuple
    stride: tuple
    storage_offset: int
    requires_grad: bool = False
    parameter: bool = False
    # Which window: "in" (the judge's requests), "out" (replies). A reply whose outputs are
    # large lands in the inbound window, over the inputs its call has consumed (frugal replies).
    window: str = "out"


class WindowError(Exception):
    """A slot that does not describe memory inside its window."""


class Window:
    """One VMM allocation mapped in this process, with a uint8 tensor over all of it."""

    def __init__(self, handle: int | None, address: int, size: int, device: int):
        import torch

        self.handle, self.address, self.size, self.device = handle, address, size, device
        self.bytes = torch.as_tensor(_DeviceBytes(address, size), device=f"cuda:{device}")

    @classmethod
    def create(cls, size: int, device: int) -> Window:
        """A new allocation of at least `size` bytes, owned (and later released) by us."""
        grain = cuda_vmm.granularity(device)
        size = max(grain, -(-size // grain) * grain)
        try:
            handle = cuda_vmm.create(size, device)
        except cuda_vmm.CudaDriverError as exc:
            if "OUT_OF_MEMORY" not in str(exc):
                raise
            # torch keeps freed blocks cached, where a VMM allocation cannot use them: return
            # them to the driver, then try once more.
            import torch

            torch.cuda.empty_cache()
            handle = cuda_vmm.create(size, device)
        try:
            address = cuda_vmm.map_readwrite(handle, size, device)
        except cuda_vmm.CudaDriverError:
            cuda_vmm.release(handle)
            raise
        return cls(handle, address, size, device)

    @classmethod
    def attach(cls, fd: int, size: int, device: int) -> Window:
        """The peer's allocation behind `fd` (closed here), mapped in this process."""
        try:
            handle = cuda_vmm.import_fd(fd)
        finally:
            cuda_vmm.close_quietly(fd)
        try:
            address = cuda_vmm.map_readwrite(handle, size, device, peers=peer_devices(device))
        finally:
            cuda_vmm.release(handle)  # the mapping keeps the memory alive
        return cls(None, address, size, device)

    def export_fd(self) -> int:
        return cuda_vmm.export_fd(self.handle)

    def close(self) -> None:
        fences.synchronize(self.device)  # no kernel may still read or write it
        self.bytes = None
        cuda_vmm.unmap(self.address, self.size)
        if self.handle is not None:
            cuda_vmm.release(self.handle)
            self.handle = None


def peer_devices(device: int) -> list[int]:
    """The other GPUs that can reach `device`'s memory directly. A worker's window is mapped
    for them too: a rank of a multi-GPU case copies between GPUs (torch runs a copy on the
    source GPU), and VMM memory is reachable only from the GPUs its mapping names."""
    import torch

    return [
        other
        for other in range(torch.cuda.device_count())
        if other != device and torch.cuda.can_device_access_peer(other, device)
    ]


class _DeviceBytes:
    """A raw device range as a CUDA array: torch.as_tensor wraps it without a copy."""

    def __init__(self, address: int, size: int):
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (address, False),
            "version": 3,
        }


class Packer:
    """Assigns window offsets to the CUDA storages a message holds, while it is pickled; the
    copies happen after, once a window large enough exists. Tensors sharing a storage share
    its bytes in the window, so views and aliases arrive as views and aliases.

    With `in_place` (a frugal reply into the inbound window), a storage that already lies in
    that window (an output written into an input) is described where it is, not copied; the
    others are placed from `start`, past those."""

    def __init__(
        self, device: int, name: str = "out", in_place: Window | None = None, start: int = 0
    ):
        self.device = device
        self.name = name
        self.in_place = in_place
        self.nbytes = start
        # storage address -> (offset, storage); the storage is let go once it is copied
        self._placed: dict[int, tuple[int, Any]] = {}
        self._in_place: set[int] = set()  # storage addresses described where they lie

    def reduce(self, tensor: Any) -> tuple | None:
        """The pickle reduction of a CUDA tensor on our device, or None to pickle it as usual."""
        import torch

        plain = type(tensor) in (torch.Tensor, torch.nn.Parameter)
        if not plain or tensor.device.index != self.device or tensor.layout != torch.strided:
            return None  # other devices, subclasses, sparse: pickled as before
        storage = tensor.untyped_storage()
        offset = self._offset(storage)
        slot = Slot(
            offset,
            storage.nbytes(),
            str(tensor.dtype).removeprefix("torch."),
            tuple(tensor.shape),
            tuple(tensor.stride()),
            tensor.storage_offset(),
            bool(tensor.requires_grad),
            isinstance(tensor, torch.nn.Parameter),
            self.name,
        )
        return from_window, (slot,)

    def offset_of(self, tensor: Any) -> int | None:
        """Where a tensor's storage was placed, or None if it was not."""
        placed = self._placed.get(tensor.untyped_storage().data_ptr())
        return None if placed is None else placed[0]

    def _offset(self, storage: Any) -> int:
        key = storage.data_ptr()
        inside = _offset_inside(self.in_place, storage)
        if inside is not None:
            self._placed[key] = (inside, storage)
            self._in_place.add(key)
            return inside
        if key not in self._placed or storage.nbytes() == 0:
            self._placed[key] = (self.nbytes, storage)
            self.nbytes += -(-storage.nbytes() // ALIGN) * ALIGN
        return self._placed[key][0]

    def copy_into_checked(self, window: Window) -> bool:
        """copy_into, unless a copy would overwrite a storage described in place (then False:
        the caller sends the reply another way)."""
        placed = [(o, o + st.nbytes(), k in self._in_place) for k, (o, st) in self._placed.items()]
        kept = [(a, b) for a, b, in_place in placed if in_place]
        for a, b, in_place in placed:
            if not in_place and any(a < kb and ka < b for ka, kb in kept):
                return False
        self.copy_into(window)
        return True

    def copy_into(self, window: Window) -> None:
        """Copy every placed storage into `window` and wait until the copies are done."""
        import torch

        for key, (offset, storage) in self._placed.items():
            if storage is not None and storage.nbytes() and key not in self._in_place:
                source = torch.empty(0, dtype=torch.uint8, device=window.bytes.device)
                source.set_(storage)
                window.bytes[offset : offset + storage.nbytes()].copy_(source)
        if self._placed and window.bytes.is_cuda:
            fences.synchronize(window.device)
        # Copied: keep where each storage went, not the storage. The judge keeps its last
        # request's packer (to read its inputs back after the call), and a storage held here
        # would keep that call's input alive while the next one is made: two inputs at once, 6
        # to 8 GiB more at KernelBench's sizes (seen on the H100).
        self._placed = {key: (offset, None) for key, (offset, _) in self._placed.items()}


def views_in(window: Window, packer: Packer, data: Any) -> Any:
    """`data` with each CUDA tensor the packer placed replaced by its view in `window`: what
    the peer sees (and may have written) there."""
    import torch

    def view(tensor: Any) -> Any:
        placed = packer.offset_of(tensor)
        if placed is None:
            return tensor
        base = region(window, placed, tensor.untyped_storage().nbytes()).view(tensor.dtype)
        return base.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())

    def walk(obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return view(obj)
        if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
            return type(obj)(walk(v) for v in obj)
        if isinstance(obj, dict):
            return {k: walk(v) for k, v in obj.items()}
        return obj

    return walk(data)


# -- receiving ----------------------------------------------------------------------------------
class _Receiving(threading.local):
    """What the slots being unpickled in this thread refer to: a batch's judge reads several
    workers' replies at once, from threads of its own, each through its own windows."""

    windows: dict[str, Window] = {}  # the windows the slots refer to, by name  # noqa: RUF012
    copy_out = False  # the judge copies each tensor out of the window; a worker reads in place
    received = 0  # tensors rebuilt since the last receiving() began
    host_bytes = 0  # bytes that came as host copies since then: the window was too small


_state = _Receiving()


def _by_name(windows: Window | dict[str, Window] | None) -> dict[str, Window]:
    if isinstance(windows, dict):
        return {name: w for name, w in windows.items() if w is not None}
    return {} if windows is None else {"in": windows, "out": windows}  # one for every slot


def set_receiving(windows: Window | dict[str, Window] | None, copy_out: bool = False) -> None:
    """The window(s) later unpickled slots refer to (the worker: its inbound window)."""
    _state.windows, _state.copy_out = _by_name(windows), copy_out


@contextmanager
def receiving(windows: Window | dict[str, Window] | None, copy_out: bool):
    """Within the block, slots refer to `windows`; on leaving, the copies out are complete."""
    previous = (dict(_state.windows), _state.copy_out)
    set_receiving(windows, copy_out)
    _state.received = _state.host_bytes = 0
    try:
        yield
    finally:
        if _state.received and copy_out and _state.windows:
            for device in {w.device for w in _state.windows.values() if w.bytes.is_cuda}:
                fences.synchronize(device)
        _state.windows, _state.copy_out = previous


def from_window(slot: Slot) -> Any:
    """The tensor a slot describes (unpickling). In the judge, slot comes from an untrusted
    worker: every field is checked against the window before any memory is touched."""
    import torch

    named = getattr(slot, "window", "out")
    window = _state.windows.get(named) if isinstance(slot, Slot) else None
    if window is None:
        if not _state.windows:
            raise WindowError("a tensor arrived through a window that was never shared")
        raise WindowError(f"a window slot names no window this side shares: {slot}")
    dtype = _checked(slot, window)
    base = region(window, slot.offset, slot.nbytes).view(dtype)
    tensor = base.as_strided(slot.size, slot.stride, slot.storage_offset)
    if _state.copy_out:
        tensor = tensor.clone()
    _state.received += 1
    if slot.requires_grad and (dtype.is_floating_point or dtype.is_complex):
        tensor.requires_grad_(True)
    return torch.nn.Parameter(tensor, slot.requires_grad) if slot.parameter else tensor


def region(window: Window, offset: int, nbytes: int) -> Any:
    """A byte tensor whose storage is exactly `nbytes` of `window` from `offset`, as if
    allocated on its own. A view of the whole window would carry the whole window as its
    storage: an output written into an input would then be sent back as the whole inbound
    window, too large for the outbound one, and cross as host copies on every call (seen on the
    H100: vectoradd's 8192² case at 226 ms a call)."""
    import torch

    if nbytes == 0:
        return window.bytes[offset:offset]
    if not window.bytes.is_cuda:  # a host stand-in (tests): a numpy slice keeps its own extent
        return torch.from_numpy(window.bytes.numpy()[offset : offset + nbytes])
    return torch.as_tensor(
        _DeviceBytes(window.address + offset, nbytes), device=window.bytes.device
    )


def from_host(tensor: Any, device: int) -> Any:
    """A reply's CUDA tensor that did not fit the outbound window, sent as a host copy. The
    judge puts it on its window's device, whatever device the worker names."""
    import torch

    if not isinstance(tensor, torch.Tensor) or tensor.is_cuda:
        raise WindowError("a host-copied tensor is not a host tensor")
    if _state.windows:
        device = next(iter(_state.windows.values())).device
    _state.received += 1
    _state.host_bytes += -(-tensor.untyped_storage().nbytes() // ALIGN) * ALIGN
    return tensor.to(f"cuda:{int(device)}")


def host_bytes_received() -> int:
    """Bytes of the last receiving() block that came as host copies (0: the window sufficed)."""
    return _state.host_bytes


def _checked(slot: Any, window: Window) -> Any:
    import torch

    if not isinstance(slot, Slot):
        raise WindowError("a window slot is malformed")
    ints = (slot.offset, slot.nbytes, slot.storage_offset, *slot.size, *slot.stride)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in ints):
        raise WindowError(f"a window slot holds a negative or non-integer field: {slot}")
    dtype = getattr(torch, str(slot.dtype), None)
    if not isinstance(dtype, torch.dtype) or len(slot.size) != len(slot.stride):
        raise WindowError(f"a window slot names no tensor: {slot}")
    if slot.offset % ALIGN or slot.offset + slot.nbytes > window.size:
        raise WindowError(f"a window slot lies outside its {window.size}-byte window: {slot}")
    if slot.nbytes % dtype.itemsize:
        raise WindowError(f"a window slot's bytes do not hold whole {dtype} values: {slot}")
    if all(slot.size):
        last = slot.storage_offset + sum(
            (n - 1) * s for n, s in zip(slot.size, slot.stride, strict=True)
        )
        if (last + 1) * dtype.itemsize > slot.nbytes:
            raise WindowError(f"a window slot's view runs past its storage: {slot}")
    return dtype


# -- the worker's replies -------------------------------------------------------------------
class _ReplyPickler(ForkingPickler):
    """The worker's pickler: CUDA tensors into the outbound window, or as host copies."""

    def __init__(self, file: io.BytesIO, packer: Packer | None, host_device: int | None):
        super().__init__(file)
        self._packer, self._host_device = packer, host_device

    def reducer_override(self, obj: Any) -> Any:
        if getattr(obj, "is_cuda", False) and _is_tensor(obj):
            if self._packer is not None:
                reduced = self._packer.reduce(obj)
                if reduced is not None:
                    return reduced
            if self._host_device is not None:
                return from_host, (obj.detach().cpu(), self._host_device)
        return NotImplemented


def dumps_reply(reply: Any, outbound: Window | None, inbound: Window | None = None) -> bytes:
    """A reply's bytes with its CUDA tensors in `outbound` (copied, and synchronised, before
    the bytes are returned); where they do not fit, as host copies the judge moves back.

    With `inbound` (a frugal reply: the judge asked for no second copy of a large output), the
    tensors go into the inbound window instead, over the inputs the call has consumed: outputs
    that already lie there (written into an input) stay where they are."""
    for target, name in ((inbound, "in"), (outbound, "out")):
        if target is None:
            continue
        start = _end_of_storages_inside(target, reply) if name == "in" else 0
        packer = Packer(target.device, name, in_place=target if name == "in" else None, start=start)
        buffer = io.BytesIO()
        _ReplyPickler(buffer, packer, None).dump(reply)
        if packer.nbytes <= target.size and packer.copy_into_checked(target):
            return buffer.getvalue()
    if outbound is None and inbound is None:
        return bytes(ForkingPickler.dumps(reply))
    device = (outbound or inbound).device
    buffer = io.BytesIO()
    _ReplyPickler(buffer, None, device).dump(reply)
    return buffer.getvalue()


def _offset_inside(window: Window | None, storage: Any) -> int | None:
    """Where a storage lies in `window`, if it lies wholly inside it."""
    if window is None or storage.nbytes() == 0:
        return None
    offset = storage.data_ptr() - window.address
    if 0 <= offset and offset + storage.nbytes() <= window.size and offset % ALIGN == 0:
        return offset
    return None


def _end_of_storages_inside(window: Window, obj: Any) -> int:
    """Past the last byte of the reply's tensors that already lie in `window` (aligned)."""
    end = 0
    for _, tensor in tensor_leaves(obj):
        if tensor.is_cuda:
            storage = tensor.untyped_storage()
            inside = _offset_inside(window, storage)
            if inside is not None:
                end = max(end, -(-(inside + storage.nbytes()) // ALIGN) * ALIGN)
    return end


def _is_tensor(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.Tensor)


def grown_size(needed: int, current: int) -> int:
    """The size to grow a window to so that `needed` bytes fit, with headroom (a share of it,
    at most HEADROOM_MAX_BYTES) where the window outlives its case; none above KEPT_WINDOW_MAX,
    where it would be memory beside a large case's inputs that nothing uses."""
    headroom = min(math.ceil(needed * (HEADROOM - 1)), HEADROOM_MAX_BYTES)
    if needed + headroom > KEPT_WINDOW_MAX:
        headroom = 0
    return max(current, needed + headroom)


# -- handing a window over ------------------------------------------------------------------
def send_fd(sock_fd: int, fd: int) -> None:
    """Pass `fd` over the Unix socket `sock_fd` (one byte of data carries it)."""
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        socket.send_fds(sock, [b"w"], [fd])


def receive_fd(sock_fd: int) -> int:
    """The descriptor the peer passed with send_fd; extra descriptors are closed by the kernel."""
    with socket.socket(fileno=os.dup(sock_fd)) as sock:
        _, fds, _, _ = socket.recv_fds(sock, 1, 1)
    if not fds:
        raise WindowError("a window was announced but no descriptor came with it")
    return fds[0]
