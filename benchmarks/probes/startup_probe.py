"""Where a judge's start-up goes, before its first candidate can be judged.

    python benchmarks/probes/startup_probe.py [--out FILE.json] [--counts 1,4,8,16] [--pools 1,4]

Each line, in seconds:
- `interpreter`, `import torch`, `import torch + CUDA context`, `import the batch judge`:
  each a fresh `python -c`, the median of three
- `first worker`: the judge's first worker until it answers (its zygote starts first: bwrap,
  Python, torch), with and without the profiler warmed as it starts (as the batch does in
  benchmark mode), then a second one from the zygote already up
- `N workers at once`: N workers asked for together from one zygote (as a batch judge's spares
  and the candidates it imports ahead are): when the first, the median and the last answered
- `P judges at once`: P judge processes on this GPU, each starting a zygote and 4 workers
  together (as P GPUs' judges of one batch do on one host): when each judge's first worker
  answered, and its last

If N workers at once take N times as long as one for the first of them, their starts contend
(CUDA contexts, the profiler) and the first candidate waits for all of them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

PING_TIMEOUT_S = 300.0


def fresh_python(code: str, runs: int = 3) -> float:
    """The median wall time of `python -c code` in a fresh process."""
    walls = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def workers_at_once(count: int, warm_timing: bool) -> list[float]:
    """Seconds until each of `count` workers, asked for together, answered (sorted)."""
    from pytest_kernelboard.supervisor.client import WorkerProcess

    started = time.perf_counter()
    workers = [WorkerProcess(warm_timing=warm_timing) for _ in range(count)]
    answered: list[float] = []
    lock = threading.Lock()

    def ping(worker: WorkerProcess) -> None:
        worker.ping(PING_TIMEOUT_S)
        with lock:
            answered.append(time.perf_counter() - started)

    threads = [threading.Thread(target=ping, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in workers:
        worker.close(timeout_s=5.0)
    return sorted(answered)


def spread(answered: list[float]) -> dict[str, float]:
    return {
        "first_s": round(answered[0], 3),
        "median_s": round(statistics.median(answered), 3),
        "last_s": round(answered[-1], 3),
    }


def one_judge(warm_timing: bool, count: int) -> None:
    """A judge process's start: its zygote and `count` workers at once (prints JSON)."""
    import torch

    started = time.perf_counter()
    if torch.cuda.is_available():  # the judge's own context, as a batch judge makes it
        torch.zeros(1, device="cuda")
    context_s = time.perf_counter() - started
    answered = workers_at_once(count, warm_timing)
    print(json.dumps({"context_s": round(context_s, 3), **spread(answered)}))


def judges_at_once(processes: int, count: int) -> list[dict[str, Any]]:
    """`processes` judge processes started together, each starting `count` workers."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from startup_probe import one_judge; "
        f"one_judge(True, {count})"
    )
    started = time.perf_counter()
    running = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(Path(__file__).parent)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    results = []
    for process in running:
        out, _ = process.communicate()
        line = json.loads(out.strip().splitlines()[-1])
        line["process_s"] = round(time.perf_counter() - started, 3)
        results.append(line)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--counts", default="1,4,8,16")
    parser.add_argument("--pools", default="1,4")
    args = parser.parse_args()
    import torch

    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU",
        "torch": torch.__version__,
    }
    result["fresh"] = {
        "interpreter": fresh_python("pass"),
        "import torch": fresh_python("import torch"),
        "import torch + CUDA context": fresh_python(
            "import torch; torch.zeros(1, device='cuda' if torch.cuda.is_available() else 'cpu')"
        ),
        "import the batch judge": fresh_python("import pytest_kernelboard.batch.judge"),
    }
    print(json.dumps(result["fresh"]), flush=True)
    if torch.cuda.is_available():
        torch.zeros(1, device="cuda")
    began = time.perf_counter()
    result["first worker (zygote starting), profiler warmed"] = spread(workers_at_once(1, True))
    result["first worker wall"] = round(time.perf_counter() - began, 3)
    result["next worker, profiler warmed"] = spread(workers_at_once(1, True))
    result["next worker, profiler not warmed"] = spread(workers_at_once(1, False))
    for count in (int(c) for c in args.counts.split(",")):
        for warm in (True, False):
            key = f"{count} workers at once, profiler {'warmed' if warm else 'not warmed'}"
            result[key] = spread(workers_at_once(count, warm))
            print(key, result[key], flush=True)
    for processes in (int(p) for p in args.pools.split(",")):
        key = f"{processes} judges at once, 4 workers each"
        result[key] = judges_at_once(processes, 4)
        print(key, result[key], flush=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
