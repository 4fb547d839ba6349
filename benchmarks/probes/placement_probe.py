"""Does where a large add's buffers lie, or how long the GPU idled before it, change its time?

    python benchmarks/probes/placement_probe.py [--n 16384] [--calls 15] [--sets 6] [--gaps]

(The two values a judged 16384² add read: 518 or 603 µs on the H100, 363 or 403 on the H200.
Neither placement nor alignment was their cause: the driver scrubbing memory freed just before
the call was, benchmarks/probes/scrub_probe.py.)

Times `torch.add(a, b, out=c)` on fp16 N x N with CUDA events, the L2 flushed by a read before
each call, for several placements of a, b and c:
- `torch`      three tensors from torch's allocator (as Nsight Compute's run of the kernel has)
- `torch-one`  one torch allocation, the three back to back in it
- `window`     one VMM allocation (channel/window.py, what a judged call's inputs live in), the
               three back to back, as the judge's packer lays them out
- `window+K`   the same with K KiB between them
Each placement is made `--sets` times afresh; each line is one set's median and range (µs).
If one placement reads the slow value and another the fast one, the placement is the cause.

`--pages` places a, b and c in VMM memory mapped at chosen addresses, to tell whether the
alignment of the mapping (which decides the page size the GPU's MMU can use) is the cause:
- `vmm@0`      one allocation mapped where the driver puts it (as a window is mapped today)
- `vmm@1G`     the same mapped at a multiple of 1 GiB
- `vmm@1G+2M`  the same mapped 2 MiB past a multiple of 1 GiB (2 MiB pages at most)
- `attach@0`   the allocation exported and mapped a second time, where the driver puts it (as a
               worker maps the judge's window), the tensors on the second mapping
- `vmm-KM`     one K MiB allocation per K MiB of the range (K = 2, 64, 512), mapped side by
               side at 1 GiB
Each line gives the mapping's address modulo 1 GiB.

`--small` times the add at N = 1 (three 2-byte tensors) and N = 1024 with its three tensors
at `--offsets` places in one buffer (each a multiple of 4 KiB, the same place for a, b and c
plus 1/3 and 2/3 of a 32 MiB stride): each line one place's median of `--calls` calls. If the
medians move by more than the timer's 32 ns from place to place, where a small call's data lies
sets its time, and a worker that keeps its inputs in one place reads one of those values.

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

from pytest_kernelboard.channel import cuda_vmm
from pytest_kernelboard.channel.window import Window, region


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


def report(name: str, times: list[float], where: str, sequence: bool) -> None:
    """One placement's line: the median and range of its calls (µs), and where it lay."""
    if sequence:
        print("  calls:", " ".join(f"{t:.0f}" for t in times))
    print(
        f"{name:12s} median {statistics.median(times):8.2f} min {min(times):8.2f} "
        f"max {max(times):8.2f}  ({where})",
        flush=True,
    )


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


GIB, MIB2 = 1 << 30, 2 << 20


