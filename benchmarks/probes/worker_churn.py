"""What a fresh worker costs, step by step, while other GPUs of the host start theirs too.

    python benchmarks/probes/worker_churn.py [--rounds 6] [--depth 3] [--pin] [--gpus SETS]
        [--profiler-activities cpu,cuda|cuda|autograd] [--cage all|own] [--json OUT]

A batch judge gives every candidate a fresh worker forked from a zygote that imported torch,
a few at a time per GPU. On a 4-GPU host each GPU's judge judged at about half its lone rate,
and a fresh worker's start and first calls grew most. This probe does the same churn without
kernelboard: one zygote per GPU (CUDA_VISIBLE_DEVICES, torch imported, no CUDA context) forks
`--depth` children at once, `--rounds` times; each child times its own steps:

- `cuinit`: the driver's start (cuInit and the device count, no context yet);
- `context`: the CUDA context (one element on the device);
- `blas`: cuBLAS's set-up (an 8 x 8 matmul, as worker/libraries.py does);
- `profiler`: torch's profiler started and stopped once (as a worker that takes kernel
  censuses starts it): torch.profiler.profile, or (`--profiler-activities autograd`) the
  session a worker opens (worker/census.py), which imports no compiler;
- `alloc`: 256 MiB allocated, written and synchronised;
- `gemm`: twenty 4096^2 fp32 matmuls, synchronised (the device's own work: the control);
- `exit`: from the child's last report to its parent's waitpid (the context torn down).

--cage runs each zygote under bubblewrap with every GPU's device node or (`own`) its own GPU's
alone: whether a worker's driver start waits on the other GPUs it can see. --gpus names the
GPU sets.
Every step reports its CPU seconds beside its wall seconds: a step whose wall time grows with
the GPUs while its CPU time does not waits for something of the host's.

Configurations: one GPU, then every GPU at once (or --gpus). Where a step grows with the GPUs,
that step is what the host's GPUs share (its CPUs, the kernel, the driver); `gemm` should not.
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
STEPS = ("cuinit", "context", "blas", "profiler", "alloc", "gemm", "exit")


def _child_steps(torch, profiler_activities: str) -> dict[str, float]:
    """In a forked child: each step's wall seconds, and its CPU seconds as `STEP_cpu`."""
    seconds: dict[str, float] = {}

    def timed(name: str, action) -> None:
        started, cpu = time.perf_counter(), time.process_time()
        action()
        seconds[name] = time.perf_counter() - started
        seconds[f"{name}_cpu"] = time.process_time() - cpu

    def cuinit() -> None:  # the driver's start (cuInit, the device count), no context yet
        torch.cuda.init()

    def context() -> None:
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()

    def blas() -> None:
        a = torch.ones(8, 8, device="cuda")
        (a @ a).sum().item()

    def profiler() -> None:
        kinds = {
            "cpu": torch.profiler.ProfilerActivity.CPU,
            "cuda": torch.profiler.ProfilerActivity.CUDA,
        }
        acts = [kinds[n] for n in profiler_activities.split(",") if n in kinds]
        if profiler_activities == "autograd":  # as a worker's census opens it (census.py)
            opened = torch.autograd.profiler.profile(use_device="cuda", use_kineto=True)
        else:
            opened = torch.profiler.profile(activities=acts)
        with opened:
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
        ("cuinit", cuinit),
        ("context", context),
        ("blas", blas),
        ("profiler", profiler),
        ("alloc", alloc),
        ("gemm", gemm),
    ):
        timed(name, action)
    return seconds


def zygote(rounds: int, depth: int, profiler_activities: str) -> list[dict[str, float]]:
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
                    report = _child_steps(torch, profiler_activities)
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


def _minor_numbers() -> list[int]:
    """Each GPU's device node number (/dev/nvidiaN), by NVML index."""
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
        return [
            pynvml.nvmlDeviceGetMinorNumber(pynvml.nvmlDeviceGetHandleByIndex(i))
            for i in range(count)
        ]
    finally:
        pynvml.nvmlShutdown()


def _caged(command: list[str], gpu: int, cage: str) -> tuple[list[str], dict[str, str]]:
    """The zygote under bubblewrap with a /dev of its own: every GPU's node (`all`) or only its
    own GPU's (`own`, CUDA then sees that one GPU as device 0)."""
    bwrap = os.environ.get("KERNELBOARD_BWRAP", "bwrap")
    nodes = [
        p
        for p in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
        if os.path.exists(p)
    ]
    if os.path.isdir("/dev/nvidia-caps"):
        nodes.append("/dev/nvidia-caps")
    minors = _minor_numbers()
    wanted = [minors[gpu]] if cage == "own" else minors
    nodes += [f"/dev/nvidia{m}" for m in wanted]
    wrapped = [bwrap, "--bind", "/", "/", "--dev", "/dev", "--bind", "/dev/shm", "/dev/shm"]
    for node in nodes:
        wrapped += ["--dev-bind", node, node]
    visible = "0" if cage == "own" else str(gpu)
    return wrapped + ["--"] + command, {"CUDA_VISIBLE_DEVICES": visible}


def run(gpus: list[int], args: argparse.Namespace) -> dict:
    """Every GPU's zygote at once; each child's steps, and the churn's wall time."""
    sys.path.insert(0, str(REPO))
    from pytest_kernelboard.judge.cpu_sets import allowed_cpus, pin_process, split_cpus

    sets = split_cpus(allowed_cpus(), len(gpus))
    command = [sys.executable, __file__, "--zygote", "--rounds", str(args.rounds)]
    command += ["--depth", str(args.depth), "--profiler-activities", args.profiler_activities]
    started = time.perf_counter()
    processes = []
    for slot, gpu in enumerate(gpus):
        started_as, visible = command, {"CUDA_VISIBLE_DEVICES": str(gpu)}
        if args.cage:
            started_as, visible = _caged(command, gpu, args.cage)
        env = {**os.environ, **visible}
        process = subprocess.Popen(started_as, env=env, stdout=subprocess.PIPE, text=True)
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
            cpu = [r[f"{step}_cpu"] for r in reports if f"{step}_cpu" in r]
            lines.append(
                f"  {step:<9} median {statistics.median(values) * 1e3:8.1f} ms, "
                f"max {max(values) * 1e3:8.1f} ms"
                + (f", CPU median {statistics.median(cpu) * 1e3:8.1f} ms" if cpu else "")
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--depth", type=int, default=3, help="children forked at once per GPU")
    parser.add_argument("--pin", action="store_true", help="each zygote on its share of CPUs")
    parser.add_argument("--json", type=Path, help="write every child's steps here")
    parser.add_argument(
        "--profiler-activities",
        default="cpu,cuda",
        help="torch.profiler.profile with cpu,cuda or cuda; 'autograd': the worker's session",
    )
    parser.add_argument(
        "--cage",
        choices=("all", "own"),
        help="each zygote under bwrap with every GPU's device node, or its own GPU's alone",
    )
    parser.add_argument("--gpus", default="", help="GPU sets, e.g. '0 0,1,2,3' (default: one, all)")
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.zygote:
        print(json.dumps(zygote(args.rounds, args.depth, args.profiler_activities)))
        return 0
    import torch

    results = []
    sets = [[int(g) for g in group.split(",")] for group in args.gpus.split()]
    for gpus in sets or ([0], list(range(torch.cuda.device_count()))):
        result = run(gpus, args)
        print(summary(result), flush=True)
        results.append(result)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
