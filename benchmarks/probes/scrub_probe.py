"""Does device memory given back to the driver slow the kernels that run right after?

    python benchmarks/probes/scrub_probe.py [--n 16384] [--reps 4] [--sizes 0.5,1,2,4,8] [--no-wake]
    python benchmarks/probes/scrub_probe.py --judged K

(The two values a judged 16384² add reads: 363 or 403 µs on the H200. Its calls are judged
frugally: between two timed calls the judge and the worker give their cached memory back to
the driver, and take it again.)

Times `torch.add(a, b, out=c)` on fp16 N x N with CUDA events, the L2 flushed by a read
before it, at a delay after an event, then a 2 ms GPU spin waited for (as a worker wakes an
idle GPU before a timed call):
- `free S`   S GiB that torch held (written once) given back with empty_cache()
- `alloc S`  S GiB newly taken from the driver (torch.empty, nothing written)
- `none`     nothing: the baseline
Each line is one event and size: the call's time at each delay (µs), and how the driver's
free memory (cudaMemGetInfo) moved after the event: its value right after, the time it
stopped changing, its value then. If calls right after a free are slow and the slowness ends
when the driver's free memory settles, the driver clearing freed memory is the cause, and its
free memory tells when it is done. (It does not: on an H200 the driver's free memory showed
the whole release at once.)

`--judged K` instead judges the bundled vectoradd's 16384² case (1 GiB of inputs: judged
frugally) K times, each in a fresh worker, with the judge waiting for the scrubbing before each
timed call (channel/scrubbing.py) and, alternating, without: each line gives the case's ranking
statistic, its spread of calls and how long it waited.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

DELAYS_MS = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0)
WAKE_US = 2000  # as worker/timing.py


def spin_until(deadline: float) -> None:
    while time.perf_counter() < deadline:
        pass


def free_trajectory(settle_ms: float = 30.0) -> tuple[int, float, int]:
    """The driver's free bytes now, when they last changed within settle_ms (ms), and then."""
    start = time.perf_counter()
    first = last = torch.cuda.mem_get_info()[0]
    changed_at = 0.0
    while (now := time.perf_counter()) - start < settle_ms / 1e3:
        free = torch.cuda.mem_get_info()[0]
        if free != last:
            last, changed_at = free, (now - start) * 1e3
    return first, changed_at, last


def call_after(
    event: str, size: int, delay_ms: float, tensors, flush, sink, wake: bool = True
) -> float:
    a, b, c = tensors
    held = None
    if event == "free":
        held = torch.ones(size, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    if event == "free":
        held = None
        torch.cuda.empty_cache()
    elif event == "alloc":
        held = torch.empty(size, dtype=torch.uint8, device="cuda")
    spin_until(time.perf_counter() + delay_ms / 1e3)
    if wake:
        torch.cuda._sleep(int(WAKE_US * 1.98e3))  # the worker's wake spin (cycles at ~1.98 GHz)
        torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.sum(flush, dim=0, out=sink)
    start.record()
    torch.add(a, b, out=c)
    end.record()
    torch.cuda.synchronize()
    if held is not None:  # an allocation's own release is cleared before the next event
        del held
        torch.cuda.empty_cache()
        time.sleep(0.05)
    return start.elapsed_time(end) * 1e3


def judged(times: int) -> None:
    from pytest_kernelboard.channel import scrubbing
    from pytest_kernelboard.judge.core import SubmissionJudge
    from pytest_kernelboard.judge.measure import TimingPlan, default_flush_bytes
    from pytest_kernelboard.judge.reference_loader import LeaderboardModules
    from pytest_kernelboard.spec.cases import BENCHMARK, Case
    from pytest_kernelboard.spec.task import load_task
    from pytest_kernelboard.stats.scoring import rank_us
    from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
    from pytest_kernelboard.supervisor.pool import WorkerPool

    task = load_task(Path(__file__).parents[2] / "leaderboards" / "vectoradd" / "task.yml")
    index = next(i for i, spec in enumerate(task.benchmarks) if spec["size"] == 16384)
    case = Case(BENCHMARK, index, task.benchmarks[index])
    plan = TimingPlan(
        rule=StoppingRule(precision=0.01, min_samples=10, min_time_s=0.0, budget_s=20.0),
        warmup=Warmup(max_calls=3),
        flush_bytes=default_flush_bytes(),
    )
    submission = Path(tempfile.mkdtemp()) / "submission.py"
    submission.write_text(
        "import torch\n\ndef custom_kernel(data):\n    a, b, c = data\n"
        "    return torch.add(a, b, out=c)\n"
    )
    for run in range(2 * times):
        waits = run % 2 == 0
        scrubbing.QUEUE = scrubbing.ScrubQueue(scrubbing.SCRUB_BYTES_PER_S if waits else 1e30)
        judge = SubmissionJudge(
            task, LeaderboardModules(task), submission, use_cuda=True, pool=WorkerPool(spares=0)
        )
        try:
            outcome = judge.benchmark_case(case, 300.0, plan)
        finally:
            judge.close()
        timing = outcome.timing or {}
        samples = timing.get("samples_us") or [0.0]
        print(
            f"{'waits' if waits else 'no wait':8s} {outcome.status:7s} "
            f"rank {rank_us(timing) if timing else 0:8.2f} µs  calls {min(samples):7.1f} - "
            f"{max(samples):7.1f}  n {len(samples):3d}  waited "
            f"{timing.get('scrub_wait_ms', 0.0):6.1f} ms",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16384)
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--sizes", default="0.5,1,2,4,8")
    parser.add_argument("--no-wake", action="store_true", help="no GPU spin before the call")
    parser.add_argument("--judged", type=int, default=0, help="judge the 16384² case K times")
    args = parser.parse_args()
    if args.judged:
        judged(args.judged)
        return
    n = args.n
    tensors = [torch.empty(n, n, dtype=torch.float16, device="cuda") for _ in "abc"]
    tensors[0].normal_(), tensors[1].normal_()
    flush = torch.zeros(32 << 20, dtype=torch.int64, device="cuda")
    sink = torch.zeros((), dtype=torch.int64, device="cuda")
    for _ in range(5):  # warm: every kernel loaded, the clocks up
        call_after("none", 0, 0.0, tensors, flush, sink)
    sizes = [float(s) for s in args.sizes.split(",")]
    events = [("none", 0.0)] + [("free", s) for s in sizes] + [("alloc", max(sizes))]
    for event, size_gib in events:
        size = int(size_gib * (1 << 30))
        cells = []
        for delay in DELAYS_MS:
            times = [
                call_after(event, size, delay, tensors, flush, sink, not args.no_wake)
                for _ in range(args.reps)
            ]
            cells.append(f"{statistics.median(times):6.1f}/{max(times):5.1f}")
        print(f"{event:5s} {size_gib:4.1f} GiB  " + "  ".join(cells), flush=True)
    print("delays (ms):", " ".join(f"{d:g}" for d in DELAYS_MS), "; each cell: median/max µs")
    for size_gib in sizes:
        for _ in range(2):
            held = torch.ones(int(size_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
            before = torch.cuda.mem_get_info()[0]
            del held
            torch.cuda.empty_cache()
            first, changed_at, last = free_trajectory()
            print(
                f"free {size_gib:4.1f} GiB: driver free {before >> 20} MiB before, "
                f"{first >> 20} MiB right after, last change at {changed_at:.2f} ms "
                f"to {last >> 20} MiB",
                flush=True,
            )
            time.sleep(0.05)


if __name__ == "__main__":
    main()
