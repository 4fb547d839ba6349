"""Does a profiler session started early leave a worker's later launches slower?

    python benchmarks/probes/cupti_residue.py [--processes 6] [--calls 200] [--json OUT]

A batch judge's workers start torch's profiler once while they start (worker/census.py,
`KernelCensus.warm`), so that the kernel census after the timed calls costs milliseconds.
Kineto tears CUPTI down after a session only where `TEARDOWN_CUPTI=1`; otherwise CUPTI stays
subscribed, and each later CUDA API call may pass through its callbacks. A launch-bound call's
time is its host time, so that would slow every host-bound timed call of a batch.

Each variant runs in fresh processes, each on the CPU its probe found fastest
(worker/cpu_choice.py): `none` (no session before the timed calls), `warm` (one session on
`zeros(1)` first, as a batch's workers do), `warm_teardown` (the same with `TEARDOWN_CUPTI=1`).
Each process times the host time of a five-launch module's call (a GEMM and its epilogue,
KernelBench level-2 sized) back to back and after 1 ms of sleep, then one census-like session
(its milliseconds), then the calls again. If `warm` reads far above `none` and `warm_teardown`
near it, CUPTI's residue is what a batch's host-bound calls pay.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

VARIANTS = ("none", "warm", "warm_teardown")

PROGRAM = r"""
import json, statistics, sys, time
import torch
import torch.nn.functional as F
from pytest_kernelboard.worker import cpu_choice
cpu, _ = cpu_choice.choose_and_pin(cpu_choice.allowed_cpus())
lin = torch.nn.Linear(1024, 512).cuda()
x = torch.randn(128, 1024, device="cuda")
def call():
    with torch.no_grad():
        return F.leaky_relu(lin(x) * 0.5, 0.1).clamp(-1.0, 1.0)
torch.cuda.synchronize()
def session():
    started = time.perf_counter()
    with torch.autograd.profiler.profile(use_cpu=True, use_device="cuda", use_kineto=True) as p:
        torch.cuda._sleep(1)
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
    kernels = sum(1 for e in p.function_events if e.device_type == torch.autograd.DeviceType.CUDA)
    return (time.perf_counter() - started) * 1e3, kernels
def host_times(calls, sleep_s):
    times = []
    for _ in range(calls):
        if sleep_s:
            time.sleep(sleep_s)
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e6)
        torch.cuda.synchronize()
    return round(statistics.median(times), 1)
result = {"cpu": cpu}
if sys.argv[2] != "none":
    result["warm_ms"], _ = session()
for _ in range(50):
    call()
torch.cuda.synchronize()
calls = int(sys.argv[1])
result["loop_us"] = host_times(calls, 0)
result["slept_us"] = host_times(calls // 2, 0.001)
result["census_ms"], result["census_kernels"] = session()
result["loop_after_census_us"] = host_times(calls, 0)
print(json.dumps(result), flush=True)
"""


def run(variant: str, calls: int) -> dict:
    env = dict(os.environ)
    env.pop("TEARDOWN_CUPTI", None)
    if variant == "warm_teardown":
        env["TEARDOWN_CUPTI"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(calls), variant],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"error": done.stderr[-2000:]}
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json")
    args = parser.parse_args()
    results: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for _ in range(args.processes):  # interleaved: a drift of the machine hits every variant
        for variant in VARIANTS:
            results[variant].append(run(variant, args.calls))
    keys = ("loop_us", "slept_us", "census_ms", "loop_after_census_us", "warm_ms")
    for variant, rows in results.items():
        good = [r for r in rows if "error" not in r]
        if len(good) < len(rows):
            print(f"{variant}: {len(rows) - len(good)} failed: {rows[0].get('error', '')[-500:]}")
        parts = []
        for key in keys:
            values = [r[key] for r in good if key in r]
            if values:
                parts.append(
                    f"{key} {statistics.median(values):.1f} [{min(values):.1f}-{max(values):.1f}]"
                )
        print(f"{variant:<14} " + "  ".join(parts))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()
