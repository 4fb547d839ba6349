"""A core each batch judge keeps for timed calls (judge/timing_core.py): chosen by probe, its SMT
siblings kept free with it, none of the judge's other work on it, every worker's timed calls on
its first CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_cpu_sets import GOOD, descendants, thread_affinities

from pytest_kernelboard.batch import Candidate, judge_many
from pytest_kernelboard.batch.fanout import GpuJudges
from pytest_kernelboard.channel.cage import PIN_VARIABLE
from pytest_kernelboard.judge import devices, timing_core
from pytest_kernelboard.judge.timing_core import TimingCore

needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and at least 2 CPUs",
)


def fake_topology(root: Path, siblings: dict[int, str]) -> Path:
    """A /sys/devices/system/cpu of `siblings` (cpu -> its thread_siblings_list)."""
    for cpu, listed in siblings.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(listed + "\n")
    return root


def probes_by_cpu(monkeypatch, speeds: dict[int, float]) -> None:
    """The core probe reads `speeds` of the one CPU the calling thread is on (it cannot be moved
    to CPUs this machine lacks, so the moves are faked too)."""
    where = {"cpu": None}
    home = os.sched_getaffinity(0)

    def fake_setaffinity(pid, cpus):
        where["cpu"] = next(iter(cpus)) if len(cpus) == 1 else None

    monkeypatch.setattr(timing_core.os, "sched_setaffinity", fake_setaffinity)
    monkeypatch.setattr(timing_core.os, "sched_getaffinity", lambda pid: home)
    monkeypatch.setattr(timing_core, "probe_us", lambda reps: speeds[where["cpu"]])


def addone_repo(tmp_path: Path) -> Path:
    """A repository holding the small `addone` leaderboard."""
    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    return root


@contextmanager
def one_gpus_judge(root: Path, mode: str) -> Iterator[tuple[GpuJudges, TimingCore]]:
    """A GPU's judge process for `addone` on GPU 0, and the timing core it was given."""
    judges = GpuJudges("addone", mode, root, [[0]], 4.0)
    try:
        (core,) = judges.timing_cores
        assert core is not None
        yield judges, core
    finally:
        judges.close()


def assert_timed_on(records: list[dict], cpu: int) -> None:
    """Every timed case of the records ran its calls on `cpu` alone."""
    timed = [case for r in records for case in r["cases"] if case.get("time_us")]
    assert timed and all(case["cpus"] == [cpu] for case in timed), timed


def test_a_kernel_cpu_list_reads_as_its_cpus():
    assert timing_core.parse_cpu_list("0-3,8,10-11\n") == {0, 1, 2, 3, 8, 10, 11}
    assert timing_core.parse_cpu_list("5") == {5}


def test_cores_are_whole_or_left_out(tmp_path):
    sys_cpus = fake_topology(tmp_path, {n: f"{n % 4},{n % 4 + 4}" for n in range(8)})
    cores = timing_core.whole_cores(frozenset(range(8)), sys_cpus)
    assert cores == [frozenset({0, 4}), frozenset({1, 5}), frozenset({2, 6}), frozenset({3, 7})]
    # CPU 1's sibling (5) belongs to someone else: its core cannot be kept free.
    assert timing_core.whole_cores(frozenset({0, 1, 2, 4, 6}), sys_cpus) == [
        frozenset({0, 4}),
        frozenset({2, 6}),
    ]
    # No topology to read: each CPU is a core of its own.
    assert timing_core.whole_cores(frozenset({3, 9}), tmp_path / "none") == [{3}, {9}]


def test_the_fastest_cores_are_kept_one_per_judge(monkeypatch, tmp_path):
    sys_cpus = fake_topology(tmp_path, {n: f"{n % 4},{n % 4 + 4}" for n in range(8)})
    probes_by_cpu(monkeypatch, {0: 30.0, 1: 12.0, 2: 20.0, 3: 11.0})
    monkeypatch.delenv(timing_core.VARIABLE, raising=False)
    cores, shares = timing_core.judge_cpus(frozenset(range(8)), 2, sys_cpus)
    assert cores == [TimingCore(3, frozenset({3, 7})), TimingCore(1, frozenset({1, 5}))]
    assert shares == [frozenset({0, 2}), frozenset({4, 6})]  # the rest, split; no kept CPU


def test_no_core_is_kept_where_it_would_leave_a_judge_too_few_cpus(monkeypatch, tmp_path):
    sys_cpus = fake_topology(tmp_path, {n: str(n) for n in range(4)})
    probes_by_cpu(monkeypatch, {n: 10.0 + n for n in range(4)})
    monkeypatch.delenv(timing_core.VARIABLE, raising=False)
    assert timing_core.choose_cores(frozenset(range(4)), 1, sys_cpus) == [
        TimingCore(0, frozenset({0}))
    ]
    cores, shares = timing_core.judge_cpus(frozenset(range(4)), 2, sys_cpus)  # 2 + 2 * 2 > 4
    assert cores == [None, None] and shares == [frozenset({0, 1}), frozenset({2, 3})]


def test_no_core_is_kept_where_it_is_turned_off(monkeypatch, tmp_path):
    sys_cpus = fake_topology(tmp_path, {n: str(n) for n in range(8)})
    probes_by_cpu(monkeypatch, {n: 10.0 for n in range(8)})
    for variable in (timing_core.VARIABLE, PIN_VARIABLE):
        monkeypatch.setenv(variable, "0")
        assert timing_core.choose_cores(frozenset(range(8)), 1, sys_cpus) == []
        monkeypatch.delenv(variable)
    assert timing_core.choose_cores(frozenset(range(8)), 1, sys_cpus) != []


