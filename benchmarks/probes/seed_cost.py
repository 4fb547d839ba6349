"""What a judge pays to seed torch before it makes an input, with and without the queued seeds
of device kinds the host lacks (judge/seeding.py).

    python benchmarks/probes/seed_cost.py [--depth 40] [--calls 2000]

No GPU needed; on a GPU host the CUDA kind is present and only XPU's and MTIA's seeds are
skipped. Each reading is the median of `--calls` seedings made `--depth` Python frames down (a
batch judge makes its inputs about that deep), three seedings an input as a KernelBench
problem's inputs take (the judge's, then its weights' and inputs'): torch's own
`torch.manual_seed` in a fresh process, then the judge's `seed_everything` in another.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

MEASURE = """
import json, statistics, sys, time
import torch
sys.path.insert(0, {repo!r})
from pytest_kernelboard.judge.seeding import seed_everything, _without_absent_device_seeds

seed = seed_everything if {judge!r} else torch.manual_seed

def an_input(index):
    seed(index)
    torch.manual_seed(index + 1)
    torch.manual_seed(index + 2)

def deep(frames, calls):
    if frames:
        return deep(frames - 1, calls)
    times = []
    for index in range(calls):
        started = time.perf_counter()
        an_input(index)
        times.append((time.perf_counter() - started) * 1e6)
    return times

times = deep({depth}, {calls})
skipped = _without_absent_device_seeds() if {judge!r} else []
print(json.dumps({{"median_us": statistics.median(times), "skipped": skipped}}))
"""


def measure(judge: bool, depth: int, calls: int) -> dict:
    code = MEASURE.format(repo=str(REPO), judge=judge, depth=depth, calls=calls)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=40)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    started = time.perf_counter()
    plain = measure(False, args.depth, args.calls)
    judged = measure(True, args.depth, args.calls)
    print(f"an input's three seedings, {args.depth} frames down, median of {args.calls}:")
    print(f"  torch.manual_seed each time:   {plain['median_us']:8.1f} us")
    print(
        f"  the judge's seeding:           {judged['median_us']:8.1f} us"
        f"  (no queued seed for: {', '.join(judged['skipped']) or 'none'})"
    )
    print(f"  saved an input: {plain['median_us'] - judged['median_us']:.1f} us")
    print(f"({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
