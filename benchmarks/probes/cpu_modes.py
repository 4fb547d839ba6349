"""Does one CPU run the same interpreter work at one speed, and what moves it?

    python benchmarks/probes/cpu_modes.py [--cpu T] [--forks 16] [--rounds 2]

No GPU needed. Two measurements, each on CPU T (default: the last this process may use):

- `spinners`: the median time of a small piece of interpreter work (the probe a worker uses to
  choose its CPU, channel/cpu_probe.py) with every other CPU idle, then while one process spins
  on each other CPU in turn, `--rounds` times. A spinner that slows T about 2x shares its
  physical core (which a virtual machine need not show in its topology); one that speeds it
  up shows that T's speed depends on how busy the rest of the host is.
- `forks`: `--forks` children forked one after another, as a zygote forks workers, each timing
  the probe and a small PyTorch CPU call (a 64 x 64 GEMM and its epilogue: the dispatcher's
  host path, as a launch-bound GPU call's) twice, 50 ms apart. If a child's two readings agree
  while children differ, the speed belongs to the moment or the process, not the call.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pytest_kernelboard.channel.cpu_probe import _probe_work  # noqa: E402


def median_us(work, calls: int = 2000) -> float:
    for _ in range(50):
        work()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _spin(cpu: int, stop) -> None:
    os.sched_setaffinity(0, {cpu})
    while not stop.is_set():
        pass


def spinners(cpu: int, allowed: frozenset[int], rounds: int) -> list[dict]:
    """The probe on `cpu` alone, and with a spinner on each other CPU of `allowed`, by round."""
    others = sorted(allowed - {cpu})
    os.sched_setaffinity(0, {cpu})
    found = []
    for _ in range(rounds):
        alone = median_us(_probe_work)
        ratios = {}
        for other in others:
            stop = multiprocessing.Event()
            spinner = multiprocessing.Process(target=_spin, args=(other, stop))
            spinner.start()
            time.sleep(0.05)
            ratios[other] = round(median_us(_probe_work) / alone, 3)
            stop.set()
            spinner.join()
        found.append({"alone_us": round(alone, 2), "with_spinner_on": ratios})
    return found


def forks(cpu: int, children: int) -> list[dict]:
    """Each forked child's readings of the probe and of a small PyTorch call, twice."""
    import torch

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {cpu})
    x, w = torch.randn(64, 64), torch.randn(64, 64)

    def call():
        return torch.nn.functional.leaky_relu(torch.mm(x, w) * 0.5, 0.1).clamp(-1.0, 1.0)

    found = []
    for _ in range(children):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            first = (median_us(call, 400), median_us(_probe_work, 400))
            time.sleep(0.05)
            second = (median_us(call, 400), median_us(_probe_work, 400))
            os.write(write_end, json.dumps([first, second]).encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as reply:
            first, second = json.loads(reply.read())
        os.waitpid(pid, 0)
        found.append(
            {
                "torch_us": [round(first[0], 2), round(second[0], 2)],
                "probe_us": [round(first[1], 2), round(second[1], 2)],
            }
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--forks", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    allowed = frozenset(os.sched_getaffinity(0))
    cpu = max(allowed) if args.cpu is None else args.cpu
    result = {
        "cpu": cpu,
        "spinners": spinners(cpu, allowed, args.rounds),
        "forks": forks(cpu, args.forks),
    }
    for index, found in enumerate(result["spinners"]):
        print(
            f"round {index}: CPU {cpu} alone {found['alone_us']:.2f} µs; with a spinner on "
            + " ".join(f"{other}:{ratio:.2f}" for other, ratio in found["with_spinner_on"].items())
        )
    for child in result["forks"]:
        print(
            "child: torch {:.2f} {:.2f} µs   probe {:.2f} {:.2f} µs".format(
                *child["torch_us"], *child["probe_us"]
            )
        )
    firsts = [child["probe_us"][0] for child in result["forks"]]
    print(f"probe, children's first readings: max / min {max(firsts) / min(firsts):.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
