"""Several GPUs of one host: one judge process per GPU, candidates handed out as each frees up,
and one timing of the reference that every judge shares.

Each process is `python -m pytest_kernelboard.batch.gpu_judge LEADERBOARD MODE ROOT EXCESSIVE
--share K/N [--in-flight F] [--timing-cpu C] [--profile]`, pinned to its GPU with
CUDA_VISIBLE_DEVICES before torch starts and, with everything it starts, to its own share of the
host's CPUs (judge/cpu_sets.py), less one core kept for its timed calls alone, CPU C
(judge/timing_core.py). Both
ways, a line is one JSON object whose "type" says what it is:

    parent -> judge   candidate         {"candidate": {id, source, lang}}
                      reference         {"case": KEY, "timing": {...}} or {"case", "error"};
                                        "case": null fails every case not yet sent
    judge -> parent   record            {"index": I, "record": {...}}, one per candidate, as
                                        each is judged; I: its place among those sent to it
                      reference_share   {"case": KEY, "label", "workers": [N-1-K, ...],
                                        "timings": [one per worker]} or {"case", "error"}
                      phase             where the judge's time went (shown as progress)

The reference is timed on each benchmark case in REFERENCE_WORKERS fresh workers.
Judge K of N times the workers N-1-K, 2N-1-K, ... of them (the first judges, dealt the first
candidates, time the fewest) once its first candidate has imported, while the next ones
import; the parent combines them as one judge would
(between_workers.combined_workers: the median worker's timing, its interval widened by their spread)
and sends the result to every judge, so a candidate's speedup does not depend on which GPU
judged it, and the reference costs each GPU a fifth to a half of what it cost it alone. The
parent keeps a few candidates in flight per judge (so each imports ahead) and yields records in
the order given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from queue import Queue
from typing import Any

from ..evaluation.progress import Progress
from ..evaluation.session import reference_line
from ..judge.cpu_sets import allowed_cpus, pin_process
from ..judge.timing_core import TimingCore, judge_cpus
from ..stats.between_workers import combined_workers
from .candidates import Candidate
from .depth import IN_FLIGHT
from .reference_share import (
    CANDIDATE,
    PHASE,
    RECORD,
    REFERENCE,
    REFERENCE_SHARE,
    REFERENCE_WORKERS,
    shared_workers,
)

GPU_JUDGE = "pytest_kernelboard.batch.gpu_judge"  # the module each GPU's judge process runs


def judge_on_gpus(
    leaderboard: str,
    candidates: Sequence[Candidate],
    mode: str,
    root: Path,
    gpus: Sequence[Sequence[int]],
    excessive_speedup: float,
    profile: bool = False,
    progress: Progress | None = None,
    candidate_workers: int = 1,
    reference_workers: int = REFERENCE_WORKERS,
    in_flight: int = IN_FLIGHT,
) -> Iterator[dict[str, Any]]:
    """One batch on judge processes started for it and stopped after it."""
    judges = GpuJudges(
        leaderboard,
        mode,
        root,
        gpus,
        excessive_speedup,
        profile,
        candidate_workers,
        reference_workers=reference_workers,
        in_flight=in_flight,
    )
    try:
        yield from judges.judge(candidates, progress)
    finally:
        judges.close(progress)


def timing_cpu_argument(core: TimingCore | None) -> list[str]:
    """A judge process's arguments naming the CPU kept for its timed calls, if one is."""
    return [] if core is None else ["--timing-cpu", str(core.cpu)]


