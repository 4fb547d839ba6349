"""Where does a timed call's device time go? A probe of the worker's timing sequence on a GPU.

    python benchmarks/timing_probe.py [--reps 300]

Part 1 times three calls (an fp16 add of a few microseconds, a 256 MiB copy, the empty call)
in this process with start/end events, under variants of what precedes the start event:
  bare          nothing: the events also see the host's launch latency
  write flush   a 2x L2 zero-fill (dirty lines stay in L2), then a GPU pre-roll
  read flush    a 2x L2 read (clean lines stay in L2), then a GPU pre-roll (the worker's method)
The pre-roll (torch.cuda._sleep) keeps the GPU busy until the call is queued.
Part 2 runs the add through the harness: the worker's time_call in this process, then a real
worker process fed through CUDA IPC the way the judge feeds it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch

PREROLL_US = 60.0
SUBMISSION = """
import torch


def custom_kernel(data):
    a, b, c = data
    torch.add(a, b, out=c)
    return c
"""


def spin_cycles_per_us() -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        start.record()
        torch.cuda._sleep(1_000_000)
        end.record()
        torch.cuda.synchronize()
    return 1_000_000 / (start.elapsed_time(end) * 1e3)


def timed(call, before, reps: int) -> float:
    """Median device time of `call` between events, `before()` enqueued ahead of the start."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        torch.cuda.synchronize()
        before()
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3)
    return statistics.median(samples[reps // 10 :])


def in_process(reps: int) -> tuple:
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush_bytes = max(2 * l2, 64 << 20)
    dirty = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    clean = torch.zeros(flush_bytes // 8, dtype=torch.int64, device="cuda")
    sink = torch.zeros((), dtype=torch.int64, device="cuda")
    preroll = int(PREROLL_US * spin_cycles_per_us())
    a, b = (torch.randn(2048, 2048, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty_like(a)
    x = torch.randn(64 << 20, device="cuda")
    y = torch.empty_like(x)
    calls = {
        "add 2048^2 fp16": lambda: torch.add(a, b, out=c),
        "copy 256 MiB": lambda: torch.neg(x, out=y),
        "empty": lambda: None,
    }
    variants = {
        "bare": lambda: None,
        "write flush": lambda: (dirty.zero_(), torch.cuda._sleep(preroll)),
        "read flush": lambda: (
            torch.sum(clean, dim=0, out=sink),
            torch.cuda._sleep(preroll),
        ),
    }
    print(
        f"{torch.cuda.get_device_name()}: flush {flush_bytes >> 20} MiB, pre-roll {PREROLL_US} us"
    )
    print(f"{'call':<18}" + "".join(f"{v:>13}" for v in variants) + "   (median device us)")
    for name, call in calls.items():
        row = []
        for before in variants.values():
            timed(call, before, 20)
            row.append(timed(call, before, reps))
        print(f"{name:<18}" + "".join(f"{t:>13.2f}" for t in row))
    return a, b, c, flush_bytes


def through_harness(a, b, c, flush_bytes: int, reps: int) -> None:
    from pytest_kernelboard.worker.client import WorkerProcess
    from pytest_kernelboard.worker.main import Worker

    stage = Path(tempfile.mkdtemp(prefix="kb-probe-"))
    (stage / "probe_submission.py").write_text(SUBMISSION)
    local = Worker(conn=None)
    local.load(str(stage), "probe_submission")
    for preroll_us in (0.0, PREROLL_US):
        replies = [local.time_call((a, b, c), flush_bytes, preroll_us) for _ in range(reps)]
        print(
            f"time_call in process, pre-roll {preroll_us:g} us: device "
            f"{statistics.median(r['device_us'] for r in replies):.2f} us, host dispatch "
            f"{statistics.median(r['dispatch_us'] for r in replies):.1f} us"
        )
    worker = WorkerProcess()
    worker.ping()
    worker.load(stage, "probe_submission", 60)
    device = []
    for _ in range(reps):
        data = tuple(t.clone() for t in (a, b, c))
        torch.cuda.synchronize()
        reply = worker.request(
            "time", 30, data=data, flush_bytes=flush_bytes, preroll_us=PREROLL_US
        ).payload
        device.append(reply["device_us"])
    print(
        f"worker process over IPC, pre-roll {PREROLL_US:g} us: device "
        f"{statistics.median(device):.2f} us"
    )
    worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args()
    through_harness(*in_process(args.reps), args.reps)


if __name__ == "__main__":
    main()