class Mapping:
    """One range of device memory placed as a `--pages` placement says; close() undoes it."""

    def __init__(self, name: str, size: int):
        size = -(-size // MIB2) * MIB2
        self.size = size
        self.cleanup: list = []
        if name.startswith("vmm-"):
            piece = int(name[4:-1]) << 20
            self.address = self._reserved(size, GIB, 0)
            for offset in range(0, size, piece):
                handle = cuda_vmm.create(piece, 0)
                cuda_vmm.map_at(self.address + offset, handle, piece, 0)
                cuda_vmm.release(handle)  # the mapping keeps it
            self.cleanup += [
                lambda offset=offset: cuda_vmm.unmap_range(self.address + offset, piece)
                for offset in range(0, size, piece)
            ]
            return
        handle = cuda_vmm.create(size, 0)
        if name == "attach@0":
            first = cuda_vmm.map_readwrite(handle, size, 0)
            second = cuda_vmm.import_fd(cuda_vmm.export_fd(handle))
            self.address = cuda_vmm.map_readwrite(second, size, 0)
            cuda_vmm.release(second)
            self.cleanup += [lambda: cuda_vmm.unmap(first, size)]
            self.cleanup += [lambda: cuda_vmm.unmap(self.address, size)]
        elif name == "vmm@0":
            self.address = cuda_vmm.map_readwrite(handle, size, 0)
            self.cleanup.append(lambda: cuda_vmm.unmap(self.address, size))
        else:
            skew = MIB2 if name.endswith("+2M") else 0
            self.address = self._reserved(size, GIB, skew)
            cuda_vmm.map_at(self.address, handle, size, 0)
            self.cleanup.append(lambda: cuda_vmm.unmap_range(self.address, size))
        cuda_vmm.release(handle)

    def _reserved(self, size: int, alignment: int, skew: int) -> int:
        base = cuda_vmm.reserve(size + alignment, alignment)
        self.cleanup.append(lambda: cuda_vmm.free_range(base, size + alignment))
        return base + skew

    def bytes(self) -> torch.Tensor:
        return region(Window(None, self.address, self.size, 0), 0, self.size)

    def close(self) -> None:
        torch.cuda.synchronize()
        for undo in reversed(self.cleanup):
            undo()


def small(calls: int, places: int) -> None:
    buffer = torch.zeros(256 << 20, dtype=torch.uint8, device="cuda")
    stride = 32 << 20
    generator = torch.Generator().manual_seed(0)
    offsets = torch.randint(0, (stride - (2 << 20)) >> 12, (places,), generator=generator)
    for n in (1, 1024):
        nbytes = n * n * 2
        medians = []
        for offset in (int(o) << 12 for o in offsets):
            a, b, c = (
                buffer[offset + i * stride : offset + i * stride + nbytes]
                .view(torch.float16)
                .view(n, n)
                for i in range(3)
            )
            a.normal_(), b.normal_()
            times = timed(a, b, c, calls)
            medians.append(statistics.median(times))
            print(f"N={n:5d} at {offset >> 10:6d} KiB: median {medians[-1]:7.3f} us", flush=True)
        print(
            f"N={n:5d}: medians over {places} places {min(medians):.3f} - {max(medians):.3f} us "
            f"(median of medians {statistics.median(medians):.3f})",
            flush=True,
        )


PAGE_PLACEMENTS = ["vmm@0", "vmm@1G", "vmm@1G+2M", "attach@0", "vmm-2M", "vmm-64M", "vmm-512M"]


def pages(n: int, calls: int, sets: int, sequence: bool) -> None:
    nbytes = n * n * 2
    for _ in range(sets):
        for name in ["torch", *PAGE_PLACEMENTS]:
            mapping = None
            if name == "torch":
                a, b, c = (torch.empty(n, n, dtype=torch.float16, device="cuda") for _ in "abc")
                where = a.data_ptr()
            else:
                mapping = Mapping(name, 3 * nbytes)
                a, b, c = views(mapping.bytes(), n, 0)
                where = mapping.address
            a.normal_(), b.normal_()
            times = timed(a, b, c, calls)
            report(name, times, f"mapped at {where % GIB >> 20} MiB mod 1 GiB", sequence)
            del a, b, c
            if mapping is not None:
                mapping.close()
            torch.cuda.empty_cache()


PLACEMENTS = ["torch", "torch-one", "window", "window+4", "window+64", "window+2052"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--sets", type=int, default=6)
    parser.add_argument("--gaps", action="store_true", help="idle gaps instead of placements")
    parser.add_argument("--pages", action="store_true", help="VMM mappings by alignment")
    parser.add_argument("--small", action="store_true", help="small calls by where data lies")
    parser.add_argument("--offsets", type=int, default=24)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--sequence", action="store_true", help="print every call's time")
    args = parser.parse_args()
    if args.small:
        small(args.calls, args.offsets)
        return
    if args.pages:
        pages(args.n, args.calls, args.sets, args.sequence)
        return
    if args.gaps:
        gaps(args.n, args.calls, args.sets, args.gap_ms)
        return
    for name in PLACEMENTS:
        for _ in range(args.sets):
            (a, b, c), window = placement(name, args.n)
            a.normal_(), b.normal_()
            times = timed(a, b, c, args.calls)
            ptrs = " ".join(f"{t.data_ptr() % (1 << 30) >> 20:4d}M" for t in (a, b, c))
            report(name, times, f"address mod 1 GiB: {ptrs}", args.sequence)
            del a, b, c
            if window is not None:
                window.close()
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
