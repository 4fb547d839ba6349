"""The worker pool keeps spares starting ahead, but none that the run will not take."""

from __future__ import annotations

import os
import types

from pytest_kernelboard.supervisor.pool import WorkerPool


def counting_pool(spares: int) -> tuple[WorkerPool, list[object]]:
    """A pool whose 'workers' are records of each start (a real one costs a torch import)."""
    started: list[object] = []

    def spawn() -> object:
        worker = types.SimpleNamespace(alive=True, process=types.SimpleNamespace(pid=os.getpid()))
        started.append(worker)
        return worker

    pool = WorkerPool(spares=spares)
    pool._spawn = spawn  # type: ignore[method-assign]
    return pool, started


def test_without_a_known_demand_a_spare_is_always_starting():
    pool, started = counting_pool(spares=1)
    pool.prestart()
    for _ in range(3):
        pool.take()
    assert len(started) == 4  # three taken, one spare waiting


def test_no_spare_starts_beyond_what_the_run_will_take():
    pool, started = counting_pool(spares=2)
    pool.expect(3)
    pool.prestart()
    assert len(started) == 2
    taken = [pool.take() for _ in range(3)]
    assert len(started) == 3 and len(set(map(id, taken))) == 3  # no worker left unused
    pool.take()  # more than expected (a crash's replacement): started when asked
    assert len(started) == 4 and pool.spare_workers() == []


def test_a_run_that_takes_nothing_starts_nothing():
    pool, started = counting_pool(spares=1)
    pool.expect(0)
    pool.prestart()
    assert started == []


def test_expecting_fewer_takes_stops_the_spares_over_them():
    """Real workers: the ones over the new demand are stopped part way through their start."""
    pool = WorkerPool(spares=2)
    try:
        pool.prestart()
        spares = pool.spare_workers()
        assert len(spares) == 2 and all(w.alive for w in spares)
        pool.expect(1)
        assert pool.spare_workers() == spares[:1]
        assert spares[0].alive and not spares[1].alive
        pool.expect(0)
        assert pool.spare_workers() == [] and not spares[0].alive
        pool.prestart()
        assert pool.spare_workers() == []
    finally:
        pool.close()
