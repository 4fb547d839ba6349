"""A frugal call's memory, held again before the next call: the segments the last one used.

A worker judged frugally gives its cached device memory back after every call, so that the
judge's check has room (docs/architecture.md, "Device memory"). Left at that, each timed call
would allocate its output with cudaMalloc inside the timed interval, a host cost no other
harness charges. So before each call the worker makes torch's cache hold again what the last
call's cache held: the same segments, by size, in torch's large pool.

The same segments, not one block of their total: torch's allocator places a call's tensors by
best fit, and a call whose temporaries come and go (RMSNorm: x**2, then small means, then the
output) splits one large block so that its output no longer fits, and then allocates a second
output-sized block inside the timed call (seen on the H100). With its own segments back, a
call allocates exactly as in a warm process of any harness.
"""

from __future__ import annotations

from typing import Any

LARGE_POOL = "large"  # torch's pool of allocations over 1 MiB; small ones share 2 MiB segments


def free_segments(snapshot: list[dict[str, Any]]) -> list[int]:
    """The sizes of torch's large-pool segments that hold nothing now (what empty_cache would
    give back), largest first."""
    sizes = [
        int(segment["total_size"])
        for segment in snapshot
        if segment.get("segment_type") == LARGE_POOL and segment["allocated_size"] == 0
    ]
    return sorted(sizes, reverse=True)


class Reservation:
    """The segments a worker's frugal calls need, remembered after one and held before the next."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.segments: list[int] = []

    def remember(self) -> None:
        """After a call, its output let go, before the cache is emptied: the segments it used.
        Kept only when they add up to more than before (a call that needed less leaves them)."""
        sizes = free_segments(self.torch.cuda.memory_snapshot())
        if sum(sizes) > sum(self.segments):
            self.segments = sizes

    def hold_again(self) -> None:
        """Before a call, untimed: allocate each remembered segment, then free them all, so
        that torch's cache holds them for the call."""
        blocks = []
        try:
            for size in self.segments:
                blocks.append(self.torch.empty(size, dtype=self.torch.uint8, device="cuda"))
        except RuntimeError:  # the GPU is fuller than last time: the call allocates the rest
            pass
        del blocks
