"""Leases on a host's GPUs, shared by the judging processes of one `pytest -n` session.

Each process has a GPU of its own (its `own` index in the host's list) and numbers the host's
GPUs its own way: its own first, then the others in host order (`process_view`; the xdist
plugin sets CUDA_VISIBLE_DEVICES to it). A single-GPU item leases its own GPU, shared (processes
that share a GPU, `-n` above the GPU count, keep running side by side); a case of W ranks leases
the first W GPUs of that view, exclusively: its own GPU and the lowest-numbered others, exactly
the GPUs its ranks run on (rank r on cuda:r).

Every GPU has two lock files in the session's folder (flock, so a holder that dies lets go):
`use`, held for the whole lease, and `gate`, held only while waiting for `use`. A process takes
the GPUs of a lease in host order, each by gate then use, so all take locks in one global order
and no set of waiting processes can close a circle (no deadlock). The gate keeps a waiting
multi-GPU case from being starved: once it holds a GPU's gate, the holders of that GPU finish
their items but none starts another there before the case has it.

A process that waits long says so (on_wait, then every minute), naming who holds the GPU it
waits for; past the timeout (KERNELBOARD_GPU_LEASE_TIMEOUT_S, default an hour) it gives up
with a message that names them too.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .gpu_budget import pid_alive

TIMEOUT_VARIABLE = "KERNELBOARD_GPU_LEASE_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 3600.0
POLL_S = 0.02
# A wait this long is reported (progress line, the item's report), then again every minute.
NOTICE_AFTER_S = 10.0
NOTICE_EVERY_S = 60.0
_HOLDERS = "holders"
_serial = itertools.count()


class LeaseTimeout(Exception):
    """No lease within the timeout; the message names the GPU and who holds it."""


def process_view(gpus: Sequence[str], own: int) -> list[str]:
    """How a process whose GPU is gpus[own] numbers the host's GPUs: its own as cuda:0, then
    the others in host order. A lease of W GPUs is the first W of this list, rank r on cuda:r."""
    return [gpus[own], *(gpu for index, gpu in enumerate(gpus) if index != own)]


def timeout_from_environment(environ: dict[str, str] | None = None) -> float:
    """KERNELBOARD_GPU_LEASE_TIMEOUT_S, else the default; a bad value names the variable."""
    raw = (os.environ if environ is None else environ).get(TIMEOUT_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{TIMEOUT_VARIABLE}={raw!r}: expected a positive number of seconds")
    return value


@dataclass
class Lease:
    """GPUs held until release(). devices[r] is the GPU the holder numbers cuda:r."""

    devices: tuple[str, ...]
    exclusive: bool
    waited_s: float
    waited_for: str  # what the wait was for and who held it, empty when there was no wait
    _files: list[IO[bytes]] = field(default_factory=list, repr=False)
    _record: Path | None = field(default=None, repr=False)

    def release(self) -> None:
        for handle in reversed(self._files):
            handle.close()  # closing the descriptor drops its flock
        self._files.clear()
        if self._record is not None:
            self._record.unlink(missing_ok=True)
            self._record = None

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class _Wait:
    """One acquisition's wait: what for, since when, whom it found holding each GPU."""

    what: str
    devices: list[str]
    record: Path
    on_wait: Callable[[str], None] | None
    next_notice: float
    started: float = field(default_factory=time.monotonic)
    holders: dict[str, str] = field(default_factory=dict)


