"""The rank-aware path of a worker: join the judge's process group as one rank of a case.

The judge starts one worker per rank and sends each `init_group`; from then on every timed
call starts with a barrier over the group, so all ranks start their flush, pre-roll and events
together (worker/timing.py's `time_call` runs `before_timed_call` first), and on GPUs a second,
on the device, between the blocking kernel and the start event (`device_barrier`).

`all_reduce_ceiling` times the group's own all-reduce of a case's bytes, the ceiling a
communication-bound case is compared with (judge/distributed.py, docs/timing.md).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import time
from typing import Any

from pytest_kernelboard.channel import fences
from pytest_kernelboard.channel.protocol import ErrorKind, error_reply

# Process-group traffic stays on the host: the bootstrap and gloo's pairs use loopback only.
LOOPBACK_INTERFACE = "lo"
# What torch's TCPStore says when rank 0 cannot bind the port (another process took it).
_PORT_TAKEN = ("address already in use", "eaddrinuse")


def port_taken(exc: BaseException) -> bool:
    """Whether joining failed because the group's port was taken (the judge retries anew)."""
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return True
    text = str(exc).lower()
    return any(marker in text for marker in _PORT_TAKEN)


def init_group(
    timer: Any, rank: int, world_size: int, port: int, backend: str, group_timeout_s: float
) -> dict[str, Any]:
    """Pin this worker to GPU `rank` (an NCCL group) and join the group at 127.0.0.1:`port`;
    the group's barriers go to the worker's `timer` (worker/timing.py), before every timed call.
    A gloo group's ranks pin nothing, on a GPU host too: three CPU ranks on a host showing two
    GPUs would otherwise ask for a cuda:2 it lacks.

    A taken port is reported as such (ErrorKind.PORT_TAKEN), here where the exception is."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", LOOPBACK_INTERFACE)
    os.environ.setdefault("NCCL_SOCKET_IFNAME", LOOPBACK_INTERFACE)
    on_gpus = timer.cuda and backend == "nccl"
    device_ids = None
    if on_gpus:
        torch.cuda.set_device(rank)
        device_ids = [rank]
    try:
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=dt.timedelta(seconds=group_timeout_s),
        )
    except Exception as exc:
        if not port_taken(exc):
            raise
        return error_reply(
            f"port {port} is taken: {type(exc).__name__}: {exc}",
            ErrorKind.PORT_TAKEN,
            type(exc).__name__,
        )

    def barrier() -> None:
        if device_ids is not None:
            dist.barrier(device_ids=device_ids)
        else:
            dist.barrier()

    timer.before_timed_call = barrier
    if on_gpus:
        # Queued behind the blocking kernel, before the start event: each rank's stream is
        # released when its own host has queued the call, at different moments; a one-element
        # all-reduce there makes every rank's start event wait for the last rank's release, so
        # no rank's interval holds the time it waited for a late peer to enter the collective.
        token = torch.zeros(1, device=f"cuda:{rank}")
        timer.device_barrier = lambda: dist.all_reduce(token)
    barrier()  # every rank has joined before the judge sends work
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": backend}


def all_reduce_ceiling(timer: Any, nbytes: int, warmup: int, repetitions: int) -> dict[str, Any]:
    """Time `repetitions` all-reduces (sum) of a float32 buffer of `nbytes` (rounded up to
    whole elements) over the group, after `warmup` untimed ones; each starts as a timed call
    does, after the host barrier and, on GPUs, the device barrier, so its interval holds the
    collective alone. Device time by CUDA events on GPUs, perf_counter on CPU (gloo)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or timer.before_timed_call is None:
        raise RuntimeError("the ceiling needs the case's process group: send init_group first")
    device = f"cuda:{torch.cuda.current_device()}" if timer.cuda else "cpu"
    # Zeros: summed again and again, they never overflow (NCCL does not skip them).
    buffer = torch.zeros(max(1, -(-nbytes // 4)), dtype=torch.float32, device=device)
    samples: list[float] = []
    for index in range(warmup + repetitions):
        timer.before_timed_call()
        if timer.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            timer.device_barrier()  # every rank's start waits for the last rank, on the device
            start.record()
            dist.all_reduce(buffer)
            end.record()
            fences.synchronize()
            elapsed_us = start.elapsed_time(end) * 1e3
        else:
            began = time.perf_counter()
            dist.all_reduce(buffer)
            elapsed_us = (time.perf_counter() - began) * 1e6
        if index >= warmup:
            samples.append(elapsed_us)
    return {"samples_us": samples, "clock": "cuda_event" if timer.cuda else "host"}
