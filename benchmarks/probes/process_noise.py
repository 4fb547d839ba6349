"""How much a launch-bound call's host time moves from one process to the next on this machine.

    python benchmarks/probes/process_noise.py [--processes 8] [--calls 300] [--cpus 2,10] [--modes] [--gaps MS]

Starts the same small program in fresh processes, one after another: each times `--calls`
calls of a five-launch PyTorch module (a GEMM and its epilogue, KernelBench level-2 sized) by
the host clock around the call, and prints its median. Then the same pinned to each CPU of
`--cpus` (sched_setaffinity). If the medians of unpinned processes spread far more than those
of pinned ones, a judge that pins its timed worker would rank host-bound calls more
reproducibly; if pinned ones spread as much, the spread belongs to the process itself.

`--ring` tells the process from the clock: two processes stay alive and take turns, each
timing `--calls` calls per turn. If each keeps its own level turn after turn, the host time
belongs to the process (its memory layout, its threads); if both move together, to the time.
Each turn also gives the call's median thread CPU time and the steal time the machine saw: a
slow turn whose CPU time stays low waited (for the hypervisor, say); one whose CPU time grew
with it ran slower.
`--cpus -2` moves the timing thread to the next CPU before each call: if the CPUs differ from
one moment to the next, every process then sees all of them, and the medians draw together.
`--per-cpu K` (GPU) keeps one process and moves it to each CPU in turn, K sweeps, printing each
CPU's median: slow CPUs that stay slow across sweeps point at the machine, not the process.
`--fixed-layout` starts every process with address randomisation off and one hash seed: if the
per-process spread then vanishes, it came from where the process's memory landed.

`--modes` (GPU) instead times the call's host time in each process three ways, interleaved:
alone; after the judge's L2 flush; after the flush with the stream held by the blocking
kernel (worker/blocking.py), as a timed call runs. A host time that grows under the blocking
kernel is time the harness adds to a host-bound call.

`--gaps MS` (GPU) times the blocked call (flush, blocking kernel, call) in each process after
what comes before a judged call: nothing (a loop), MS of sleep, MS of busy waiting, MS of
touching 32 MiB of host memory, and an untimed warm call followed by MS of sleep or of busy
waiting (or of sleep, then the worker's 2 ms GPU wake spin, waited for), interleaved, each process on its fastest CPU (worker/cpu_choice.py). If the sleeps
read far above the loop and the busy waits near it, an idle CPU between the calls is what
makes a judged host-bound call slow; if the memory touch does, it is the cache.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# The call every program times: a GEMM and its epilogue, five launches, KernelBench level-2 sized.
MODULE = r"""
import torch
import torch.nn.functional as F
device = "cuda" if torch.cuda.is_available() else "cpu"
lin = torch.nn.Linear(1024, 512).to(device)
x = torch.randn(128, 1024, device=device)
def call():
    return F.leaky_relu(lin(x) * 0.5, 0.1).clamp(-1.0, 1.0)
"""

PROGRAM = (
    r"""
import json, os, statistics, sys, time
cpu = int(sys.argv[2])
allowed = sorted(os.sched_getaffinity(0))
if cpu >= 0:
    os.sched_setaffinity(0, {cpu})
"""
    + MODULE
    + r"""
for _ in range(50):
    call()
if device == "cuda":
    torch.cuda.synchronize()
def window():
    times, cpu_times, by_cpu = [], [], {}
    for i in range(int(sys.argv[1])):
        if cpu == -2:  # rotate: each call on the next CPU (untimed move)
            os.sched_setaffinity(0, {allowed[i % len(allowed)]})
        cpu_started = time.thread_time_ns()
        started = time.perf_counter()
        call()
        took = (time.perf_counter() - started) * 1e6
        cpu_times.append((time.thread_time_ns() - cpu_started) / 1e3)
        times.append(took)
        by_cpu.setdefault(os.sched_getaffinity(0).pop() if cpu == -2 else cpu, []).append(took)
        if device == "cuda":
            torch.cuda.synchronize()
    per_cpu = {c: round(statistics.median(t), 1) for c, t in sorted(by_cpu.items())}
    print(json.dumps({"median_us": statistics.median(times), "per_cpu": per_cpu,
                      "cpu_median_us": statistics.median(cpu_times)}), flush=True)
