"""`kernelboard runner-labels`: the labels a self-hosted runner on this host registers with.

A job for device `H200x2` asks for the label `h200x2` (pr/gate.py); a host announces one label
per GPU count it can serve (h200, h200x2, ..., h200x<its GPUs>), so a multi-GPU leaderboard
only reaches runners with enough GPUs, and an 8-GPU host can still take a 2-GPU job.
"""

from __future__ import annotations

import argparse

from ..judge import devices
from .gate import RUNNER_POOL_LABEL, runner_label


def labels(name: str, gpus: int) -> list[str]:
    """['kernelboard', 'h200', 'h200x2'] for a host with two H200s."""
    return [RUNNER_POOL_LABEL, *(runner_label(d) for d in devices.host_device_labels(name, gpus))]


def run(args: argparse.Namespace) -> int:
    name = args.device or devices.device_name()
    gpus = args.gpus if args.gpus is not None else devices.environment()["gpu_count"]
    if name == devices.CPU or gpus < 1:
        print("no GPU visible: this host cannot be a kernelboard GPU runner")
        return 1
    print(",".join(labels(name, gpus)))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "runner-labels",
        help="print the runner labels for this host's GPUs (for ./config.sh --labels)",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument("--device", help="device name instead of the detected one, e.g. H200")
    parser.add_argument("--gpus", type=int, help="GPU count instead of the visible GPUs")
    parser.set_defaults(func=run)
