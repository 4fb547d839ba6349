"""Which GPUs a cage holds: the device nodes of the GPUs its CUDA_VISIBLE_DEVICES names, and
nothing of the host's others.

The CUDA driver starts by opening every GPU node it finds in /dev, and that start waits on the
other GPUs' work: on a 4-GPU host a worker's driver start took three times as long as on one
GPU while its CPU time stayed the same, and a third as long again with only its own GPU's node
in its /dev (docs/benchmarks.md, "What a fresh worker waits for"). A worker that cannot open
another GPU's node also cannot touch that GPU at all, whatever a submission tries.

Inside such a cage CUDA numbers only the GPUs it can open, so the judge's numbers mean nothing
there: CUDA_VISIBLE_DEVICES is rewritten to the same GPUs by UUID, in the same order (rank r
stays cuda:r). Where the GPUs cannot be told apart for certain (no NVML, a MIG instance, an
index NVML does not know, CUDA's fastest-first numbering on a host of mixed GPUs) the cage
keeps every GPU's node and the variable stays as it was.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

VARIABLE = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class HostGpu:
    """One GPU as NVML numbers it (PCI bus order)."""

    index: int
    minor: int  # its node: /dev/nvidia<minor>
    uuid: str  # "GPU-..."
    name: str


@dataclass(frozen=True)
class GpuView:
    """The GPUs a cage holds: their nodes, and CUDA_VISIBLE_DEVICES as it reads inside."""

    minors: tuple[int, ...]
    visible: str


@functools.cache
def host_gpus() -> tuple[HostGpu, ...] | None:
    """The host's GPUs from NVML, or None where NVML cannot list them (a CPU machine)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(
                HostGpu(
                    index,
                    int(pynvml.nvmlDeviceGetMinorNumber(handle)),
                    uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    name.decode() if isinstance(name, bytes) else str(name),
                )
            )
        return tuple(gpus)
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def view_of(
    visible: str | None,
    gpus: Sequence[HostGpu] | None = None,
    order: str | None = None,
) -> GpuView | None:
    """The view a CUDA_VISIBLE_DEVICES value names (`gpus`: the host's, `order`:
    CUDA_DEVICE_ORDER), or None where the cage should keep every node: the variable unset, or
    an entry that cannot be matched to one GPU for certain."""
    if visible is None:
        return None
    gpus = host_gpus() if gpus is None else gpus
    if not gpus:
        return None
    entries = [entry.strip() for entry in visible.split(",")]
    if entries == [""]:
        return GpuView((), "")  # no GPU at all: no GPU's node either
    # CUDA numbers GPUs fastest first unless told PCI_BUS_ID; GPUs alike tie, and ties go in
    # PCI bus order, which is NVML's. With GPUs of several kinds the two orders differ.
    by_index = order == "PCI_BUS_ID" or len({gpu.name for gpu in gpus}) == 1
    chosen: list[HostGpu] = []
    for entry in entries:
        gpu = _match(entry, gpus, by_index)
        if gpu is None or gpu in chosen:
            return None
        chosen.append(gpu)
    return GpuView(tuple(gpu.minor for gpu in chosen), ",".join(gpu.uuid for gpu in chosen))


def _match(entry: str, gpus: Sequence[HostGpu], by_index: bool) -> HostGpu | None:
    if entry.isdigit():
        index = int(entry)
        return gpus[index] if by_index and index < len(gpus) else None
    if entry.startswith("GPU-"):  # CUDA accepts a unique prefix of a UUID too
        found = [gpu for gpu in gpus if gpu.uuid.startswith(entry)]
        return found[0] if len(found) == 1 else None
    return None  # MIG-..., or what CUDA would stop the list at


def narrow(env: MutableMapping[str, str], within: GpuView | None = None) -> GpuView | None:
    """The view of `env`'s GPUs, its CUDA_VISIBLE_DEVICES rewritten to read the same inside
    a cage that holds them; None (env untouched) where the cage keeps every node, or where
    `within` (an outer cage, the zygote's) lacks one of them."""
    view = env_view(env)
    if view is None or (within is not None and not set(view.minors) <= set(within.minors)):
        return None
    env[VARIABLE] = view.visible
    return view


def env_view(env: Mapping[str, str]) -> GpuView | None:
    """The GPUs an environment's CUDA_VISIBLE_DEVICES names (None: every GPU's node)."""
    return view_of(env.get(VARIABLE), order=env.get("CUDA_DEVICE_ORDER"))
