"""What a fresh worker costs, step by step, while other GPUs of the host start theirs too.

    python benchmarks/probes/worker_churn.py [--rounds 6] [--depth 3] [--isolate] [--pin]
                                             [--json OUT]

A batch judge gives every candidate a fresh worker forked from a zygote that imported torch,
a few at a time per GPU. On a 4-GPU host each GPU's judge judged at about half its lone rate,
and a fresh worker's start and first calls grew most. This probe does the same churn without
kernelboard: one zygote per GPU (CUDA_VISIBLE_DEVICES, torch imported, no CUDA context) forks
`--depth` children at once, `--rounds` times; each child times its own steps:

- `isolate` (with --isolate): new user, mount, PID, network, IPC and UTS namespaces and a tmpfs
  over /tmp, as a forked worker makes them (worker/isolation.py);
- `context`: the CUDA context (one element on the device);
- `blas`: cuBLAS's set-up (an 8 x 8 matmul, as worker/libraries.py does);
- `profiler`: torch's profiler started and stopped once (as a worker that takes kernel
  censuses starts it);
- `alloc`: 256 MiB allocated, written and synchronised;
- `gemm`: twenty 4096^2 fp32 matmuls, synchronised (the device's own work: the control);
- `exit`: from the child's last report to its parent's waitpid (the context torn down).

Configurations: one GPU, then every GPU at once. Where a step grows with the GPUs, that step
is what the host's GPUs share (its CPUs, the kernel, the driver); `gemm` should not grow.
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
STEPS = ("isolate", "context", "blas", "profiler", "alloc", "gemm", "exit")


def _child_steps(torch, isolate: bool) -> dict[str, float]:
    """In a forked child: each step's wall seconds."""
    seconds: dict[str, float] = {}

    def timed(name: str, action) -> None:
        started = time.perf_counter()
        action()
        seconds[name] = time.perf_counter() - started

    if isolate:
        from pytest_kernelboard.worker import isolation

        def isolate_now() -> None:
            isolation.unshare_namespaces()
            isolation.private_folders([Path("/tmp")], [], [], 1 << 26)

        timed("isolate", isolate_now)

    def context() -> None:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()

    def blas() -> None:
        a = torch.ones(8, 8, device="cuda")
        (a @ a).sum().item()

    def profiler() -> None:
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts):
            torch.zeros(1, device="cuda")
            torch.cuda.synchronize()

    def alloc() -> None:
        torch.empty(256 << 20, dtype=torch.uint8, device="cuda").fill_(1)
        torch.cuda.synchronize()

    def gemm() -> None:
        a = torch.randn(4096, 4096, device="cuda")
        for _ in range(20):
            a @ a
        torch.cuda.synchronize()

    for name, action in (
        ("context", context),
        ("blas", blas),
        ("profiler", profiler),
        ("alloc", alloc),
        ("gemm", gemm),
    ):
        timed(name, action)
    return seconds


def zygote(rounds: int, depth: int, isolate: bool) -> list[dict[str, float]]:
    """One GPU's zygote: torch imported, `depth` children forked at once, `rounds` times."""
    sys.path.insert(0, str(REPO))
    import torch

    results = []
    for _ in range(rounds):
        children = []
        for _ in range(depth):
            reader, writer = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(reader)
                try:
                    report = _child_steps(torch, isolate)
                except BaseException as exc:  # noqa: BLE001 - the probe reports any failure
                    report = {"error": repr(exc)}
                os.write(writer, json.dumps(report).encode())
                os._exit(0)
            os.close(writer)
            children.append((pid, reader))
        for pid, reader in children:
            with os.fdopen(reader, "rb") as pipe:
                report = json.loads(pipe.read() or b'{"error": "no report"}')
            reported = time.perf_counter()
            os.waitpid(pid, 0)
            report["exit"] = time.perf_counter() - reported
            results.append(report)
    return results


def run(gpus: list[int], args: argparse.Namespace) -> dict:
    """Every GPU's zygote at once; each child's steps, and the churn's wall time."""
    sys.path.insert(0, str(REPO))
    from pytest_kernelboard.judge.cpu_sets import allowed_cpus, pin_process, split_cpus

    sets = split_cpus(allowed_cpus(), len(gpus))
    command = [sys.executable, __file__, "--zygote", "--rounds", str(args.rounds)]
    command += ["--depth", str(args.depth)] + (["--isolate"] if args.isolate else [])
    started = time.perf_counter()
    processes = []
    for slot, gpu in enumerate(gpus):
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        if args.pin:
            pin_process(process.pid, sets[slot])
        processes.append(process)
    children = [json.loads(p.communicate()[0]) for p in processes]
    return {
        "gpus": gpus,
        "wall_s": time.perf_counter() - started,
        "children": children,  # per GPU, one report per child
    }


def summary(result: dict) -> str:
    reports = [r for per_gpu in result["children"] for r in per_gpu]
    errors = [r["error"] for r in reports if "error" in r]
    lines = [
        f"{len(result['gpus'])} GPU(s), {len(reports)} children, {result['wall_s']:.1f} s"
        + (f", {len(errors)} failed: {errors[0]}" if errors else "")
    ]
    for step in STEPS:
        values = [r[step] for r in reports if step in r]
        if values:
            lines.append(
                f"  {step:<9} median {statistics.median(values) * 1e3:8.1f} ms, "
                f"max {max(values) * 1e3:8.1f} ms"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--depth", type=int, default=3, help="children forked at once per GPU")
    parser.add_argument("--isolate", action="store_true", help="namespaces as a worker makes")
    parser.add_argument("--pin", action="store_true", help="each zygote on its share of CPUs")
    parser.add_argument("--json", type=Path, help="write every child's steps here")
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.zygote:
        print(json.dumps(zygote(args.rounds, args.depth, args.isolate)))
        return 0
    import torch

    results = []
    for gpus in ([0], list(range(torch.cuda.device_count()))):
        result = run(gpus, args)
        print(summary(result), flush=True)
        results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
