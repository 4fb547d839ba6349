"""One GPU's judge process of a batch spread over a host's GPUs (fanout.py starts one per GPU):
candidates in on stdin, records out on stdout, as each is done, and this judge's share of the
reference's timing (reference_share.py)."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from queue import Queue
from typing import IO, Any

from ..supervisor import launch
from .candidates import Candidate
from .depth import IN_FLIGHT
from .judge import BatchJudge, find_task
from .reference_share import CANDIDATE, RECORD, REFERENCE, REFERENCE_WORKERS, ReferenceShare


def _route(lines: IO[str], candidates: Queue[Candidate | None], share: ReferenceShare) -> None:
    """The judge's stdin: candidates queue up for the judge, reference timings go to the share,
    whatever the judge is doing meanwhile."""
    try:
        for line in lines:
            message = json.loads(line)
            if message.get("type") == CANDIDATE:
                candidates.put(Candidate(**message["candidate"]))
            elif message.get("type") == REFERENCE:
                share.deliver(message)
    finally:
        candidates.put(None)
        share.deliver({"case": None, "error": "the batch ended before the reference was timed"})


def main(argv: list[str]) -> int:
    """One GPU's judge: candidates in on stdin, records out on stdout, as each is done.
    argv: LEADERBOARD MODE ROOT EXCESSIVE --share K/N [--candidate-workers W]
    [--reference-workers R] [--in-flight F] [--timing-cpu C] [--profile]"""
    leaderboard, mode, root, excessive = argv[:4]
    judge_index, judges = (int(n) for n in argv[argv.index("--share") + 1].split("/"))

    def count(flag: str, default: int) -> int:
        return int(argv[argv.index(flag) + 1]) if flag in argv else default

    workers = count("--candidate-workers", 1)
    reference_workers = count("--reference-workers", REFERENCE_WORKERS)
    in_flight = count("--in-flight", IN_FLIGHT)  # the parent sends no more than these at once
    # The CPU kept for this judge's timed calls, outside the set it was pinned to (fanout.py).
    timing_cpu = count("--timing-cpu", -1)
    # The messages keep stdout to themselves: whatever else writes to it (Python, a library's
    # C code, a worker started from here) writes to stderr.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    lock = threading.Lock()

    def send(message: dict[str, Any]) -> None:
        with lock:
            out.write(json.dumps(message) + "\n")
            out.flush()

    # Its CPUs were set by the parent as it started (fanout.py), before this line runs: the
    # zygote started now keeps to them.
    launch.prestart_zygote()  # its torch import beside this process's, in BatchJudge
    share = ReferenceShare(judge_index, judges, send, reference_workers)
    arrived: Queue[Candidate | None] = Queue()
    threading.Thread(target=_route, args=(sys.stdin, arrived, share), daemon=True).start()
    task, root_path = find_task(leaderboard, Path(root))
    judge = BatchJudge(
        task,
        mode,
        root_path,
        float(excessive),
        profile="--profile" in argv,
        reference_share=share,
        candidate_workers=workers,
        prefetch=in_flight - 1,
        timing_cpu=None if timing_cpu < 0 else timing_cpu,
    )

    def incoming() -> Iterator[Candidate]:
        while (candidate := arrived.get()) is not None:
            yield candidate

    try:
        # As each is judged: one passed over (its calls hang) does not hold the others' back,
        # and the parent, which keeps this judge's candidates in flight, sends the next.
        for index, record in judge.judge_as_done(incoming()):
            send({"type": RECORD, "index": index, "record": record})
        share.report("candidates", **judge.account)
    finally:
        judge.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
