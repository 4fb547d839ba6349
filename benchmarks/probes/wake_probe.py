"""How long the GPU may sit idle before a timed call reads slow, and how long a wake spin it needs.

    python benchmarks/probes/wake_probe.py [--gaps-ms 0.5,1,2,3,5,10,20] [--spins-us 0,500,1000,2000]

A timed call of the judge follows an idle gap on the device (the judge making the next input,
checking the last output, the round trip), and the worker spins the GPU for WAKE_US before the
call where the gap exceeded WAKE_AFTER_IDLE_S (worker/timing.py). For each gap and spin this
times, with CUDA events, a memory-bound kernel (a 16384 x 16384 float32 add) and a GEMM of
KernelBench L2 12's size (1024 x 8192 by 8192 x 8192), each after the L2 flush the timed calls
get; the median of `--calls` calls per pair. A spin shorter than needed, or a gap too long to go
without one, reads slower than back-to-back calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaps-ms", default="0.5,1,2,3,5,10,20")
    parser.add_argument("--spins-us", default="0,500,1000,2000")
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    x = torch.randn(16384, 16384, device="cuda")
    y, z = torch.randn_like(x), torch.empty_like(x)
    a = torch.randn(1024, 8192, device="cuda")
    w = torch.randn(8192, 8192, device="cuda")
    props = torch.cuda.get_device_properties(0)
    flush = torch.zeros(2 * getattr(props, "L2_cache_size", 50 << 20) // 8, dtype=torch.int64)
    flush, sink = flush.cuda(), torch.zeros((), dtype=torch.int64, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe_s, probe_e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe_s.record()
    torch.cuda._sleep(1_000_000)
    probe_e.record()
    torch.cuda.synchronize()
    cycles_per_us = 1_000_000 / (probe_s.elapsed_time(probe_e) * 1e3)
    kernels = {"add 16384^2": lambda: torch.add(x, y, out=z), "gemm L2 12": lambda: a @ w.T}

    def timed(kernel, gap_s: float, spin_us: float) -> float:
        torch.cuda.synchronize()
        time.sleep(gap_s)
        if spin_us:
            torch.cuda._sleep(int(spin_us * cycles_per_us))
        torch.sum(flush, dim=0, out=sink)
        start.record()
        kernel()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) * 1e3

    results = []
    for name, kernel in kernels.items():
        for _ in range(20):  # warm: clocks up, kernels loaded
            timed(kernel, 0.0, 0.0)
        back_to_back = statistics.median(timed(kernel, 0.0, 0.0) for _ in range(args.calls))
        print(f"{name}: back to back {back_to_back:.1f} us", flush=True)
        for gap_ms in map(float, args.gaps_ms.split(",")):
            for spin_us in map(float, args.spins_us.split(",")):
                median = statistics.median(
                    timed(kernel, gap_ms / 1e3, spin_us) for _ in range(args.calls)
                )
                slower = 100 * (median / back_to_back - 1)
                results.append([name, gap_ms, spin_us, round(median, 1), round(slower, 2)])
                print(
                    f"{name}: gap {gap_ms:5.1f} ms, spin {spin_us:6.0f} us: {median:8.1f} us "
                    f"({slower:+.1f}%)",
                    flush=True,
                )
    if args.out:
        args.out.write_text(json.dumps({"device": props.name, "results": results}, indent=1))


if __name__ == "__main__":
    main()
