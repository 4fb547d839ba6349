"""What the judge's NVML snapshot of a GPU costs, query by query.

    python benchmarks/probes/nvml_cost.py [--repeat 50]

A timed case reads the GPU's state before and after its calls (judge/devices.py, gpu_state:
clocks, temperature, power, throttle reasons) to flag a clock drop; a case timed in turns
(evaluation/paired.py) times twenty loops, each with its two snapshots. This times each query
gpu_state makes, and gpu_state itself, on cuda:0, as medians of `--repeat` reads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_kernelboard.judge import devices  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    device = devices.nvml_device(0)
    if device is None:
        raise SystemExit("no NVML handle for cuda:0")
    nvml, handle = device
    queries = {
        "clock sm": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
        "clock mem": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "max clock sm": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM),
        "max clock mem": lambda: nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "temperature": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
        "power": lambda: nvml.nvmlDeviceGetPowerUsage(handle),
        "throttle reasons": lambda: nvml.nvmlDeviceGetCurrentClocksEventReasons(handle),
        "gpu_state (all of them)": lambda: devices.gpu_state(0),
    }
    print(f"milliseconds a read, median of {args.repeat} (min - max)")
    for name, query in queries.items():
        took = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            query()
            took.append((time.perf_counter() - started) * 1e3)
        print(f"  {name:26s} {statistics.median(took):8.3f}  ({min(took):.3f} - {max(took):.3f})")


if __name__ == "__main__":
    main()