class GpuJudges:
    """One judge process per GPU group for one leaderboard and mode, kept across batches: a
    later batch finds the processes, their workers, their CUDA contexts and the reference's
    timing ready (`kernelboard serve` keeps them between jobs). One batch at a time."""

    def __init__(
        self,
        leaderboard: str,
        mode: str,
        root: Path,
        gpus: Sequence[Sequence[int]],
        excessive_speedup: float,
        profile: bool = False,
        candidate_workers: int = 1,
        cpu_sets: Sequence[frozenset[int]] | None = None,
        reference_workers: int = REFERENCE_WORKERS,
        in_flight: int = IN_FLIGHT,
    ) -> None:
        """cpu_sets: the CPUs each judge (and its workers) may use, one set per GPU group;
        default: the CPUs this process may use less one timing core a judge, split between
        the judges (cpu_sets.py, timing_core.py); given sets keep no timing core.
        in_flight: candidates queued at each judge, the one it judges included (depth.py)."""
        self.in_flight = in_flight
        self.gpus = [list(group) for group in gpus]
        # Each judge's timing core, kept out of every judge's set (judge/timing_core.py).
        self.timing_cores: list[TimingCore | None] = [None] * len(self.gpus)
        if cpu_sets is None:
            self.timing_cores, cpu_sets = judge_cpus(allowed_cpus(), len(self.gpus))
        self.cpu_sets = list(cpu_sets)
        self.started_at = time.monotonic()
        self.inbox: Queue[tuple[int, dict[str, Any] | None]] = Queue()  # None: that judge ended
        self.processes: list[subprocess.Popen] = []
        self.launched: list[float] = []  # when each judge process was started (monotonic)
        # GPU indices count within this process's own mask (Ray, a scheduler), if it has one.
        inherited = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        for slot, group in enumerate(self.gpus):
            physical = [inherited[gpu] if gpu < len(inherited) else str(gpu) for gpu in group]
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(physical)}
            self.processes.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        GPU_JUDGE,
                        leaderboard,
                        mode,
                        str(root),
                        str(excessive_speedup),
                    ]
                    + ["--share", f"{slot}/{len(self.gpus)}"]
                    + ["--candidate-workers", str(candidate_workers)]
                    + ["--reference-workers", str(reference_workers)]
                    + ["--in-flight", str(in_flight)]
                    + timing_cpu_argument(self.timing_cores[slot])
                    + (["--profile"] if profile else []),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                    text=True,
                    bufsize=1,
                )
            )
            self.launched.append(time.monotonic())
            # Pinned as it starts, before torch or any worker: all it starts inherits the set.
            pin_process(self.processes[-1].pid, self.cpu_sets[slot])
        self.assigned: list[deque[int]] = [deque() for _ in self.processes]  # indices sent
        # Each judge's candidates without a record yet, by the place among all it was sent
        # (every batch's) that its record names (RECORD's index); `told_count` places the next.
        self.told: list[dict[int, int]] = [{} for _ in self.processes]
        self.told_count = [0 for _ in self.processes]
        self.combiner = _Combiner(len(self.processes), reference_workers)
        self.ended: set[int] = set()
        self.broken = False  # a batch ended with candidates in flight: no further batch
        self._sent = 0  # candidates handed to this set of judges so far, every batch
        self.readers = [
            threading.Thread(target=self._read, args=(slot,), daemon=True)
            for slot in range(len(self.processes))
        ]
        for reader in self.readers:
            reader.start()

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def alive(self) -> bool:
        """Whether every judge still runs and takes another batch."""
        return (
            not self.broken
            and not self.ended
            and all(process.poll() is None for process in self.processes)
        )

    def _read(self, slot: int) -> None:
        for line in self.processes[slot].stdout:  # type: ignore[union-attr]
            self.inbox.put((slot, json.loads(line)))
        self.inbox.put((slot, None))

    def _tell(self, slot: int, message: dict[str, Any]) -> None:
        try:
            self.processes[slot].stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
            self.processes[slot].stdin.flush()  # type: ignore[union-attr]
        except OSError:  # that judge has ended; its reader says so
            pass

    def _handle(self, slot: int, message: dict[str, Any], progress: Progress | None) -> None:
        kind = message.get("type")
        if kind == REFERENCE_SHARE:
            for combined in self.combiner.add(slot, message, progress):
                for other in range(len(self.processes)):
                    self._tell(other, combined)
        elif kind == PHASE and progress is not None:
            if message["phase"] == "reference":
                # The judge's own start before its share: its process, its zygote and workers,
                # its first candidate's import (what a 40-candidate batch pays once per GPU).
                since = time.monotonic() - self.launched[slot] - message["reference_s"]
                message = {**message, "started_s": since}
            progress.phase(f"judge {slot} (GPU {_names(self.gpus[slot])})", phase_line(message))

    def judge(
        self, candidates: Sequence[Candidate], progress: Progress | None = None
    ) -> Iterator[dict[str, Any]]:
        """One record per candidate, in the order given, each as soon as it and the ones
        before it are judged. A batch left before its last record leaves these judges
        `broken` (its candidates still in flight would answer the next one's)."""
        base = self._sent
        self._sent += len(candidates)
        # Not yet sent, or sent to a judge that ended.
        waiting = deque(range(base, base + len(candidates)))

        def send_one(slot: int) -> bool:
            if slot in self.ended or len(self.assigned[slot]) >= self.in_flight or not waiting:
                return False
            index = waiting.popleft()
            self.assigned[slot].append(index)
            self.told[slot][self.told_count[slot]] = index
            self.told_count[slot] += 1
            candidate = candidates[index - base]
            self._tell(slot, {"type": CANDIDATE, "candidate": asdict(candidate)})
            return True

        def top_up(slot: int) -> None:
            while send_one(slot):
                pass

        # Dealt one at a time around the judges, so a short batch keeps every GPU busy.
        while any([send_one(slot) for slot in range(len(self.processes))]):
            pass
        ready: dict[int, dict[str, Any]] = {}
        next_out = base
        try:
            while next_out < base + len(candidates):
                if len(self.ended) == len(self.processes):
                    raise RuntimeError("every GPU's judge process ended before the batch was done")
                slot, message = self.inbox.get()
                if message is None:  # its unjudged candidates go to the others
                    self.ended.add(slot)
                    waiting.extendleft(reversed(self.assigned[slot]))
                    self.assigned[slot].clear()
                    for failed in self.combiner.end(slot, _names(self.gpus[slot])):
                        for other in range(len(self.processes)):
                            self._tell(other, failed)
                    for other in range(len(self.processes)):
                        top_up(other)
                elif message.get("type") == RECORD:
                    index = self.told[slot].pop(message["index"])
                    self.assigned[slot].remove(index)
                    ready[index] = message["record"]
                    top_up(slot)
                else:
                    self._handle(slot, message, progress)
                while next_out in ready:
                    yield ready.pop(next_out)
                    next_out += 1
        finally:
            if next_out < base + len(candidates):
                self.broken = True

    def close(self, progress: Progress | None = None) -> None:
        """Each judge's stdin closed: it finishes, reports its account and exits."""
        for process in self.processes:
            try:
                process.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass
        for process in self.processes:
            process.wait()
        for reader in self.readers:
            reader.join(timeout=5)
        while not self.inbox.empty():  # each judge's account of its time, sent as it ended
            slot, message = self.inbox.get()
            if message is not None and message.get("type") == PHASE:
                self._handle(slot, message, progress)