class GpuLeases:
    """One process's side of the session's lease folder."""

    def __init__(
        self,
        folder: Path,
        gpus: Sequence[str],
        own: int,
        holder: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        poll_s: float = POLL_S,
        notice_after_s: float = NOTICE_AFTER_S,
    ):
        """gpus: the host's GPUs in host order, the same list in every process of the session;
        own: this process's GPU, an index into it; holder: how others name it (gw1)."""
        if not 0 <= own < len(gpus):
            raise ValueError(f"own GPU index {own} is not one of the host's {len(gpus)} GPUs")
        self.folder = folder
        self.gpus = list(gpus)
        self.own = own
        self.holder = holder
        self.timeout_s = timeout_s
        self.poll_s = poll_s
        self.notice_after_s = notice_after_s
        (folder / _HOLDERS).mkdir(parents=True, exist_ok=True)

    def devices(self, count: int) -> list[str]:
        """The GPUs a lease of `count` takes, in the order this process numbers them."""
        if not 1 <= count <= len(self.gpus):
            raise ValueError(f"a lease of {count} GPUs on a host of {len(self.gpus)}")
        return process_view(self.gpus, self.own)[:count]

    def acquire(self, count: int, what: str, on_wait: Callable[[str], None] | None = None) -> Lease:
        """Hold `count` GPUs for `what` (an item's id): one shared, several exclusive."""
        devices = self.devices(count)
        exclusive = count > 1
        lease = Lease(tuple(devices), exclusive, 0.0, "")
        lease._record = self._record_path()
        self._write_record(lease._record, what, devices, exclusive, "waiting")
        wait = _Wait(what, devices, lease._record, on_wait, time.monotonic() + self.notice_after_s)
        try:
            for gpu in sorted(devices, key=self.gpus.index):  # one global order: no deadlock
                with self._open(gpu, "gate") as gate:  # held only until `use` is ours
                    self._lock(gate, fcntl.LOCK_EX, gpu, wait)
                    use = self._open(gpu, "use")
                    lease._files.append(use)
                    self._lock(use, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, gpu, wait)
        except BaseException:
            lease.release()
            raise
        lease.waited_s = time.monotonic() - wait.started
        lease.waited_for = "; ".join(f"GPU {gpu} {who}" for gpu, who in wait.holders.items())
        self._write_record(lease._record, what, devices, exclusive, "holding")
        return lease

    # -- locks ---------------------------------------------------------------------------------
    def _open(self, gpu: str, kind: str) -> IO[bytes]:
        # A fresh open file description per lock: flock conflicts between descriptions, so two
        # leases of one process (threads, in tests) exclude each other as processes do.
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", gpu)
        return open(self.folder / f"gpu-{name}.{kind}", "ab")

    def _lock(self, handle: IO[bytes], mode: int, gpu: str, wait: _Wait) -> None:
        """flock, polled: the wait can be reported and given up, which a blocking call cannot."""
        while True:
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            now = time.monotonic()
            if gpu not in wait.holders:
                wait.holders[gpu] = self._who_holds(gpu, wait.record)
            if now - wait.started >= self.timeout_s:
                raise LeaseTimeout(
                    f"no lease on GPU {gpu} after {self.timeout_s:g} s: {wait.what} needs "
                    f"{_gpus(wait.devices)}; GPU {gpu} {self._who_holds(gpu, wait.record)}. "
                    f"Set {TIMEOUT_VARIABLE} to wait longer."
                )
            if now >= wait.next_notice:
                wait.holders[gpu] = self._who_holds(gpu, wait.record)
                if wait.on_wait is not None:
                    wait.on_wait(
                        f"{self.holder}: {wait.what} has waited {now - wait.started:.0f} s for "
                        f"GPU {gpu} (it needs {_gpus(wait.devices)}); {wait.holders[gpu]}"
                    )
                wait.next_notice = now + NOTICE_EVERY_S
            time.sleep(self.poll_s)

    # -- who holds what ------------------------------------------------------------------------
    def _record_path(self) -> Path:
        name = f"{os.getpid()}-{threading.get_ident()}-{next(_serial)}.json"
        return self.folder / _HOLDERS / name

    def _write_record(
        self, path: Path, what: str, devices: list[str], exclusive: bool, state: str
    ) -> None:
        record = {
            "holder": self.holder,
            "pid": os.getpid(),
            "what": what,
            "gpus": devices,
            "exclusive": exclusive,
            "state": state,
            "since": time.time(),
        }
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(record))
        partial.replace(path)  # readers never see half a record

    def records(self, exclude: Path | None = None) -> list[dict[str, Any]]:
        """Every live process's lease records, holders and waiters (a dead process's skipped)."""
        found = []
        for path in sorted((self.folder / _HOLDERS).glob("*.json")):
            if path == exclude:
                continue
            try:
                record = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # released meanwhile
            if pid_alive(int(record.get("pid", 0))):
                found.append(record)
        return found

    def _who_holds(self, gpu: str, exclude: Path) -> str:
        """'held by gw1 (pid 7: <item>, for 42 s)', or the waiters ahead where none holds it."""
        now = time.time()
        on_gpu = [r for r in self.records(exclude) if gpu in r["gpus"]]
        holding = [r for r in on_gpu if r["state"] == "holding"]
        shown = holding or on_gpu
        if not shown:
            return "no holder on record"
        verb = "held by " if holding else "queued behind "
        return verb + ", ".join(
            f"{r['holder']} (pid {r['pid']}: {r['what']}, for {now - r['since']:.0f} s)"
            for r in shown
        )


def _gpus(devices: Sequence[str]) -> str:
    return f"GPU {devices[0]}" if len(devices) == 1 else "GPUs " + ", ".join(devices)