if len(sys.argv) > 3:  # ring: one window per line read
    print("ready", flush=True)
    for _ in sys.stdin:
        window()
else:
    window()
"""
)

MODES = (
    MODULE
    + r"""
import json, statistics, sys, time
from pytest_kernelboard.worker.blocking import StreamBlocker
flush = torch.zeros((64 << 20) // 8, dtype=torch.int64, device="cuda")
sink = torch.zeros((), dtype=torch.int64, device="cuda")
blocker = StreamBlocker(torch)
def call_no_grad():
    with torch.no_grad():
        return call()
times = {"alone": [], "flush": [], "blocked": []}
for i in range(int(sys.argv[1]) + 20):
    for mode in times:
        if mode != "alone":
            torch.sum(flush, dim=0, out=sink)
        if mode == "blocked":
            blocker.block()
        started = time.perf_counter()
        call_no_grad()
        took = (time.perf_counter() - started) * 1e6
        if mode == "blocked":
            blocker.release()
        torch.cuda.synchronize()
        if i >= 20:
            times[mode].append(took)
print(json.dumps({m: statistics.median(t) for m, t in times.items()}))
"""
)


GAPS = (
    MODULE
    + r"""
import json, os, statistics, sys, time
from pytest_kernelboard.worker.blocking import StreamBlocker
from pytest_kernelboard.worker import cpu_choice
cpu, _ = cpu_choice.choose_and_pin(cpu_choice.allowed_cpus())
flush = torch.zeros((64 << 20) // 8, dtype=torch.int64, device="cuda")
sink = torch.zeros((), dtype=torch.int64, device="cuda")
host = bytearray(32 << 20)
zeros = bytes(len(host))
blocker = StreamBlocker(torch)
gap = float(sys.argv[2]) / 1e3
def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def warm():
    with torch.no_grad():
        call()
    torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
for _ in range(3):
    start.record(); torch.cuda._sleep(1_000_000); end.record(); torch.cuda.synchronize()
cycles_per_us = 1_000_000 / (start.elapsed_time(end) * 1e3)
def wake():  # the worker's wake: a 2 ms GPU spin, waited for (worker/timing.py)
    torch.cuda._sleep(int(2000 * cycles_per_us))
    torch.cuda.synchronize()
before = {
    "loop": lambda: None,
    "sleep": lambda: time.sleep(gap),
    "busy": lambda: busy(gap),
    "touch": lambda: host.__setitem__(slice(None), zeros),
    "warm+sleep": lambda: (warm(), time.sleep(gap)),
    "warm+busy": lambda: (warm(), busy(gap)),
    "warm+sleep+wake": lambda: (warm(), time.sleep(gap), wake()),
}
times = {k: [] for k in before}
for i in range(int(sys.argv[1]) + 10):
    for mode, prepare in before.items():
        prepare()
        torch.sum(flush, dim=0, out=sink)
        blocker.block()
        started = time.perf_counter()
        with torch.no_grad():
            call()
        took = (time.perf_counter() - started) * 1e6
        blocker.release()
        torch.cuda.synchronize()
        if i >= 10:
            times[mode].append(took)
print(json.dumps({"cpu": cpu, **{m: statistics.median(t) for m, t in times.items()}}))
"""
)


def gaps(calls: int, processes: int, gap_ms: float) -> None:
    """Per process: the blocked call's host time after each kind of gap (see the module doc)."""
    rows = []
    for _ in range(processes):
        out = subprocess.run(
            [sys.executable, "-c", GAPS, str(calls), str(gap_ms)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        row = json.loads(out.strip().splitlines()[-1])
        rows.append(row)
        cpu = row.pop("cpu")
        print(f"CPU {cpu}: " + "  ".join(f"{mode} {us:6.1f}" for mode, us in row.items()))
    for mode in rows[0]:
        print(f"{mode:11s} {spread([row[mode] for row in rows])}")


FIXED_LAYOUT = ["setarch", "x86_64", "--addr-no-randomize"]


def one(calls: int, cpu: int, fixed_layout: bool = False) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": "0"} if fixed_layout else None
    out = subprocess.run(
        [
            *(FIXED_LAYOUT if fixed_layout else []),
            sys.executable,
            "-c",
            PROGRAM,
            str(calls),
            str(cpu),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def stolen_ticks() -> int:
    """The machine's steal time so far (/proc/stat, clock ticks): time a hypervisor ran
    something else while this machine's CPUs wanted to run."""
    with open("/proc/stat") as stat:
        return int(stat.readline().split()[8])


PER_CPU = (
    MODULE
    + r"""
import json, os, statistics, sys, time
rows = []
for sweep in range(int(sys.argv[2])):
    row = {}
    for cpu in sorted(os.sched_getaffinity(0)) if sweep == 0 else sorted(rows[0]):
        os.sched_setaffinity(0, {cpu})
        times = []
        for i in range(50 + int(sys.argv[1])):
            started = time.perf_counter()
            call()
            if i >= 50:
                times.append((time.perf_counter() - started) * 1e6)
            torch.cuda.synchronize()
        row[cpu] = statistics.median(times)
    rows.append(row)
    print(" ".join(f"{cpu}:{us:.0f}" for cpu, us in row.items()), flush=True)
"""
)


def per_cpu(calls: int, sweeps: int) -> None:
    """One process visits each CPU in turn, `sweeps` times: are some CPUs slow, and do they stay
    slow from one sweep to the next?"""
    subprocess.run([sys.executable, "-c", PER_CPU, str(calls), str(sweeps)], check=True)


def ring(calls: int, turns: int) -> None:
    """Two live processes take turns; one line per turn with both medians."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PROGRAM, str(calls), "-1", "ring"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    levels: list[list[float]] = [[], []]
    for turn in range(turns):
        line = f"turn {turn:2d}:"
        for i, proc in enumerate(procs):
            steal = stolen_ticks()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            reply = json.loads(proc.stdout.readline())
            levels[i].append(reply["median_us"])
            line += (
                f"  {'AB'[i]} {reply['median_us']:6.1f} us (thread CPU {reply['cpu_median_us']:6.1f},"
                f" steal {stolen_ticks() - steal} ticks)"
            )
        print(line)
    for proc in procs:
        proc.stdin.close()
        proc.wait()
    for name, series in zip("AB", levels, strict=True):
        print(f"process {name}: {spread(series)}")


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
    parser.add_argument("--ring", type=int, default=0, help="turns of two live processes")
    parser.add_argument("--fixed-layout", action="store_true", help="no ASLR, one hash seed")
    parser.add_argument("--per-cpu", type=int, default=0, help="sweeps over the CPUs (GPU)")
    parser.add_argument("--gaps", type=float, default=0, help="ms before each call (GPU)")
    args = parser.parse_args()
    if args.gaps:
        gaps(args.calls, args.processes, args.gaps)
        return
    if args.per_cpu:
        per_cpu(args.calls, args.per_cpu)
        return
    if args.modes:
        modes(args.calls, args.processes)
        return
    if args.ring:
        ring(args.calls, args.ring)
        return
    print(f"{os.cpu_count()} CPUs; this process may run on {sorted(os.sched_getaffinity(0))}")
    for cpu in [-1, *map(int, args.cpus.split(","))]:
        runs = [one(args.calls, cpu, args.fixed_layout) for _ in range(args.processes)]
        medians = [run["median_us"] for run in runs]
        where = {-1: "unpinned", -2: "each call on the next CPU"}.get(cpu, f"pinned to CPU {cpu}")
        if cpu == -2:
            for run in runs:
                print("  per CPU:", run["per_cpu"])
        where += ", fixed layout" if args.fixed_layout else ""
        print(f"{where:18s} {spread(medians)}  [{', '.join(f'{m:.1f}' for m in medians)}]")


if __name__ == "__main__":
    main()
