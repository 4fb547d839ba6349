"""Spare workers, started ahead of the judge's need for them."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from .client import WorkerProcess
from .launch import Launcher
from .pausing import resume


class WorkerPool:
    """Keeps spare workers starting in the background, so their Python and torch start-up
    overlaps with the judge's own work instead of adding to every submission's wall time.
    One spare serves a pytest run; a batch keeps a few (its judge imports candidates ahead).

    Every worker is spawned by one thread of the pool's own that lives as long as the pool: a
    sandboxed worker dies with the thread that started it (bwrap's --die-with-parent is a
    parent-death signal, which Linux sends when that thread ends), and a batch takes workers
    from short-lived threads."""

    def __init__(self, launcher: Launcher | None = None, spares: int = 1) -> None:
        self.launcher = launcher
        self.spares = spares
        # Workers the run will still take, where it knows (None: keep `spares` ready). A spare
        # nobody takes costs a Python and torch start-up (seconds of CPU) for nothing.
        self.demand: int | None = None
        # Workers start torch's profiler and make the blocking kernel while they start.
        self.warm_timing = False
        self._spare: list[WorkerProcess] = []
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-spawn")

    def _spawn(self) -> WorkerProcess:
        return self._spawner.submit(
            WorkerProcess, launcher=self.launcher, warm_timing=self.warm_timing
        ).result()

    def expect(self, takes: int) -> None:
        """The run will take about this many more workers: keep no more spares than that (the
        ones over it are stopped now, part way through their start-up)."""
        with self._lock:
            self.demand = max(takes, 0)
            unwanted, self._spare = self._spare[self.demand :], self._spare[: self.demand]
        for worker in unwanted:
            worker.close(timeout_s=1.0)

    def _drop_dead_spares(self) -> None:
        for worker in [w for w in self._spare if not w.alive]:
            self._spare.remove(worker)
            worker.discard()

    def prestart(self) -> None:
        with self._lock:
            self._drop_dead_spares()
            wanted = self.spares if self.demand is None else min(self.spares, self.demand)
            while len(self._spare) < wanted:
                self._spare.append(self._spawn())

    def take(self) -> WorkerProcess:
        with self._lock:
            self._drop_dead_spares()
            worker = self._spare.pop(0) if self._spare else self._spawn()
            if self.demand is not None:
                self.demand = max(self.demand - 1, 0)
        resume(worker.process.pid)  # a spare may be paused while another case is timed
        self.prestart()
        return worker

    def spare_workers(self) -> list[WorkerProcess]:
        with self._lock:
            return list(self._spare)

    def close(self) -> None:
        with self._lock:
            spares, self._spare = self._spare, []
        for worker in spares:
            worker.close(timeout_s=1.0)  # also removes its folders
        # Workers taken from the pool die with the spawning thread: only once they are closed.
        self._spawner.shutdown(wait=False)
