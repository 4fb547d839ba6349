"""How much a launch-bound call's host time moves from one process to the next on this machine.

    python benchmarks/process_noise.py [--processes 8] [--calls 300] [--cpus 2,10] [--modes]

Starts the same small program in fresh processes, one after another: each times `--calls`
calls of a five-launch PyTorch module (a GEMM and its epilogue, KernelBench level-2 sized) by
the host clock around the call, and prints its median. Then the same pinned to each CPU of
`--cpus` (sched_setaffinity). If the medians of unpinned processes spread far more than those
of pinned ones, a judge that pins its timed worker would rank host-bound calls more
reproducibly; if pinned ones spread as much, the spread belongs to the process itself.

`--modes` (GPU) instead times the call's host time in each process three ways, interleaved:
alone; after the judge's L2 flush; after the flush with the stream held by the blocking
kernel (worker/blocking.py), as a timed call runs. A host time that grows under the blocking
kernel is time the harness adds to a host-bound call.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROGRAM = r"""
import json, os, statistics, sys, time
cpu = int(sys.argv[2])
if cpu >= 0:
    os.sched_setaffinity(0, {cpu})
import torch
import torch.nn.functional as F
device = "cuda" if torch.cuda.is_available() else "cpu"
lin = torch.nn.Linear(1024, 512).to(device)
x = torch.randn(128, 1024, device=device)
def call():
    return F.leaky_relu(lin(x) * 0.5, 0.1).clamp(-1.0, 1.0)
for _ in range(50):
    call()
if device == "cuda":
    torch.cuda.synchronize()
times = []
for _ in range(int(sys.argv[1])):
    started = time.perf_counter()
    call()
    times.append((time.perf_counter() - started) * 1e6)
    if device == "cuda":
        torch.cuda.synchronize()
print(json.dumps({"median_us": statistics.median(times), "cpus": sorted(os.sched_getaffinity(0))}))
"""

MODES = r"""
import json, statistics, sys, time
import torch
import torch.nn.functional as F
from pytest_kernelboard.worker.blocking import StreamBlocker
lin = torch.nn.Linear(1024, 512).cuda()
x = torch.randn(128, 1024, device="cuda")
flush = torch.zeros((64 << 20) // 8, dtype=torch.int64, device="cuda")
sink = torch.zeros((), dtype=torch.int64, device="cuda")
blocker = StreamBlocker(torch)
def call():
    with torch.no_grad():
        return F.leaky_relu(lin(x) * 0.5, 0.1).clamp(-1.0, 1.0)
times = {"alone": [], "flush": [], "blocked": []}
for i in range(int(sys.argv[1]) + 20):
    for mode in times:
        if mode != "alone":
            torch.sum(flush, dim=0, out=sink)
        if mode == "blocked":
            blocker.block()
        started = time.perf_counter()
        call()
        took = (time.perf_counter() - started) * 1e6
        if mode == "blocked":
            blocker.release()
        torch.cuda.synchronize()
        if i >= 20:
            times[mode].append(took)
print(json.dumps({m: statistics.median(t) for m, t in times.items()}))
"""


def one(calls: int, cpu: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(calls), str(cpu)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["median_us"]


def modes(calls: int, processes: int) -> None:
    for _ in range(processes):
        out = subprocess.run(
            [sys.executable, "-c", MODES, str(calls)], capture_output=True, text=True, check=True
        ).stdout
        medians = json.loads(out.strip().splitlines()[-1])
        print("  ".join(f"{mode} {us:7.1f} us" for mode, us in medians.items()))


def spread(medians: list[float]) -> str:
    middle = statistics.median(medians)
    return (
        f"median {middle:7.1f} us, min {min(medians):7.1f}, max {max(medians):7.1f}, "
        f"(max-min)/median {(max(medians) - min(medians)) / middle:6.1%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--cpus", default="2,10")
    parser.add_argument("--modes", action="store_true", help="alone / flush / blocked (GPU)")
    args = parser.parse_args()
    if args.modes:
        modes(args.calls, args.processes)
        return
    print(f"{os.cpu_count()} CPUs; this process may run on {sorted(os.sched_getaffinity(0))}")
    for cpu in [-1, *map(int, args.cpus.split(","))]:
        medians = [one(args.calls, cpu) for _ in range(args.processes)]
        where = "unpinned" if cpu < 0 else f"pinned to CPU {cpu}"
        print(f"{where:18s} {spread(medians)}  [{', '.join(f'{m:.1f}' for m in medians)}]")


if __name__ == "__main__":
    main()
