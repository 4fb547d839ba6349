"""The worker's CPU for a case's timed calls: the one its probe found fastest (worker/cpu_choice.py)."""

from __future__ import annotations

import os
import threading

import pytest

from pytest_kernelboard.worker import cpu_choice

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="the platform has no CPU affinity"
)


def run_in_thread(target):
    """Run target in a thread of its own (affinity is per thread) and return what it returned."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(value=target()))
    thread.start()
    thread.join()
    return result["value"]


@needs_affinity
def test_the_calling_thread_is_kept_on_the_cpu_whose_probe_read_fastest(monkeypatch):
    cpus = cpu_choice.allowed_cpus()
    if len(cpus) < 2:
        assert cpu_choice.choose_and_pin(cpus) == (None, {})  # no choice: left where it is
        return
    fast = max(cpus)  # any CPU but the first the probe visits
    probe_by_cpu = {cpu: (3.0 if cpu == fast else 9.0 + cpu) for cpu in cpus}

    def probe_on_the_cpu_we_run_on() -> float:
        (cpu,) = os.sched_getaffinity(0)  # the probe runs pinned to one CPU at a time
        return probe_by_cpu[cpu]

    monkeypatch.setattr(cpu_choice, "probe_us", probe_on_the_cpu_we_run_on)

    def choose():
        chosen, times = cpu_choice.choose_and_pin(cpus)
        return chosen, times, os.sched_getaffinity(0)

    chosen, times, affinity = run_in_thread(choose)
    assert chosen == fast
    assert times == probe_by_cpu  # every CPU was probed, each on itself
    assert affinity == {fast}
    assert os.sched_getaffinity(0) == cpus  # only the calling thread moved


@needs_affinity
def test_the_probe_measures_real_work_on_this_cpu():
    took = cpu_choice.probe_us()
    assert 0.1 < took < 100_000  # microseconds of interpreter work, not zero, not seconds


def in_a_worker(program: str) -> tuple[list[int], dict]:
    """The CPUs this process may use, and what `program` (a worker made in a fresh Python, whose
    threads' affinity is its own) printed last as JSON."""
    import json
    import subprocess
    import sys

    allowed = sorted(cpu_choice.allowed_cpus())
    if len(allowed) < 2:
        pytest.skip("one CPU: there is nothing to choose between")
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    return allowed, json.loads(done.stdout.strip().splitlines()[-1])


WORKER_PROGRAM = """
import json, os
from pytest_kernelboard.worker.main import Worker
worker = Worker(conn=None)
worker.timer._cpus = frozenset(os.sched_getaffinity(0))  # on a CPU machine the worker never pins
worker.kernel = lambda data: data + 1
worker.timer._enter_case("benchmark[0]")
pinned = sorted(os.sched_getaffinity(0))
reply = worker.call(1)
print(json.dumps({"pinned": pinned, "after_check": sorted(os.sched_getaffinity(0)),
                  "case": worker.timer._case, "output": reply["output"]}))
"""


@needs_affinity
def test_a_check_call_puts_the_worker_back_on_every_cpu():
    """Pinned for a case's timed calls only: a check call starts the next case, and may build
    (nvcc, ninja, a Triton compile), which must not be held to one CPU."""
    allowed, seen = in_a_worker(WORKER_PROGRAM)
    assert len(seen["pinned"]) == 1 and seen["pinned"][0] in allowed
    assert seen["after_check"] == allowed
    assert seen["case"] == "" and seen["output"] == 2


NAMED_CPU_PROGRAM = """
import json, os
from pytest_kernelboard.worker.main import Worker
worker = Worker(conn=None)
allowed = sorted(os.sched_getaffinity(0))
worker.timer._cpus = frozenset(allowed)  # on a CPU machine the worker never pins
seen = {}
worker.timer._enter_case("benchmark[0]", cpu=allowed[-1])
seen["named"] = sorted(os.sched_getaffinity(0))
worker.timer._enter_case("benchmark[0]", cpu=allowed[0])  # the same case, another CPU named
seen["renamed"] = sorted(os.sched_getaffinity(0))
worker.timer.leave_timing_cpu()
worker.timer._enter_case("benchmark[1]", cpu=max(allowed) + 1)  # not one it may use
seen["unusable"] = sorted(os.sched_getaffinity(0))
print(json.dumps(seen))
"""


@needs_affinity
def test_a_worker_times_on_the_cpu_the_judge_names_where_it_may_use_it():
    """A case timed in turns runs both workers' calls on the CPU the reference's chose
    (evaluation/paired.py): a named CPU replaces the worker's own probe."""
    allowed, seen = in_a_worker(NAMED_CPU_PROGRAM)
    assert seen["named"] == [allowed[-1]]
    assert seen["renamed"] == [allowed[0]]
    assert len(seen["unusable"]) == 1 and seen["unusable"][0] in allowed  # its own choice
