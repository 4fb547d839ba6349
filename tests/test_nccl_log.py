"""A rank's NCCL log goes to a file the judge reads (which transport joined the ranks), whatever
NCCL_DEBUG the judge's own environment holds: a user who runs with NCCL_DEBUG=INFO to see the
transport still gets it recorded (it was lost: the record named no transport)."""

from __future__ import annotations

import pytest

from pytest_kernelboard.supervisor.launch import WorkerLaunch


def rank_env(monkeypatch: pytest.MonkeyPatch, tmp_path, **judge_env: str) -> WorkerLaunch:
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in judge_env.items():
        monkeypatch.setenv(name, value)
    launch = WorkerLaunch(sandboxed=False, device=0)
    try:
        launch._log_nccl_to(tmp_path)
    finally:
        launch.parent_end.close()
        launch.child_end.close()
    return launch


@pytest.mark.parametrize(
    ("judge_level", "rank_level"),
    [(None, "INFO"), ("INFO", "INFO"), ("info", "INFO"), ("WARN", "INFO"), ("TRACE", "TRACE")],
)
def test_the_log_is_kept_at_info_at_least(monkeypatch, tmp_path, judge_level, rank_level):
    env = {"NCCL_DEBUG": judge_level} if judge_level else {}
    launch = rank_env(monkeypatch, tmp_path, **env)
    assert launch.nccl_log == tmp_path / launch.nccl_log.name
    assert launch.env["NCCL_DEBUG_FILE"] == str(launch.nccl_log)
    assert launch.env["NCCL_DEBUG"] == rank_level


def test_a_log_file_of_the_judges_own_wins(monkeypatch, tmp_path):
    launch = rank_env(monkeypatch, tmp_path, NCCL_DEBUG="INFO", NCCL_DEBUG_FILE="/tmp/mine.%h")
    assert launch.nccl_log is None
    assert launch.env.get("NCCL_DEBUG_FILE") in (None, "/tmp/mine.%h")
