"""What the worker sandbox costs: worker start-up and per-request round trip, with and without.

    python benchmarks/sandbox_cost.py [--starts 5] [--requests 300]

Start-up is from spawning the worker to its first reply (Python and torch imported). The round
trip is an empty request (`ping`), a `call` of the identity kernel on a small tensor (CPU, or
the GPU when there is one: that includes the CUDA tensor transport the worker chose), and the
same call on a 64 MiB tensor (the transport's copies both ways).
Prints a table; medians, with the 10th-90th percentile range.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    low = ordered[int(0.1 * (len(ordered) - 1))]
    high = ordered[int(0.9 * (len(ordered) - 1))]
    return f"{statistics.median(ordered):10.1f} [{low:.1f}-{high:.1f}]"


def measure(sandboxed: bool, starts: int, requests: int) -> dict[str, list[float]]:
    import torch

    from pytest_kernelboard.supervisor.client import WorkerProcess

    device = "cuda" if torch.cuda.is_available() else "cpu"
    stage = Path(tempfile.mkdtemp(prefix="kb-cost-"))
    (stage / "identity.py").write_text("def custom_kernel(data):\n    return data\n")
    data = torch.arange(1024, dtype=torch.float32, device=device)
    big = torch.randn(16 << 20, device=device)  # 64 MiB
    transport = None
    result: dict[str, list[float]] = {"start_ms": [], "ping_us": [], "call_us": [], "big_us": []}
    for index in range(starts):
        started = time.perf_counter()
        worker = WorkerProcess(sandboxed=sandboxed)
        worker.ping()
        result["start_ms"].append((time.perf_counter() - started) * 1e3)
        if index == 0:
            worker.load(stage, "identity", 60.0)
            for _ in range(20):  # warm: first shares, first CUDA IPC handles
                worker.request("call", 30.0, data=data)
            for _ in range(requests):
                result["ping_us"].append(worker.request("ping", 30.0).outside_us)
            for _ in range(requests):
                result["call_us"].append(worker.request("call", 30.0, data=data).outside_us)
            for _ in range(requests // 10):
                result["big_us"].append(worker.request("call", 30.0, data=big).outside_us)
            transport = worker.transport
        worker.close()
    print(f"{'sandboxed' if sandboxed else 'plain'}: CUDA tensors crossed by {transport}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    from pytest_kernelboard.supervisor import sandbox

    reason = sandbox.probe()
    rows = [("plain", measure(False, args.starts, args.requests))]
    if reason is None:
        rows.append(("sandboxed", measure(True, args.starts, args.requests)))
    print(f"{'worker':<10} {'start-up ms':>24} {'ping us':>24} {'call us':>24} {'64 MiB us':>24}")
    for name, r in rows:
        print(
            f"{name:<10} {percentiles(r['start_ms']):>24} {percentiles(r['ping_us']):>24} "
            f"{percentiles(r['call_us']):>24} {percentiles(r['big_us']):>24}"
        )
    if reason is not None:
        print(f"no sandboxed row: {reason}")


if __name__ == "__main__":
    main()
