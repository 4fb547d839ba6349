"""How GPU tensors cross between judge and worker: device windows, CUDA IPC, or host copies.

Device windows (window.py) are the default where the GPU supports them: two shared VMM
allocations, handed over once as descriptors. Where they are not supported (or are turned off
with KERNELBOARD_CUDA_TRANSPORT=ipc|host), torch's CUDA IPC is used; it does not work between
processes in different PID namespaces, so in the sandbox the judge then sends host copies
through shared memory and the worker moves them to the GPU before the call, outside any timed
region (and moves its outputs back to the host; the judge returns them to the GPU). Whether
IPC works is probed once per session in that case.
"""

from __future__ import annotations

from typing import Any

from .protocol import Op

WINDOW = "window"
IPC = "ipc"
HOST = "host"


def _map(obj: Any, convert) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return convert(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(_map(v, convert) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(v, convert) for v in obj)
    if isinstance(obj, dict):
        return {k: _map(v, convert) for k, v in obj.items()}
    return obj


def to_host(obj: Any) -> Any:
    """Every CUDA tensor in obj (nested in tuples, lists, dicts) as a CPU tensor."""
    return _map(obj, lambda t: t.detach().cpu() if t.is_cuda else t)


def to_device(obj: Any, device: str = "cuda") -> Any:
    """Every CPU tensor in obj on `device` (the worker's side of the host transport)."""
    return _map(obj, lambda t: t.to(device) if not t.is_cuda else t)


def probe_ipc(worker: Any, timeout_s: float = 120.0) -> str:
    """IPC when a CUDA tensor sent to `worker` comes back right, else HOST."""
    import torch

    probe = torch.arange(16, dtype=torch.float32, device="cuda")
    try:
        reply = worker.request(Op.ECHO, timeout_s, data=probe)
        back = reply.payload["output"]
        ok = isinstance(back, torch.Tensor) and torch.equal(back.cuda(), probe + 1)
    except Exception:  # any failure: CUDA IPC does not work here
        ok = False
    return IPC if ok else HOST
