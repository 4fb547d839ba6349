"""One call's GPU kernels under torch's profiler, robust to the profiler's lost first records.

Each profiling session after a process's first re-registers CUPTI's timestamp callback, and
CUPTI then corrupts or drops the first kernel records of the session, one more per session
(pytorch/pytorch#192021). A worker's second census would lose the one kernel of a
`return a + b`, and a candidate that only calls PyTorch would escape the `only_library_kernels`
flag. So every session starts with sentinel kernels that absorb those records, and the
sentinels are then taken out by name.

No session is opened before a worker's timed calls: Kineto leaves CUPTI subscribed after a
session (it tears it down only under TEARDOWN_CUPTI=1, pytorch/pytorch#144455), and CUPTI then
stands in every later CUDA call of the process. On an H200 a five-launch call's host time read
80 µs back to back and 234 µs after 1 ms of sleep in processes that had opened one session
first, against 63 and 119 µs in processes that had not; with the teardown, 60 and 211 µs
(benchmarks/probes/cupti_residue.py). A census comes after its candidate's timed calls and pays
CUPTI's first start itself, about 27 ms.

The session is torch.autograd.profiler.profile, under torch.profiler.profile: the latter's
start asks `hasattr(torch, "_inductor")`, which imports Inductor, Dynamo, SymPy and Triton
(889 modules, 1.4 to 1.8 s of a fresh worker's CPU on an H100 host), for a setting a census
never reads. `session` opens every profiler a worker uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_kernelboard.channel import fences


def session(profile: Callable[..., Any], cuda: bool = True) -> Any:
    """A profiling session of torch's Kineto profiler (`profile`: its
    torch.autograd.profiler.profile), CPU events and, with `cuda`, CUDA kernels; its
    `function_events` are the events. CPU activity too: with CUDA alone, some torch builds
    return no kernel events at all."""
    return profile(use_cpu=True, use_device="cuda" if cuda else None, use_kineto=True)


SENTINEL_NAME = "spin_kernel"  # torch.cuda._sleep's kernel, which no call of interest launches
SPARE_SENTINELS = 2  # beyond one per earlier session


def drop_sentinels(
    launched: Sequence[tuple[str, float]], sentinels: int
) -> list[tuple[str, float]]:
    """The launched kernels without (up to) `sentinels` of the sentinel kernels, the first
    ones seen; memory copies and sets are not kernels of the call and go too."""
    kept: list[tuple[str, float]] = []
    left = sentinels
    for name, device_us in launched:
        if left and SENTINEL_NAME in name:
            left -= 1
            continue
        if name.startswith(("Memcpy", "Memset")):
            continue
        kept.append((name, device_us))
    return kept


class KernelCensus:
    """Profiles one call at a time in a worker; counts its sessions for the sentinels.

    Made before the submission is imported: what it uses is captured then, so a submission
    that patches torch at import cannot change the census."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.sessions = 0
        self._profile = torch.autograd.profiler.profile
        self._sleep = torch.cuda._sleep
        self._cuda_events = torch.autograd.DeviceType.CUDA

    def run(self, call: Callable[[], Any]) -> tuple[Any, list[tuple[str, float]]]:
        """The call's result and the kernels it launched (name, device µs), in launch order."""
        sentinels = self.sessions + SPARE_SENTINELS
        self.sessions += 1
        with session(self._profile) as profiler:
            for _ in range(sentinels):
                self._sleep(1)
            fences.synchronize()
            result = call()
            fences.synchronize()
        launched = [
            (str(event.name), float(getattr(event, "device_time", 0.0) or 0.0))
            for event in profiler.function_events
            if event.device_type == self._cuda_events
        ]
        return result, drop_sentinels(launched, sentinels)