@needs_two_cpus
def test_the_probe_visits_each_core_and_puts_the_thread_back():
    before = os.sched_getaffinity(0)
    cores = [frozenset({cpu}) for cpu in sorted(before)[:2]]
    speeds = timing_core.probe_cores(cores)
    assert set(speeds) == set(cores) and all(0.1 < us < 100_000 for us in speeds.values())
    assert os.sched_getaffinity(0) == before


@needs_two_cpus
def test_a_judge_here_keeps_off_its_timing_core_and_gets_every_cpu_back(monkeypatch):
    monkeypatch.setattr(timing_core, "MIN_CPUS_PER_JUDGE", 1)
    monkeypatch.delenv(timing_core.VARIABLE, raising=False)
    before = frozenset(os.sched_getaffinity(0))
    with timing_core.kept_here() as kept:
        assert kept is not None and kept.cpu in before
        during = set(thread_affinities(os.getpid()))
    assert during == {before - kept.core}  # every thread of this process
    assert set(thread_affinities(os.getpid())) == {before}


WORKER_PROGRAM = """
import json, os
from pytest_kernelboard.worker.main import Worker
worker = Worker(conn=None)
timer = worker.timer
timer._cpus = frozenset(os.sched_getaffinity(0))  # on a CPU machine the worker never pins
timer._kept_cpu = int(os.environ["KERNELBOARD_TIMING_CPU"])
worker.kernel = lambda data: data + 1
timer._enter_case("benchmark[0]")
pinned = sorted(os.sched_getaffinity(0))
timer._enter_case("benchmark[1]")
again = sorted(os.sched_getaffinity(0))
reply = worker.call(1)
print(json.dumps({"pinned": pinned, "again": again, "cpu": timer._timing_cpu,
                  "after_check": sorted(os.sched_getaffinity(0)), "output": reply["output"]}))
"""


@needs_two_cpus
def test_a_worker_times_every_case_on_the_kept_cpu_outside_its_own_set():
    kept, *others = sorted(os.sched_getaffinity(0))
    env = {**os.environ, "KERNELBOARD_TIMING_CPU": str(kept)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER_PROGRAM],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        preexec_fn=lambda: os.sched_setaffinity(0, others),  # as its judge pinned it
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["pinned"] == [kept] and seen["again"] == [kept]  # no probe: the kept CPU
    assert seen["after_check"] == others and seen["output"] == 2
    assert seen["cpu"] is None  # a check call leaves the timing CPU


@needs_two_cpus
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_a_gpus_judge_and_all_it_starts_keep_off_its_timing_core(tmp_path, monkeypatch):
    monkeypatch.setattr(timing_core, "MIN_CPUS_PER_JUDGE", 1)
    monkeypatch.delenv(timing_core.VARIABLE, raising=False)
    with one_gpus_judge(addone_repo(tmp_path), "test") as (judges, core):
        (judge,) = judges.processes
        # The command it was started with (its /proc cmdline can read empty right after the
        # start: the kernel closes the exec's CLOEXEC pipe before it sets the new arguments).
        command = list(judge.args)
        assert command[command.index("--timing-cpu") + 1] == str(core.cpu)
        batch = [Candidate(f"{n}.py", GOOD) for n in range(3)]
        assert [r["status"] for r in judges.judge(batch)] == ["passed"] * 3
        others = frozenset(os.sched_getaffinity(0)) - core.core
        assert set(thread_affinities(judge.pid)) == {others}
        living = [seen for pid in descendants(judge.pid) if (seen := thread_affinities(pid))]
        assert living and all(set(seen) == {others} for seen in living)


needs_gpu_and_cpus = pytest.mark.skipif(
    not devices.has_cuda() or len(os.sched_getaffinity(0)) < 4,
    reason="needs a CUDA device (a CPU case's calls are never pinned) and 4 CPUs",
)


@pytest.mark.gpu
@needs_gpu_and_cpus
def test_on_a_gpu_every_timed_case_runs_on_the_judges_timing_core(tmp_path, monkeypatch):
    monkeypatch.delenv(timing_core.VARIABLE, raising=False)
    kept: list[TimingCore | None] = []
    keep = timing_core.kept_here

    @contextmanager
    def recorded():
        with keep() as core:
            kept.append(core)
            yield core

    monkeypatch.setattr(timing_core, "kept_here", recorded)
    root = addone_repo(tmp_path)
    batch = [Candidate(f"{n}.py", GOOD) for n in range(2)]
    before = frozenset(os.sched_getaffinity(0))
    records = list(judge_many("addone", batch, mode="benchmark", root=root, gpus=[0]))
    (core,) = kept
    assert core is not None and os.sched_getaffinity(0) == before
    assert_timed_on(records, core.cpu)


@pytest.mark.gpu
@needs_gpu_and_cpus
def test_on_a_gpu_a_gpus_judge_process_times_every_case_on_the_core_it_was_given(
    tmp_path, monkeypatch
):
    monkeypatch.delenv(timing_core.VARIABLE, raising=False)
    with one_gpus_judge(addone_repo(tmp_path), "benchmark") as (judges, core):
        records = list(judges.judge([Candidate(f"{n}.py", GOOD) for n in range(2)]))
    assert_timed_on(records, core.cpu)
