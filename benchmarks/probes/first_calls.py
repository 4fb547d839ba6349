"""What a fresh worker's first calls of a KernelBench problem cost, step by step.

    python benchmarks/probes/first_calls.py PROBLEM.py [--warm none,cublas,small] [--out F.json]

Each variant runs in a fresh Python process, as a candidate's fresh worker does: import torch,
make the CUDA context, then (the variant) warm nothing, cuBLAS (one 8 x 8 matmul), the
problem's own model at 1/64 of its size, or the torch profiler (as a worker that takes kernel
censuses warms it as it starts); then the judge's path for a KernelBench leaderboard:
three correctness cases at 1/64 of the size (input made, model built, called), the full-size
case (input, build, call), and the full-size call again. Every step ends with a device
synchronise, so each line is that step's whole cost.

With --churners N, N other processes start and end with a CUDA context each, one after
another, meanwhile: as a batch's fresh workers start beside the candidates whose calls are made.

If the first full-size call costs far more than the second, a fresh worker loads kernels and
allocates memory lazily inside its first calls; what a warm-up moves out of them says what a
spare worker could do before it holds a candidate.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import importlib.util, json, sys, time
started = time.perf_counter()
steps = {}
def step(name, t0):
    torch.cuda.synchronize()
    steps[name] = round(time.perf_counter() - t0, 4)
t0 = time.perf_counter()
import torch
steps["import torch"] = round(time.perf_counter() - t0, 4)
t0 = time.perf_counter()
torch.empty(1, device="cuda")
step("CUDA context", t0)
sys.path.insert(0, sys.argv[3])
from pytest_kernelboard.importers import kernelbench_utils as kb
spec = importlib.util.spec_from_file_location("problem", sys.argv[1])
problem = importlib.util.module_from_spec(spec)
sys.modules["problem"] = problem
spec.loader.exec_module(problem)
warm = sys.argv[2]
t0 = time.perf_counter()
if warm == "cublas":
    a = torch.ones(8, 8, device="cuda")
    (a @ a).sum().item()
elif warm == "small":
    kb.model_kernel(problem.Model)(kb.make_input(problem, 99, 98, 64))
elif warm == "profiler":  # as a worker that takes kernel censuses starts
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts):
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
step("warm-up " + warm, t0)
kernel = kb.model_kernel(problem.Model)
for index, scale in enumerate((64, 64, 64, 1, 1)):
    label = f"case {index} (1/{scale})" if scale > 1 else f"case {index} (full size)"
    t0 = time.perf_counter()
    data = kb.make_input(problem, 1000 + index, 7, scale)
    step(label + " input", t0)
    t0 = time.perf_counter()
    kernel(data)
    step(label + " build and call", t0)
steps["peak MiB"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
print(json.dumps(steps))
"""


CHURN = "import torch; torch.zeros(1, device='cuda')"  # a CUDA context made and torn down


def run(problem: Path, warm: str, churners: int = 0) -> dict:
    """One fresh process's steps; `churners` other processes meanwhile start and end with a
    CUDA context each, one after another, as a batch's fresh workers do beside a judged one."""
    done = threading.Event()

    def churn() -> None:
        while not done.is_set():
            subprocess.run([sys.executable, "-c", CHURN], check=False)

    threads = [threading.Thread(target=churn, daemon=True) for _ in range(churners)]
    for thread in threads:
        thread.start()
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(problem), warm, str(REPO)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        done.set()
        for thread in threads:
            thread.join()
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path, help="a KernelBench problem file")
    parser.add_argument("--warm", default="none,cublas,small,profiler")
    parser.add_argument("--repeat", type=int, default=2, help="fresh processes per variant")
    parser.add_argument(
        "--churners", default="0", help="comma-separated: processes making CUDA contexts beside"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {}
    for churners in map(int, args.churners.split(",")):
        for warm in args.warm.split(","):
            label = f"warm={warm} churners={churners}"
            results[label] = [run(args.problem, warm, churners) for _ in range(args.repeat)]
            for each in results[label]:
                print(f"{label}: " + ", ".join(f"{k} {v}" for k, v in each.items()), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
