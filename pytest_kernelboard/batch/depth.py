"""How many candidates a GPU's judge prepares ahead of the one it times, alone or beside others.

A candidate's worker start, import and correctness calls made ahead all run while the one before
it is judged. A judge process beside other GPUs' judges keeps one fewer: a fresh process's CUDA
start is slower while other processes start theirs on the host's other GPUs (2.3 s alone, 3.5 -
3.8 s four at once: benchmarks/probes/gpu_contention.py), so more workers starting at once only
start each later. On four H200s (40 copies of KernelBench L2 12 on all four) a fourth candidate
in flight per judge made a worker's start 3.1 s instead of 1.5 s and the batch 28.4 s instead of
25.7 s, though it cut the wait for the next candidate from 0.37 s to 0.15 s.
"""

import argparse

PREFETCH = 3  # candidates prepared ahead of the one being judged, by a judge alone on a host
IN_FLIGHT = 3  # candidates queued at each GPU's judge process beside others: the judged one too
MAX_IN_FLIGHT = 16  # what `--in-flight` accepts: each is a worker with a CUDA context


def in_flight_arg(text: str) -> int:
    """`kernelboard judge --in-flight K`: candidates each GPU's judge keeps in flight."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_IN_FLIGHT:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_IN_FLIGHT} candidates, got {text!r}")
    return value
