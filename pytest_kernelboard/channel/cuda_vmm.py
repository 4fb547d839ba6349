"""Device memory that can cross a namespace boundary: CUDA virtual memory management (VMM).

Legacy CUDA IPC handles (what torch shares CUDA tensors with) name memory by process and do not
open across PID namespaces, so a sandboxed worker cannot map them. A VMM allocation created for
POSIX file-descriptor export is different: its handle is an ordinary file descriptor, which
crosses a Unix socket (SCM_RIGHTS) like any other, whatever namespaces the two ends live in.

This module is the driver API through ctypes (the driver library is on every machine that
has a GPU; no extra package): create an allocation, export or import its descriptor, map it at
an address of this process, unmap and release it.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Sequence

_ALLOCATION_PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED: device memory, not migratable
_HANDLE_POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_LOCATION_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
_ACCESS_READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
_ATTRIBUTE_VMM = 102  # CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
_ATTRIBUTE_POSIX_FD = 103  # CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
_GRANULARITY_RECOMMENDED = 1


class CudaDriverError(RuntimeError):
    """A driver call failed; the message names the call and the driver's error."""


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


@functools.cache
def _driver() -> ctypes.CDLL:
    driver = ctypes.CDLL("libcuda.so.1")
    _check(driver, "cuInit", driver.cuInit(0))
    return driver


def _check(driver: ctypes.CDLL, call: str, result: int) -> None:
    if result != 0:
        name = ctypes.c_char_p()
        driver.cuGetErrorName(result, ctypes.byref(name))
        raise CudaDriverError(f"{call} failed: {(name.value or b'?').decode()} ({result})")


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = _ALLOCATION_PINNED
    prop.requestedHandleTypes = _HANDLE_POSIX_FD
    prop.location = _Location(_LOCATION_DEVICE, device)
    return prop


def supported(device: int) -> bool:
    """Whether `device` can export VMM memory as file descriptors (False where no driver)."""
    try:
        driver = _driver()
        handle, vmm, fd_export = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        _check(driver, "cuDeviceGet", driver.cuDeviceGet(ctypes.byref(handle), device))
        for attribute, value in ((_ATTRIBUTE_VMM, vmm), (_ATTRIBUTE_POSIX_FD, fd_export)):
            result = driver.cuDeviceGetAttribute(ctypes.byref(value), attribute, handle)
            _check(driver, "cuDeviceGetAttribute", result)
    except (OSError, CudaDriverError):
        return False
    return bool(vmm.value and fd_export.value)


def granularity(device: int) -> int:
    """The size every allocation on `device` is rounded up to (2 MiB on current GPUs)."""
    driver = _driver()
    size = ctypes.c_size_t()
    prop = _prop(device)
    result = driver.cuMemGetAllocationGranularity(
        ctypes.byref(size), ctypes.byref(prop), _GRANULARITY_RECOMMENDED
    )
    _check(driver, "cuMemGetAllocationGranularity", result)
    return size.value


def create(size: int, device: int) -> int:
    """A new allocation of `size` bytes (a multiple of granularity()) on `device`: its handle."""
    driver = _driver()
    handle = ctypes.c_ulonglong()
    prop = _prop(device)
    result = driver.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), 0)
    _check(driver, "cuMemCreate", result)
    return handle.value


def export_fd(handle: int) -> int:
    """A new file descriptor for the allocation; the caller closes it once it is sent."""
    driver = _driver()
    fd = ctypes.c_int(-1)
    result = driver.cuMemExportToShareableHandle(
        ctypes.byref(fd), ctypes.c_ulonglong(handle), _HANDLE_POSIX_FD, ctypes.c_ulonglong(0)
    )
    _check(driver, "cuMemExportToShareableHandle", result)
    return fd.value


def import_fd(fd: int) -> int:
    """The allocation behind a received descriptor: its handle in this process."""
    driver = _driver()
    handle = ctypes.c_ulonglong()
    result = driver.cuMemImportFromShareableHandle(
        ctypes.byref(handle), ctypes.c_void_p(fd), _HANDLE_POSIX_FD
    )
    _check(driver, "cuMemImportFromShareableHandle", result)
    return handle.value


def release(handle: int) -> None:
    """Drop this handle; the memory lives on while a mapping or descriptor still holds it."""
    driver = _driver()
    _check(driver, "cuMemRelease", driver.cuMemRelease(ctypes.c_ulonglong(handle)))


def reserve(size: int, alignment: int = 0) -> int:
    """A fresh range of `size` bytes of this process's device address space, starting at a
    multiple of `alignment` (0: the driver's choice); returns its address."""
    driver = _driver()
    address = ctypes.c_ulonglong()
    result = driver.cuMemAddressReserve(
        ctypes.byref(address),
        ctypes.c_size_t(size),
        ctypes.c_size_t(alignment),
        ctypes.c_ulonglong(0),
        0,
    )
    _check(driver, "cuMemAddressReserve", result)
    return address.value


def map_at(address: int, handle: int, size: int, device: int, peers: Sequence[int] = ()) -> None:
    """Map the whole allocation at `address` (inside a reserved range), readable and writable
    from `device` and from each of `peers` (GPUs that can reach it over NVLink or PCIe)."""
    driver = _driver()
    result = driver.cuMemMap(
        ctypes.c_ulonglong(address),
        ctypes.c_size_t(size),
        ctypes.c_size_t(0),
        ctypes.c_ulonglong(handle),
        0,
    )
    _check(driver, "cuMemMap", result)
    granted = [device, *(p for p in peers if p != device)]
    access = (_AccessDesc * len(granted))(
        *(_AccessDesc(_Location(_LOCATION_DEVICE, d), _ACCESS_READ_WRITE) for d in granted)
    )
    result = driver.cuMemSetAccess(
        ctypes.c_ulonglong(address), ctypes.c_size_t(size), access, ctypes.c_size_t(len(granted))
    )
    if result != 0:
        driver.cuMemUnmap(ctypes.c_ulonglong(address), ctypes.c_size_t(size))
    _check(driver, "cuMemSetAccess", result)


def map_readwrite(
    handle: int, size: int, device: int, alignment: int = 0, peers: Sequence[int] = ()
) -> int:
    """Map the whole allocation at a fresh address of this process (a multiple of
    `alignment`, 0: the driver's choice), readable and writable from `device` (and `peers`);
    returns the address."""
    address = reserve(size, alignment)
    try:
        map_at(address, handle, size, device, peers)
    except CudaDriverError:
        free_range(address, size)
        raise
    return address


def unmap(address: int, size: int) -> None:
    """Undo map_readwrite (the caller has synchronised: no kernel may still use it)."""
    unmap_range(address, size)
    free_range(address, size)


def unmap_range(address: int, size: int) -> None:
    """Undo one map_at (the caller has synchronised); the address range stays reserved."""
    driver = _driver()
    result = driver.cuMemUnmap(ctypes.c_ulonglong(address), ctypes.c_size_t(size))
    _check(driver, "cuMemUnmap", result)


def free_range(address: int, size: int) -> None:
    """Give back a range from reserve() (nothing may still be mapped in it)."""
    driver = _driver()
    result = driver.cuMemAddressFree(ctypes.c_ulonglong(address), ctypes.c_size_t(size))
    _check(driver, "cuMemAddressFree", result)


def close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
