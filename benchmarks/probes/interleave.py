"""Would timing a host-bound candidate interleaved with the reference tie the same code?

    python benchmarks/probes/interleave.py [--pairs 12] [--calls 50] [--turns 25,5,1] [--gap-s 1]

No GPU needed. A host's CPUs change speed from one second to the next (cpu_modes.py), and a
batch times the reference once, at its start, and each candidate later, in one episode each:
two episodes of the same code then compare two moments. Here each of `--pairs` pairs of forked
processes runs the same small PyTorch CPU call (the dispatcher's host path, as a launch-bound
GPU call's), both on one CPU, two ways:

- `episodes`: process A times `--calls` calls, then, `--gap-s` later, process B does: the
  ratio of their medians, as a batch compares a candidate with its reference.
- `back_to_back`: the same with no gap, B right after A (a reference timed again right after
  each candidate).
- `turns_N`: A and B take turns, N calls each, until each has made `--calls`; the ratio of A's
  median to B's over the same seconds (N from `--turns`, default 25, 5 and 1).

The same code's ratio should read 1: the spread of ln(ratio) over the pairs says how far each
design's verdict on identical code moves.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time


def child(requests: int, replies: int, cpu: int) -> None:
    """Time the call `n` times on each request "n"; reply with the times (µs)."""
    import torch

    torch.set_num_threads(1)
    os.sched_setaffinity(0, {cpu})
    x, w = torch.randn(64, 64), torch.randn(64, 64)

    def call():
        return torch.nn.functional.leaky_relu(torch.mm(x, w) * 0.5, 0.1).clamp(-1.0, 1.0)

    for _ in range(50):
        call()
    with os.fdopen(requests) as inbox, os.fdopen(replies, "w") as outbox:
        for line in inbox:
            times = []
            for _ in range(int(line)):
                start = time.perf_counter()
                call()
                times.append((time.perf_counter() - start) * 1e6)
            outbox.write(json.dumps(times) + "\n")
            outbox.flush()


class Timed:
    """A forked process that times the call on request."""

    def __init__(self, cpu: int) -> None:
        to_child, self._inbox = os.pipe()
        self._outbox, from_child = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self._inbox)
            os.close(self._outbox)
            child(to_child, from_child, cpu)
            os._exit(0)
        os.close(to_child)
        os.close(from_child)
        self._send = os.fdopen(self._inbox, "w")
        self._read = os.fdopen(self._outbox)

    def time(self, calls: int) -> list[float]:
        self._send.write(f"{calls}\n")
        self._send.flush()
        return json.loads(self._read.readline())

    def close(self) -> None:
        self._send.close()
        self._read.close()
        os.waitpid(self.pid, 0)


def log_ratio(a_times: list[float], b_times: list[float]) -> float:
    return math.log(statistics.median(a_times) / statistics.median(b_times))


def one_pair(cpu: int, calls: int, turns: list[int], gap_s: float) -> dict[str, float]:
    first, second = Timed(cpu), Timed(cpu)
    found = {}
    try:
        a_times = first.time(calls)
        time.sleep(gap_s)
        found["episodes"] = log_ratio(a_times, second.time(calls))
        found["back_to_back"] = log_ratio(first.time(calls), second.time(calls))
        for size in turns:
            a_times, b_times = [], []
            while len(a_times) < calls:
                a_times += first.time(size)
                b_times += second.time(size)
            found[f"turns_{size}"] = log_ratio(a_times, b_times)
    finally:  # the second was forked holding the first's pipes: it goes first
        second.close()
        first.close()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--turns", default="25,5,1", help="calls a turn, for each design")
    parser.add_argument("--gap-s", type=float, default=1.0)
    parser.add_argument("--cpu", type=int, default=None)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    cpu = max(os.sched_getaffinity(0)) if args.cpu is None else args.cpu
    turns = [int(n) for n in args.turns.split(",")]
    pairs = [one_pair(cpu, args.calls, turns, args.gap_s) for _ in range(args.pairs)]
    for design in pairs[0]:
        logs = [pair[design] for pair in pairs]
        ratios = " ".join(f"{math.exp(v):.2f}" for v in logs)
        print(
            f"{design:<12} ratio of the same code: {ratios}\n"
            f"{'':<12} sd of ln {statistics.pstdev(logs):.3f}, "
            f"max |ln| {max(abs(v) for v in logs):.3f}"
        )
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"cpu": cpu, "pairs": pairs}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
