"""How soon NVML says a GPU is idle once another process's kernels have stopped; and whether a
tiny kernel's latency says the same at once.

    python benchmarks/probes/gpu_idle.py [--spin-s 1.0]
    python benchmarks/probes/gpu_idle.py --launch

A hanging candidate's correctness call holds its shared turn on the device until its timeout,
and no timed case may start meanwhile (batch/turns.py). Stopping its worker (SIGSTOP) to time
the next candidates would need to know that the stopped process left no kernel running: a
stopped process launches nothing new, but what it queued runs on. NVML's utilisation samples (`nvmlDeviceGetSamples`, GPU utilisation)
say, per sample, whether any kernel ran in the period before it. This probe starts a child that
spins the GPU for --spin-s seconds in 1 ms kernels, then sleeps, and reads the samples every
10 ms meanwhile: the period between samples, which clock their timestamps are on, how long
after the child's last kernel ended the first sample reading 0 came, and whether any sample
read 0 while the child's kernels ran. Then the same with the child stopped (SIGSTOP) in the
middle of one long kernel: the samples must go on reading busy until that kernel ends.

--launch asks whether a quicker test would do: how long a one-element kernel this process
launches takes to return while a child is idle, spins in 1 ms kernels, is stopped inside one
long kernel, or is stopped with thousands of 20 µs kernels queued. Kernels of two processes take
turns on the GPU, so the latency would jump whenever the child's work is on the GPU, by as much
as the GPU's time slice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_kernelboard.judge import devices  # noqa: E402

CHILD = r"""
import sys, time, torch
spin_s, long_ms = float(sys.argv[1]), float(sys.argv[2])
torch.cuda.init(); x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record(); torch.cuda._sleep(1_000_000); end.record(); torch.cuda.synchronize()
cycles_per_ms = 1_000_000 / start.elapsed_time(end)
print(f"ready {time.time()}", flush=True)
if long_ms > 0:
    torch.cuda._sleep(int(long_ms * cycles_per_ms))  # one long kernel; the parent stops us
    print(f"queued {time.time()}", flush=True)
    torch.cuda.synchronize()
    print(f"ended {time.time()}", flush=True)
else:
    began = time.time()
    while time.time() - began < spin_s:
        torch.cuda._sleep(int(cycles_per_ms)); torch.cuda.synchronize()
    print(f"ended {time.time()}", flush=True)
time.sleep(3)
"""


def samples(nvml, handle, since_us: int) -> list[tuple[int, int]]:
    try:
        _, values = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, since_us)
    except nvml.NVMLError:
        return []
    return [(int(s.timeStamp), int(s.sampleValue.uiVal)) for s in values]


def watch(child: subprocess.Popen, nvml, handle, stop_after_s: float | None) -> dict:
    seen: dict[int, int] = {}
    lines: dict[str, float] = {}
    last = 0
    stopped_at = None
    deadline = time.time() + 15
    os.set_blocking(child.stdout.fileno(), False)
    buffer = ""
    while time.time() < deadline and child.poll() is None:
        chunk = child.stdout.read() or b""
        buffer += chunk.decode()
        while "\n" in buffer:
            line, buffer = buffer.split("\n", 1)
            word, _, stamp = line.partition(" ")
            if stamp:
                lines[word] = float(stamp)
        if stop_after_s is not None and stopped_at is None and "queued" in lines:
            if time.time() - lines["queued"] >= stop_after_s:
                os.kill(child.pid, signal.SIGSTOP)
                stopped_at = time.time()
        for stamp, value in samples(nvml, handle, last):
            seen[stamp] = value
            last = max(last, stamp)
        if "ended" in lines and time.time() - lines["ended"] > 2.0:
            break
        if stopped_at is not None and time.time() - stopped_at > 4.0:
            break
        time.sleep(0.01)
    if stopped_at is not None:
        os.kill(child.pid, signal.SIGCONT)
    child.kill()
    stamps = sorted(seen)
    periods = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return {
        "lines": lines,
        "stopped_at": stopped_at,
        "samples": [(s / 1e6, seen[s]) for s in stamps],
        "median_period_ms": sorted(periods)[len(periods) // 2] / 1e3 if periods else None,
    }


PROBE = None  # a stream and a one-element tensor of this process's, made in launch_main
LAUNCH_CHILD = r"""
import sys, time, torch
mode = sys.argv[1]
torch.cuda.init(); x = torch.ones(1, device="cuda"); torch.cuda.synchronize()
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
start.record(); torch.cuda._sleep(1_000_000); end.record(); torch.cuda.synchronize()
cycles_per_ms = 1_000_000 / start.elapsed_time(end)
print("ready", flush=True)
if mode == "long":
    torch.cuda._sleep(int(1500 * cycles_per_ms))
