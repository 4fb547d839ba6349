"""Spare workers, started ahead of the judge's need for them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from .client import WorkerProcess
from .launch import Launcher
from .pausing import paused, resume


class WorkerPool:
    """Keeps spare workers starting in the background, so their Python and torch start-up
    overlaps with the judge's own work instead of adding to every submission's wall time.
    One spare serves a pytest run; a batch keeps a few (its judge imports candidates ahead).

    Every worker is spawned by one thread of the pool's own that lives as long as the pool: a
    sandboxed worker dies with the thread that started it (bwrap's --die-with-parent is a
    parent-death signal, which Linux sends when that thread ends), and a batch takes workers
    from short-lived threads.

    While a case is timed the pool is quiet (`quiet`): a spare part way through its start makes
    its CUDA context and sets up cuBLAS on the device the case is timed on, and a 2.7 ms GEMM
    timed meanwhile read 14 - 60% slow in bursts of two to four calls on an H100
    (benchmarks/probes/timed_calls.py). Its spares are paused, none is started, and a worker
    is taken only by the thread that times.
    """

    def __init__(self, launcher: Launcher | None = None, spares: int = 1) -> None:
        self.launcher = launcher
        self.spares = spares
        # Workers the run will still take, where it knows (None: keep `spares` ready). A spare
        # nobody takes costs a Python and torch start-up (seconds of CPU) for nothing.
        self.demand: int | None = None
        # Workers make the blocking kernel while they start.
        self.warm_timing = False
        # The CPU the judge keeps for timed calls (judge/timing_core.py); None: none kept.
        self.timing_cpu: int | None = None
        self._spare: list[WorkerProcess] = []
        self._lock = threading.Lock()
        self._calm = threading.Condition(self._lock)  # notified when the pool stops being quiet
        self._quiet_in: threading.Thread | None = None  # the thread timing a case, if any
        self._quiet_depth = 0
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-spawn")

    def _spawn(self) -> WorkerProcess:
        return self._spawner.submit(
            WorkerProcess,
            launcher=self.launcher,
            warm_timing=self.warm_timing,
            timing_cpu=self.timing_cpu,
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

    def _quiet_for_others(self) -> bool:
        return self._quiet_in is not None and self._quiet_in is not threading.current_thread()

    def prestart(self) -> None:
        with self._lock:
            if self._quiet_in is not None:
                return  # started when the timed case ends
            self._drop_dead_spares()
            wanted = self.spares if self.demand is None else min(self.spares, self.demand)
            while len(self._spare) < wanted:
                self._spare.append(self._spawn())

    def take(self) -> WorkerProcess:
        with self._lock:
            self._calm.wait_for(lambda: not self._quiet_for_others())
            self._drop_dead_spares()
            worker = self._spare.pop(0) if self._spare else self._spawn()
            if self.demand is not None:
                self.demand = max(self.demand - 1, 0)
        resume(worker.process.pid)  # a spare may be paused while another case is timed
        self.prestart()
        return worker

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """No spare starts on the device for the duration (a case is timed): the spares are
        paused, none is started, and another thread's `take` waits. Re-entrant in one thread."""
        me = threading.current_thread()
        with self._lock:
            self._calm.wait_for(lambda: self._quiet_in in (None, me))
            self._quiet_in = me
            self._quiet_depth += 1
            outermost = self._quiet_depth == 1
            spares = [w.process.pid for w in self._spare] if outermost else []
        try:
            with paused(spares):
                yield
        finally:
            with self._lock:
                self._quiet_depth -= 1
                if not self._quiet_depth:
                    self._quiet_in = None
                    self._calm.notify_all()
            if outermost:
                self.prestart()

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
