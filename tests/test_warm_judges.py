"""Judges kept warm across batches (batch/fanout.py GpuJudges, service/judges.py LocalJudge):
`kernelboard serve`'s jobs find the judge processes started and the reference timed, and get
the verdicts a fresh judge gives. On a CPU machine the one judge process is a CPU judge."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from pytest_kernelboard.batch import Candidate, judge_many
from pytest_kernelboard.batch.fanout import GpuJudges
from pytest_kernelboard.service.judges import LocalJudge

GOOD = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"
WRONG = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 2)\n"
VERDICT = ("id", "status", "error_kind", "correct", "failed_case")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    return root


def verdicts(records: list[dict]) -> list[tuple]:
    return [tuple(str(r[key]) for key in VERDICT) for r in records]


def batch(tag: str) -> list[Candidate]:
    return [Candidate(f"{tag}-good.py", GOOD), Candidate(f"{tag}-wrong.py", WRONG)]


def test_a_second_batch_finds_the_same_judge_and_the_verdicts_of_a_fresh_one(repo):
    judges = GpuJudges("addone", "test", repo, [[]], 4.0)
    try:
        first = list(judges.judge(batch("a")))
        pids = judges.pids
        second = list(judges.judge(batch("b")))
        assert judges.pids == pids and judges.alive()
    finally:
        judges.close()
    fresh = list(judge_many("addone", batch("b"), mode="test", root=repo, gpus=[]))
    assert [r["status"] for r in first] == ["passed", "failed"]
    assert verdicts(second) == verdicts(fresh)
    assert all(process.poll() is not None for process in judges.processes)  # closed: gone


@pytest.mark.runs_long
def test_the_reference_is_timed_once_for_every_batch(repo):
    judges = GpuJudges("addone", "benchmark", repo, [[]], 4.0)
    try:
        first = next(iter(judges.judge([Candidate("a.py", GOOD)])))
        second = next(iter(judges.judge([Candidate("b.py", GOOD)])))
    finally:
        judges.close()
    (one,) = [c for c in first["cases"] if c["kind"] == "benchmark"]
    (two,) = [c for c in second["cases"] if c["kind"] == "benchmark"]
    assert one["reference_us"] is not None
    assert two["reference_us"] == one["reference_us"]  # the same timing, not a second one
    assert two["between_workers_rsd"] == one["between_workers_rsd"]


def test_the_server_keeps_its_judges_until_the_leaderboard_or_mode_changes(repo):
    judge = LocalJudge(repo)
    try:
        assert [r["status"] for r in judge("addone", batch("a"), "test")] == ["passed", "failed"]
        warm = judge.judges_for("addone", "test")
        assert [r["status"] for r in judge("addone", batch("b"), "test")] == ["passed", "failed"]
        assert judge.judges_for("addone", "test") is warm
        # A change to the leaderboard's files: the judge imported the old ones.
        reference = repo / "leaderboards" / "addone" / "reference.py"
        reference.write_text(reference.read_text() + "\n# edited while the server runs\n")
        edited = judge.judges_for("addone", "test")
        assert edited is not warm
        assert all(process.poll() is not None for process in warm.processes)
        other_mode = judge.judges_for("addone", "benchmark")
        assert other_mode is not edited
        assert all(process.poll() is not None for process in edited.processes)
    finally:
        judge.close()
    assert all(process.poll() is not None for process in other_mode.processes)


def test_a_judge_that_died_between_jobs_is_replaced(repo):
    judge = LocalJudge(repo)
    try:
        list(judge("addone", batch("a"), "test"))
        dead = judge.judges_for("addone", "test")
        os.kill(dead.pids[0], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while dead.processes[0].poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        records = list(judge("addone", batch("b"), "test"))
        assert [r["status"] for r in records] == ["passed", "failed"]
        assert judge.judges_for("addone", "test") is not dead
    finally:
        judge.close()


def test_a_batch_left_unfinished_is_not_answered_by_its_leftovers(repo):
    """A job abandoned after its first record (the server stopping) leaves candidates in
    flight; their records must not be taken for the next job's."""
    judge = LocalJudge(repo)
    try:
        left = judge.judges_for("addone", "test")
        stream = judge("addone", batch("a") + batch("c"), "test")
        next(stream)
        stream.close()
        assert not left.alive()
        records = list(judge("addone", batch("b"), "test"))
        assert [r["id"] for r in records] == ["b-good.py", "b-wrong.py"]
        assert judge.judges_for("addone", "test") is not left
    finally:
        judge.close()


def test_an_unknown_leaderboard_is_refused_before_any_judge_starts(repo):
    from pytest_kernelboard.batch import UnknownLeaderboard

    judge = LocalJudge(repo)
    with pytest.raises(UnknownLeaderboard):
        judge("no-such-board", batch("a"), "test")
    assert judge._warm is None


def test_warm_judges_serve_an_hour_then_the_reference_is_timed_again(repo):
    judge = LocalJudge(repo, max_age_s=3600.0)
    try:
        first = judge.judges_for("addone", "test")
        assert judge.judges_for("addone", "test") is first
        judge.max_age_s = 0.0  # as if an hour had passed
        assert judge.judges_for("addone", "test") is not first
        assert all(process.poll() is not None for process in first.processes)
    finally:
        judge.close()