elif mode == "queue":
    for _ in range(20000):
        torch.cuda._sleep(int(0.02 * cycles_per_ms))
elif mode == "spin":
    print("queued", flush=True)
    began = time.time()
    while time.time() - began < 2.0:
        torch.cuda._sleep(int(cycles_per_ms)); torch.cuda.synchronize()
print("queued", flush=True)
time.sleep(5)
"""


def probe_latency_s(limit_s: float) -> float | None:
    """Seconds from launching a one-element kernel on a stream of this process's own to its
    end; None when it has not ended within limit_s."""
    import torch

    stream, flag = PROBE
    done = torch.cuda.Event()
    started = time.perf_counter()
    with torch.cuda.stream(stream):
        flag.add_(1)
        done.record(stream)
    while not done.query():
        if time.perf_counter() - started > limit_s:
            return None
    return time.perf_counter() - started


def launch_latencies(mode: str, stop: bool, count: int, every_s: float) -> dict:
    """Latencies (µs; None: not back within 0.5 s) of `count` tiny kernels of this process,
    one every `every_s`, from the child's "queued" on (stopped then, where `stop`)."""
    child = subprocess.Popen([sys.executable, "-c", LAUNCH_CHILD, mode], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b"ready"
        assert child.stdout.readline().strip() == b"queued"
        if stop:
            os.kill(child.pid, signal.SIGSTOP)
        latencies = []
        for _ in range(count):
            took = probe_latency_s(0.5)
            latencies.append(None if took is None else round(took * 1e6, 1))
            time.sleep(every_s)
    finally:
        if stop:
            os.kill(child.pid, signal.SIGCONT)
        child.kill()
        child.wait()
    done = sorted(v for v in latencies if v is not None)
    return {
        "latencies_us": latencies,
        "min_us": done[0] if done else None,
        "median_us": done[len(done) // 2] if done else None,
        "max_us": done[-1] if done else None,
        "over_1ms": sum(v is None or v > 1000 for v in latencies),
    }


def launch_main(json_path: Path | None) -> None:
    import torch

    global PROBE
    PROBE = (torch.cuda.Stream(), torch.zeros(1, device="cuda"))
    torch.cuda.synchronize()
    results = {
        "idle": launch_latencies("idle", False, 200, 0.002),
        "spinning_1ms_kernels": launch_latencies("spin", False, 40, 0.02),
        "stopped_in_long_kernel": launch_latencies("long", True, 30, 0.05),
        "stopped_with_20000_queued": launch_latencies("queue", True, 40, 0.02),
    }
    for name, result in results.items():
        shown = {k: v for k, v in result.items() if k != "latencies_us"}
        print(f"{name}: {shown}; first ten {result['latencies_us'][:10]}")
    if json_path:
        json_path.write_text(json.dumps(results, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spin-s", type=float, default=1.0)
    parser.add_argument("--long-ms", type=float, default=1500.0)
    parser.add_argument("--launch", action="store_true", help="tiny kernels' latency instead")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.launch:
        launch_main(args.json)
        return
    device = devices.nvml_device(0)
    if device is None:
        raise SystemExit("NVML cannot see this process's cuda:0")
    nvml, handle = device
    print(f"time.time() now {time.time():.3f}; newest sample:", samples(nvml, handle, 0)[-1:])
    results = {}
    for name, long_ms, stop in (("spin", 0.0, None), ("stopped_in_long_kernel", args.long_ms, 0.2)):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(args.spin_s), str(long_ms)],
            stdout=subprocess.PIPE,
        )
        result = watch(child, nvml, handle, stop)
        results[name] = result
        ended = result["lines"].get("ended")
        ready = result["lines"].get("ready")
        busy_window = [
            (t, v) for t, v in result["samples"] if ready and ended and ready + 0.05 < t < ended
        ]
        zero_while_busy = sum(v == 0 for _, v in busy_window)
        after = [(t, v) for t, v in result["samples"] if ended and t > ended]
        first_zero = next((t - ended for t, v in after if v == 0), None)
        print(
            f"{name}: period {result['median_period_ms']} ms; samples while busy "
            f"{len(busy_window)} (reading 0: {zero_while_busy}); first 0 after the last kernel "
            f"ended: {None if first_zero is None else round(first_zero * 1e3, 1)} ms; "
            f"stopped at {result['stopped_at']}, lines {result['lines']}"
        )
        if name.startswith("stopped"):
            stop_at = result["stopped_at"] or 0
            window = [
                (round(t - stop_at, 3), v)
                for t, v in result["samples"]
                if stop_at - 0.3 < t < stop_at + 2.5
            ]
            print("  samples around the stop (s after it, util %):", window)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
