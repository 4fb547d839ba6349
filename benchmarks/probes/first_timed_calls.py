"""What a fresh worker's first timed calls cost before its first real one, step by step.

    python benchmarks/probes/first_timed_calls.py [--repeat 3] [--order blocker,flush,spin]
        [--out F.json]

Each repeat is a fresh Python, as a candidate's fresh worker is: torch imported, the CUDA
context made, cuBLAS set up and the blocking kernel compiled ahead (as a worker starts), then
the worker's own timing code (worker/timing.py, Timer) step by step, each step ended by a device
synchronise so each line is its whole cost:

- `blocker`: the stream blocker made (pinned flag, its kernel loaded and run once)
- `small sum`: the flush's sum over 1 MiB (its kernel loaded, no large allocation)
- `flush`: the flush buffer (twice the L2) allocated and read once by the flush's sum
- `spin`: the GPU spin rate measured (five spins of a million cycles)
- `first empty call`: one empty call timed as a real one
- `calibrate 2` / `calibrate 30`: the calibration with 2 and 30 empty calls of each kind

`--order` sets which of the first four come first (each is also paid by the first empty call
or calibration where it has not been done). What a fresh worker pays in its first calibration,
inside a batch's exclusive turn, is the sum of the steps up to `calibrate 2`; the rest is what
each further empty call costs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
steps = {}
t0 = time.perf_counter()
import torch
torch.zeros(1, device="cuda")
from pytest_kernelboard.worker.libraries import warm_blas
from pytest_kernelboard.worker.timing import Timer, _empty
from pytest_kernelboard.judge.measure import default_flush_bytes
warm_blas(torch)
timer = Timer(torch, True)
timer.prepare()
steps["start (context, cuBLAS, compile ahead)"] = time.perf_counter() - t0
flush_bytes = default_flush_bytes()

def step(name, action):
    t0 = time.perf_counter()
    action()
    torch.cuda.synchronize()
    steps[name] = time.perf_counter() - t0

def flush():
    timer.flush_buffer = torch.zeros(flush_bytes // 8, dtype=torch.int64, device="cuda")
    timer.flush_sink = torch.zeros((), dtype=torch.int64, device="cuda")
    timer.events = (timer.event(), timer.event())
    torch.sum(timer.flush_buffer, dim=0, out=timer.flush_sink)

def small_sum():
    small = torch.zeros(1 << 17, dtype=torch.int64, device="cuda")
    torch.sum(small, dim=0, out=torch.zeros((), dtype=torch.int64, device="cuda"))

actions = {
    "blocker": timer._blocker,
    "small_sum": small_sum,
    "flush": flush,
    "spin": timer.spin_cycles_per_us,
}
for name in sys.argv[2].split(","):
    step(name, actions[name])
step("first empty call", lambda: timer.time_call(_empty, None, flush_bytes))
step("calibrate 2", lambda: timer.calibrate(flush_bytes, 30.0, 2))
step("calibrate 30", lambda: timer.calibrate(flush_bytes, 30.0, 30))
print(json.dumps({k: round(v * 1e3, 2) for k, v in steps.items()}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes")
    parser.add_argument("--order", default="blocker,small_sum,flush,spin")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(REPO), args.order],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    print(f"milliseconds per step, median of {len(runs)} fresh processes (each run's in brackets)")
    for name in runs[0]:
        each = [r[name] for r in runs]
        print(f"  {name:40s} {statistics.median(each):9.2f}  {each}")
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
