"""Each GPU's judge keeps to its own CPUs (judge/cpu_sets.py): the host's CPUs split between the
judges, each judge process and everything it starts pinned to its set as it starts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.batch import Candidate
from pytest_kernelboard.batch.fanout import GpuJudges
from pytest_kernelboard.judge.cpu_sets import MIN_CPUS_PER_JUDGE, pin_process, split_cpus

GOOD = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"

needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity and at least 2 CPUs",
)


def test_the_cpus_are_split_into_disjoint_contiguous_sets_that_cover_them():
    cpus = [*range(0, 30), *range(40, 50)]  # 40 CPUs, numbered with a gap
    sets = split_cpus(cpus, 3)
    assert [len(s) for s in sets] == [14, 13, 13]
    assert set().union(*sets) == set(cpus)
    assert sum(len(s) for s in sets) == len(cpus)  # disjoint
    assert sets[0] == frozenset(range(14)) and max(sets[1]) < min(sets[2])  # contiguous, in order


def test_too_few_cpus_to_split_leaves_every_cpu_to_every_judge():
    cpus = range(2 * MIN_CPUS_PER_JUDGE - 1)
    assert split_cpus(cpus, 2) == [frozenset(cpus)] * 2
    assert split_cpus(range(16), 1) == [frozenset(range(16))]


def tasks(pid: int) -> list[Path]:
    """The /proc entries of pid's threads; none once it has ended."""
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []


def descendants(pid: int) -> list[int]:
    """pid's child processes, their children, and so on (some may end while they are read)."""
    found, todo = [], [pid]
    while todo:
        for task in tasks(todo.pop()):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def thread_affinities(pid: int) -> list[frozenset[int]]:
    affinities = []
    for task in tasks(pid):
        try:
            affinities.append(frozenset(os.sched_getaffinity(int(task.name))))
        except OSError:  # ended meanwhile
            pass
    return affinities


@needs_affinity
def test_pinning_reaches_every_thread_of_a_running_process():
    import subprocess
    import sys

    code = "import threading, time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nprint('up', flush=True); time.sleep(30)"  # noqa: E501
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "up"
        one = frozenset({min(os.sched_getaffinity(0))})
        pin_process(process.pid, one)
        affinities = thread_affinities(process.pid)
        assert len(affinities) == 4 and set(affinities) == {one}
    finally:
        process.kill()
        process.wait()


@needs_affinity
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc")
def test_each_gpus_judge_and_the_workers_it_starts_keep_to_its_cpus(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    first, second = sorted(os.sched_getaffinity(0))[:2]
    sets = [frozenset({first}), frozenset({second})]
    judges = GpuJudges("addone", "test", root, [[0], [1]], 4.0, cpu_sets=sets)
    try:
        batch = [Candidate(f"{n}.py", GOOD) for n in range(6)]
        assert [r["status"] for r in judges.judge(batch)] == ["passed"] * 6
        for process, cpus in zip(judges.processes, sets, strict=True):
            assert set(thread_affinities(process.pid)) == {cpus}
            started = {pid: thread_affinities(pid) for pid in descendants(process.pid)}
            living = {pid: seen for pid, seen in started.items() if seen}
            assert living, "the judge keeps its zygote between batches"
            for pid, seen in living.items():
                assert set(seen) == {cpus}, f"process {pid} left its CPUs"
    finally:
        judges.close()
