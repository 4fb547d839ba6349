"""What one GPU's work costs while every other GPU of the host works too, without kernelboard.

    python benchmarks/probes/gpu_contention.py [--calls 100] [--starts 6] [--pin]

For one process on GPU 0 alone, then one process per GPU all at once, each process measures:
- `start`: a fresh Python that imports torch, makes its CUDA context and exits (what a fresh
  worker pays), started `--starts` times one after another, wall seconds each;
- `call`: `--calls` timed calls of a ~2.7 ms fp32 GEMM the way the judge times one (L2 flush,
  events, synchronize), host wall ms per call and device ms per call.
With --pin each process is held to its own contiguous share of the host's CPUs (as
`kernelboard judge --gpus` holds its judges: pytest_kernelboard/judge/cpu_sets.py).
Prints each configuration's medians per GPU: where a second or fourth GPU's work slows the
first's, the host (CPUs, driver) is what they share.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CHILD_START = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"


def child(calls: int, starts: int) -> dict:
    import torch

    start_s = []
    for _ in range(starts):
        begun = time.perf_counter()
        subprocess.run([sys.executable, "-c", CHILD_START], check=True)
        start_s.append(time.perf_counter() - begun)
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    host_ms, device_ms = [], []
    for index in range(calls + 5):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        begun = time.perf_counter()
        start.record()
        torch.mm(a, b)
        end.record()
        end.synchronize()
        if index >= 5:  # warm-up calls not counted
            host_ms.append((time.perf_counter() - begun) * 1e3)
            device_ms.append(start.elapsed_time(end))
    return {
        "start_s": statistics.median(start_s) if start_s else None,
        "host_ms": statistics.median(host_ms),
        "device_ms": statistics.median(device_ms),
        "cpus": len(os.sched_getaffinity(0)),
    }


def run(gpus: list[int], args: argparse.Namespace) -> list[dict]:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    from pytest_kernelboard.judge.cpu_sets import allowed_cpus, pin_process, split_cpus

    sets = split_cpus(allowed_cpus(), len(gpus))
    processes = []
    for slot, gpu in enumerate(gpus):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
        command = [sys.executable, __file__, "--child", "--calls", str(args.calls)]
        command += ["--starts", str(args.starts)]
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        if args.pin:
            pin_process(process.pid, sets[slot])
        processes.append(process)
    return [json.loads(p.communicate()[0]) for p in processes]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--starts", type=int, default=6)
    parser.add_argument("--pin", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.calls, args.starts)))
        return 0
    import torch

    count = torch.cuda.device_count()
    for gpus in ([0], list(range(count))):
        results = run(gpus, args)
        print(f"{len(gpus)} GPU(s) at once{' (pinned)' if args.pin else ''}:")
        for gpu, result in zip(gpus, results, strict=True):
            print(
                f"  GPU {gpu}: fresh CUDA process {result['start_s']:.2f} s, timed call host "
                f"{result['host_ms']:.3f} ms, device {result['device_ms']:.3f} ms, "
                f"{result['cpus']} CPUs"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
