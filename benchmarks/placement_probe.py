"""Does where a large add's buffers lie, or how long the GPU idled before it, change its time?

    python benchmarks/placement_probe.py [--n 16384] [--calls 15] [--sets 6] [--gaps]

(The two values a judged 16384² add reads: 518 or 603 µs on the H100.)

Times `torch.add(a, b, out=c)` on fp16 N x N with CUDA events, the L2 flushed by a read before
each call, for several placements of a, b and c:
- `torch`      three tensors from torch's allocator (as Nsight Compute's run of the kernel has)
- `torch-one`  one torch allocation, the three back to back in it
- `window`     one VMM allocation (worker/window.py, what a judged call's inputs live in), the
               three back to back, as the judge's packer lays them out
- `window+K`   the same with K KiB between them
Each placement is made `--sets` times afresh; each line is one set's median and range (µs).
If one placement reads the slow value and another the fast one, the placement is the cause.

`--gaps` instead keeps torch's placement and idles the GPU before each call, as a judged call
does while the judge makes and sends the next input: `--gap-ms` of host sleep, then nothing,
or a GPU spin of 0.2 or 2 ms before the flush. Each line also gives the SM clock NVML read
just before the call. If the gap makes the call slow and the spin restores it, the clock that
an idle GPU drops to is the cause.
"""

from __future__ import annotations

import argparse
import statistics
import time

import pynvml
import torch

from pytest_kernelboard.worker.window import Window, region


def timed(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    calls: int,
    gap_ms: float = 0.0,
    spin_ms: float = 0.0,
    clocks: list[int] | None = None,
) -> list[float]:
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    sink = torch.zeros((), dtype=torch.int64, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(calls + 3):
        if gap_ms:
            time.sleep(gap_ms / 1e3)
        if spin_ms:
            torch.cuda._sleep(int(spin_ms * 1.98e6))  # cycles at about 1.98 GHz
        if clocks is not None and i >= 3:
            clocks.append(sm_clock())
        torch.sum(flush.view(torch.int64), dim=0, out=sink)
        start.record()
        torch.add(a, b, out=c)
        end.record()
        torch.cuda.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end) * 1e3)
    return times


def views(buffer: torch.Tensor, n: int, gap: int) -> list[torch.Tensor]:
    nbytes = n * n * 2
    return [
        buffer[i * (nbytes + gap) : i * (nbytes + gap) + nbytes].view(torch.float16).view(n, n)
        for i in range(3)
    ]


def placement(name: str, n: int) -> tuple[list[torch.Tensor], Window | None]:
    """a, b, c placed as `name` says, and the window they lie in (None: torch's memory)."""
    nbytes = n * n * 2
    if name == "torch":
        return [torch.empty(n, n, dtype=torch.float16, device="cuda") for _ in "abc"], None
    if name == "torch-one":
        return views(torch.empty(3 * nbytes, dtype=torch.uint8, device="cuda"), n, 0), None
    gap = int(name.partition("+")[2] or 0) << 10
    window = Window.create(3 * (nbytes + gap), 0)
    return views(region(window, 0, window.size), n, gap), window


def sm_clock() -> int:
    return pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM)


def gaps(n: int, calls: int, sets: int, gap_ms: float) -> None:
    pynvml.nvmlInit()
    (a, b, c), _ = placement("torch", n)
    a.normal_(), b.normal_()
    for _ in range(sets):
        for name, gap, spin in (
            ("back to back", 0.0, 0.0),
            (f"{gap_ms:g} ms idle", gap_ms, 0.0),
            (f"{gap_ms:g} ms idle, 0.2 ms spin", gap_ms, 0.2),
            (f"{gap_ms:g} ms idle, 2 ms spin", gap_ms, 2.0),
        ):
            clocks: list[int] = []
            times = timed(a, b, c, calls, gap, spin, clocks)
            print(
                f"{name:26s} median {statistics.median(times):8.2f} min {min(times):8.2f} "
                f"max {max(times):8.2f}  SM clock before: {min(clocks)} - {max(clocks)} MHz",
                flush=True,
            )


PLACEMENTS = ["torch", "torch-one", "window", "window+4", "window+64", "window+2052"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--sets", type=int, default=6)
    parser.add_argument("--gaps", action="store_true", help="idle gaps instead of placements")
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--sequence", action="store_true", help="print every call's time")
    args = parser.parse_args()
    if args.gaps:
        gaps(args.n, args.calls, args.sets, args.gap_ms)
        return
    for name in PLACEMENTS:
        for _ in range(args.sets):
            (a, b, c), window = placement(name, args.n)
            a.normal_(), b.normal_()
            times = timed(a, b, c, args.calls)
            ptrs = " ".join(f"{t.data_ptr() % (1 << 30) >> 20:4d}M" for t in (a, b, c))
            if args.sequence:
                print("  calls:", " ".join(f"{t:.0f}" for t in times))
            print(
                f"{name:12s} median {statistics.median(times):8.2f} min {min(times):8.2f} "
                f"max {max(times):8.2f}  (address mod 1 GiB: {ptrs})",
                flush=True,
            )
            del a, b, c
            if window is not None:
                window.close()
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
