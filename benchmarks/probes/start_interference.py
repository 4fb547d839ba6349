"""Which step of a worker's start slows a kernel timed on the same GPU by another process.

    python benchmarks/probes/start_interference.py [--starts 8] [--gap-ms 250] [--json OUT]

A batch judge keeps spare workers starting while a candidate is timed. On an H100 a 2.7 ms
GEMM (KernelBench L2 12's) timed meanwhile read 14% slow in bursts of two to four calls
(benchmarks/probes/timed_calls.py). This probe times that GEMM back to back in one process (L2
flushed, CUDA events around each call) while another process forks `--starts` children, one
after another, each making a worker's start one step at a time, `--gap-ms` apart, as
worker/main.py makes them:

- `cuinit`: the driver's start (no context yet);
- `context`: the CUDA context (one element on the device);
- `blas`: cuBLAS's handle and first kernel (worker/libraries.py);
- `profiler`: torch.autograd.profiler's first start (the census's warm start, CUPTI);
- `triton`: Triton imported (host work only);
- `spin_kernel`: the blocking kernel compiled or loaded from Triton's cache, with its pinned flag
  (worker/blocking.py, `compile_ahead`: what a worker does with the profiler's first start when it
  starts for a batch);
- `alloc`: 256 MiB allocated and written;
- `exit`: the child's exit, its context torn down.

Each GEMM is matched with the steps its interval overlaps; per step, how many calls it touched
and their median deviation from the calls that touched none. A step whose calls read slow is
what a timed case must not share the GPU with.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STEPS = ("cuinit", "context", "blas", "profiler", "triton", "spin_kernel", "alloc", "exit")

TIMER = r"""
import json, sys, time, torch
seconds = float(sys.argv[1])
x = torch.randn(1024, 8192, device="cuda")
w = torch.randn(8192, 8192, device="cuda")
flush = torch.zeros(64 << 20, dtype=torch.int64, device="cuda")
sink = torch.zeros((), dtype=torch.int64, device="cuda")
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for _ in range(20):
    torch.mm(x, w)
torch.cuda.synchronize()
print("ready", flush=True)
samples = []
stop = time.perf_counter() + seconds
while time.perf_counter() < stop:
    torch.sum(flush, dim=0, out=sink)
    t0 = time.perf_counter()
    start.record()
    torch.mm(x, w)
    end.record()
    end.synchronize()
    samples.append((t0, time.perf_counter(), start.elapsed_time(end) * 1e3))
print(json.dumps(samples))
"""

STARTER = r"""
import json, os, sys, time, torch
starts, gap = int(sys.argv[1]), float(sys.argv[2])
spans = []
for _ in range(starts):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        mine = []
        def step(name, action):
            time.sleep(gap)
            t0 = time.perf_counter()
            action()
            mine.append((name, t0, time.perf_counter()))
        step("cuinit", torch.cuda.init)
        step("context", lambda: (torch.zeros(1, device="cuda"), torch.cuda.synchronize()))
        def blas():
            small = torch.ones(8, 8, device="cuda")
            torch.mm(small, small)
            torch.cuda.synchronize()
        step("blas", blas)
        def profiler():
            with torch.autograd.profiler.profile(use_device="cuda", use_kineto=True):
                torch.zeros(1, device="cuda")
                torch.cuda.synchronize()
        step("profiler", profiler)
        step("triton", lambda: __import__("triton"))
        sys.path.insert(0, sys.argv[3])
        from pytest_kernelboard.worker.blocking import compile_ahead
        step("spin_kernel", lambda: compile_ahead(torch))
        def alloc():
            torch.ones(64 << 20, device="cuda")
            torch.cuda.synchronize()
        step("alloc", alloc)
        time.sleep(gap)
        os.write(write, json.dumps(mine).encode())
        os.close(write)
        os._exit(0)
    os.close(write)
    got = b""
    while chunk := os.read(read, 65536):
        got += chunk
    exit_began = time.perf_counter()
    os.waitpid(pid, 0)
    spans += json.loads(got) + [("exit", exit_began, time.perf_counter())]
    time.sleep(gap)
print(json.dumps(spans))
"""


def overlaps(a0: float, a1: float, b0: float, b1: float) -> bool:
    return a0 < b1 and b0 < a1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=8)
    parser.add_argument("--gap-ms", type=float, default=250.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    gap = args.gap_ms / 1e3
    seconds = args.starts * (9 * gap + 2.5) + 3.0
    env = dict(os.environ)
    timer = subprocess.Popen(
        [sys.executable, "-c", TIMER, str(seconds)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert timer.stdout is not None
    if timer.stdout.readline().strip() != "ready":
        raise SystemExit("the timing process did not start")
    time.sleep(1.0)  # calls with nothing beside them first
    starter = subprocess.run(
        [sys.executable, "-c", STARTER, str(args.starts), str(gap), str(REPO)],
        capture_output=True,
        text=True,
        env=env,
    )
    if starter.returncode != 0:
        raise SystemExit(f"the starting process failed:\n{starter.stderr[-2000:]}")
    samples = json.loads(timer.communicate()[0].strip().splitlines()[-1])
    spans = json.loads(starter.stdout.strip().splitlines()[-1])
    touched: dict[str, list[float]] = {step: [] for step in STEPS}
    quiet: list[float] = []
    for t0, t1, us in samples:
        hit = {name for name, s0, s1 in spans if overlaps(t0, t1, s0, s1)}
        for name in hit:
            touched[name].append(us)
        if not hit:
            quiet.append(us)
    base = statistics.median(quiet)
    alone_slow = sum(us > 1.01 * base for us in quiet)
    print(f"GEMM alone: {len(quiet)} calls, median {base:.1f} us, {alone_slow} over +1%")
    result = {"alone_us": base, "alone_calls": len(quiet), "steps": {}}
    for step in STEPS:
        calls = touched[step]
        durations = [s1 - s0 for name, s0, s1 in spans if name == step]
        if not calls:
            print(f"{step:<9} {statistics.median(durations) * 1e3:7.1f} ms  no call overlapped")
            continue
        dev = [100 * (us / base - 1) for us in calls]
        slow = sum(d > 1.0 for d in dev)
        print(
            f"{step:<9} {statistics.median(durations) * 1e3:7.1f} ms  {len(calls):3d} calls "
            f"overlapped, median {statistics.median(dev):+6.1f}%, max {max(dev):+6.1f}%, "
            f"{slow} over +1%"
        )
        result["steps"][step] = {
            "step_ms": statistics.median(durations) * 1e3,
            "calls": len(calls),
            "median_pct": statistics.median(dev),
            "max_pct": max(dev),
            "over_1pct": slow,
        }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
