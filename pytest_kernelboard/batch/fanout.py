"""Several GPUs of one host: one judge process per GPU, candidates handed out as each frees up.

Each process is `python -m pytest_kernelboard.batch.fanout GPU LEADERBOARD MODE ROOT
EXCESSIVE`, pinned to its GPU with CUDA_VISIBLE_DEVICES before torch starts; it reads one
candidate per line on stdin and writes one record per line on stdout. The parent keeps a few
candidates in flight per process (so each imports ahead) and yields records in the order given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from queue import Queue
from typing import Any

from .candidates import Candidate

IN_FLIGHT = 3  # candidates queued at each GPU's judge: the one judged and those imported ahead


def judge_on_gpus(
    leaderboard: str,
    candidates: Sequence[Candidate],
    mode: str,
    root: Path,
    gpus: Sequence[int],
    excessive_speedup: float,
    profile: bool = False,
) -> Iterator[dict[str, Any]]:
    done: Queue[tuple[int, int, dict[str, Any] | None]] = Queue()
    processes = []
    # GPU indices count within this process's own mask (Ray, a scheduler), if it has one.
    inherited = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    for gpu in gpus:
        physical = inherited[gpu] if gpu < len(inherited) else str(gpu)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": physical}
        process = subprocess.Popen(
            [sys.executable, "-m", __name__, leaderboard, mode, str(root), str(excessive_speedup)]
            + (["--profile"] if profile else []),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
            bufsize=1,
        )
        processes.append(process)
    assigned: list[list[int]] = [[] for _ in processes]  # candidate indices, in order sent

    def read(slot: int) -> None:
        for line in processes[slot].stdout:
            done.put((slot, assigned[slot].pop(0), json.loads(line)))
        done.put((slot, -1, None))  # the process ended

    def send(slot: int, index: int) -> None:
        assigned[slot].append(index)
        processes[slot].stdin.write(json.dumps(asdict(candidates[index])) + "\n")
        processes[slot].stdin.flush()

    readers = [threading.Thread(target=read, args=(s,), daemon=True) for s in range(len(gpus))]
    for reader in readers:
        reader.start()
    following = 0
    for slot in range(len(processes)):
        for _ in range(IN_FLIGHT):
            if following < len(candidates):
                send(slot, following)
                following += 1
    ready: dict[int, dict[str, Any]] = {}
    next_out, alive = 0, len(processes)
    try:
        while next_out < len(candidates):
            if alive == 0:
                raise RuntimeError("every GPU's judge process ended before the batch was done")
            slot, index, record = done.get()
            if record is None:
                alive -= 1
                continue
            ready[index] = record
            if following < len(candidates):
                send(slot, following)
                following += 1
            while next_out in ready:
                yield ready.pop(next_out)
                next_out += 1
    finally:
        for process in processes:
            process.stdin.close()
        for process in processes:
            process.wait()


def main(argv: list[str]) -> int:
    """One GPU's judge: candidates in on stdin, records out on stdout, as each is done.
    argv: LEADERBOARD MODE ROOT EXCESSIVE [--profile]"""
    from .judge import BatchJudge, find_task

    leaderboard, mode, root, excessive = argv[:4]
    task, root_path = find_task(leaderboard, Path(root))
    judge = BatchJudge(task, mode, root_path, float(excessive), profile="--profile" in argv)
    out = sys.stdout
    sys.stdout = sys.stderr  # anything else printed must not corrupt the record stream

    def incoming() -> Iterator[Candidate]:
        for line in sys.stdin:
            yield Candidate(**json.loads(line))

    try:
        for record in judge.judge(incoming()):
            out.write(json.dumps(record) + "\n")
            out.flush()
    finally:
        judge.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