class _Combiner:
    """The parent's side of the shared reference: each case's shares, combined into one timing
    once every judge with workers of it has sent its share."""

    def __init__(self, judges: int, total: int = REFERENCE_WORKERS):
        self.dealt = {j for j in range(judges) if shared_workers(j, judges, total)}
        self.cases: dict[str, dict[str, Any]] = {}
        self.broken: str | None = None  # why no further case can be combined

    def add(
        self, judge: int, message: dict[str, Any], progress: Progress | None
    ) -> list[dict[str, Any]]:
        """The messages for every judge once this share completes its case."""
        key = message["case"]
        case = self.cases.setdefault(key, {"from": set(), "timings": {}, "errors": []})
        case["from"].add(judge)
        if message.get("error"):
            case["errors"].append(message["error"])
        else:
            case["timings"].update(zip(message["workers"], message["timings"], strict=True))
        if self.broken is not None or case["from"] != self.dealt:
            return []
        if case["errors"]:
            return [{"type": REFERENCE, "case": key, "error": case["errors"][0]}]
        records = [case["timings"][index] for index in sorted(case["timings"])]
        chosen, relative_spread = combined_workers(records)
        if progress is not None and relative_spread is not None:
            progress.case_timed(message["label"], reference_line(chosen, relative_spread))
        return [{"type": REFERENCE, "case": key, "timing": chosen}]

    def end(self, judge: int, gpu: str) -> list[dict[str, Any]]:
        """A judge ended mid-batch: a case it had a share of and did not send can never be
        combined; every case not yet combined fails, for every judge alike."""
        if judge not in self.dealt or self.broken is not None:
            return []
        self.broken = f"the judge on GPU {gpu} ended before its share of the reference's timing"
        return [{"type": REFERENCE, "case": None, "error": self.broken}]


def _names(group: Sequence[int]) -> str:
    return ", ".join(str(gpu) for gpu in group)


def reference_parts_note(parts: dict[str, float]) -> str:
    """`: worker_start 1.2 s, import 0.3 s, ...`, the reference's workers' seconds by part."""
    if not parts:
        return ""
    return ": " + ", ".join(f"{part} {seconds:.1f} s" for part, seconds in parts.items())


def phase_line(message: dict[str, Any]) -> str:
    """A judge's account of its time, as a progress line."""
    if message["phase"] == "reference":
        workers = ", ".join(str(w) for w in message["workers"])
        started = message.get("started_s")
        return (
            f"timed its share of the reference (its workers {workers} of {message['of']}) "
            f"on {message['cases']} case(s) in {message['reference_s']:.1f} s"
            + reference_parts_note(message.get("parts") or {})
            + (f", {started:.1f} s after it was started" if started is not None else "")
        )
    return (
        f"judged {message['candidates']} candidate(s) in {message['candidates_s']:.1f} s "
        f"({message['waited_s']:.1f} s of it waiting for the other judges' shares of the "
        f"reference), after {message['reference_s']:.1f} s on its own share"
    )
