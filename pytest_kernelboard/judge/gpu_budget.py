"""One GPU's memory, shared by every judge on it: a case waits for room instead of failing.

Judges on one GPU (`pytest -n N`, several pytest runs, a batch beside them) write what they
hold into a ledger file named after the GPU's UUID, under a file lock: each live process's
reservation for the case it runs, and whether it runs it alone. A case starts once its
reservation fits beside the others' within the GPU's capacity; a case that runs out of memory
anyway (an estimate too small, memory a reservation does not cover) waits until no other case
runs on the GPU and is run once more, alone. A case that cannot fit even alone is the
leaderboard's matter: it is not run, and the message says what it needs and what the GPU has.

Reservations are estimates learned from the case's own earlier runs in this process (the
device memory the judge and its worker held at its peak); a first run reserves a default.
Entries of processes that have died are dropped whenever the ledger is read.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GiB = 1 << 30
POLL_S = 0.25
# Each judging process keeps CUDA contexts (its own, its worker's, a spare's) beside its cases.
CONTEXTS_PER_PROCESS = 2 * GiB
# A case never seen before reserves this share of the GPU (or less, when that is more).
FIRST_RESERVATION_SHARE = 0.125

_OOM = re.compile(
    r"out of memory|OutOfMemoryError|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
    re.IGNORECASE,
)


def is_out_of_memory(text: str) -> bool:
    """Whether an error's text says the device ran out of memory."""
    return bool(_OOM.search(text or ""))


@dataclass(frozen=True)
class Decision:
    """What a case may do now: start, wait (others hold the room), or never fit here."""

    start: bool
    fits_alone: bool
    others_bytes: int


def decide(need: int, capacity: int, others: list[dict[str, Any]], alone: bool) -> Decision:
    """May a case needing `need` bytes start beside `others` (their ledger entries)?

    alone: it must be the only case on the GPU. Any other case running alone blocks it too.
    """
    held = sum(int(e.get("bytes", 0)) for e in others)
    someone_alone = any(e.get("alone") for e in others)
    fits_alone = need <= capacity
    if alone:
        start = not any(e.get("active") for e in others)
    else:
        start = not someone_alone and held + need <= capacity
    return Decision(start, fits_alone, held)


class GpuBudget:
    """The ledger of one GPU, as one process sees it."""

    def __init__(
        self,
        key: str,
        total_bytes: int,
        folder: Path | None = None,
        pid: int | None = None,
        free_bytes: Callable[[], int | None] | None = None,
    ):
        self.path = (folder or Path(tempfile.gettempdir())) / f"kernelboard-gpu-{key}.ledger"
        self.total = total_bytes
        self.pid = pid or os.getpid()
        self.free_bytes = free_bytes or (lambda: None)
        self._learned: dict[str, int] = {}

    # -- the ledger ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            try:
                entries = json.loads(handle.read() or "{}")
            except json.JSONDecodeError:
                entries = {}
            entries = {pid: e for pid, e in entries.items() if pid_alive(int(pid))}
            yield entries
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(entries))

    def capacity(self, processes: int) -> int:
        """What cases may reserve together: the GPU less every judging process's contexts."""
        return max(self.total - CONTEXTS_PER_PROCESS * max(processes, 1), 0)

    def reservation(self, key: str) -> int:
        """What a case reserves: its peak when it ran before here, else a default share."""
        return self._learned.get(key) or int(self.total * FIRST_RESERVATION_SHARE)

    def learn(self, key: str, peak_bytes: int) -> None:
        if peak_bytes > 0:
            self._learned[key] = max(peak_bytes, self._learned.get(key, 0))

    @contextlib.contextmanager
    def held(
        self, need: int, alone: bool = False, waiting: Callable[[int, int], None] | None = None
    ) -> Iterator[None]:
        """Hold `need` bytes of the GPU (alone: the whole GPU) for the block, waiting for room.
        waiting(need, held_by_others) is called once when the case has to wait."""
        told = False
        # A need beyond what cases may hold together can only run alone.
        alone = alone or need >= self.capacity(1)
        need = min(need, self.capacity(1))
        while True:
            with self._locked() as entries:
                others = [e for pid, e in entries.items() if int(pid) != self.pid]
                decision = decide(need, self.capacity(len(entries) + 1), others, alone)
                if decision.start:
                    entries[str(self.pid)] = {"bytes": need, "alone": alone, "active": True}
                    break
            if waiting is not None and not told:
                waiting(need, decision.others_bytes)
                told = True
            time.sleep(POLL_S)
        try:
            yield
        finally:
            with self._locked() as entries:
                entries[str(self.pid)] = {"bytes": 0, "alone": False, "active": False}

    def too_large(self, need: int, detail: str = "") -> str:
        """The message for a case that does not fit this GPU even alone."""
        free = self.free_bytes()
        free_text = f", {free / GiB:.0f} GiB free" if free is not None else ""
        return (
            f"not run: the case needs {need / GiB:.1f} GiB at its peak; this GPU has "
            f"{self.total / GiB:.0f} GiB{free_text}" + (f" ({detail})" if detail else "")
        )


def pid_alive(pid: int) -> bool:
    """Whether a process of that pid exists (another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_BUDGETS: dict[int, GpuBudget] = {}


def for_device(index: int | None = None) -> GpuBudget | None:
    """This process's budget of its current GPU (None without CUDA)."""
    from . import devices

    if not devices.has_cuda():
        return None
    import torch

    index = torch.cuda.current_device() if index is None else index
    if index not in _BUDGETS:
        props = torch.cuda.get_device_properties(index)
        key = str(getattr(props, "uuid", "") or f"{props.name}-{index}").replace("/", "-")

        def free() -> int | None:
            try:
                return torch.cuda.mem_get_info(index)[0]
            except Exception:
                return None

        _BUDGETS[index] = GpuBudget(key, int(props.total_memory), free_bytes=free)
    return _BUDGETS[index]
