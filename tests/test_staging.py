"""Staged evaluation folders, and the judge's other temporary folders, do not outlive the
process that made them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SEGFAULTS_ON_SIZE_3

from pytest_kernelboard.judge import staging
from pytest_kernelboard.spec.task import load_task

FIXTURES = Path(__file__).parent / "fixtures"


def test_remove_staged_removes_what_was_staged(core_repo):
    task = load_task(core_repo / "leaderboards/addone/task.yml")
    folder = staging.stage(task, core_repo / "submissions/addone/alice/submission.py")
    assert (folder / "submission.py").is_file()
    assert folder in staging.staged_folders()
    assert folder in staging.remove_staged()
    assert not folder.exists()
    assert folder not in staging.staged_folders()


@pytest.mark.parametrize(
    "submission, outcomes",
    [("alice", {"passed": 2}), ("crashy", {"passed": 1, "failed": 1})],
    ids=["passing", "a_worker_crashes"],
)
def test_a_session_leaves_no_staged_folders(pytester, monkeypatch, tmp_path, submission, outcomes):
    """Nor any worker's home: a crashed worker's went with it once its failure was reported."""
    shutil.copytree(FIXTURES / "core", pytester.path, dirs_exist_ok=True)
    crashy = pytester.path / "submissions/addone/crashy/submission.py"
    crashy.parent.mkdir(parents=True)
    crashy.write_text(SEGFAULTS_ON_SIZE_3)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # where tempfile.mkdtemp stages, in the child
    # Looked at when pytest unconfigures, i.e. after the session ended, before interpreter exit.
    pytester.makeconftest(
        """
        import os
        from pathlib import Path

        def pytest_unconfigure(config):
            left = sorted(p.name for p in Path(os.environ["TMPDIR"]).glob("kb-*"))
            Path("left.txt").write_text("\\n".join(left))
        """
    )
    result = pytester.runpytest_subprocess(f"submissions/addone/{submission}/submission.py")
    result.assert_outcomes(**outcomes, deselected=1)
    assert (pytester.path / "left.txt").read_text() == ""
    assert not list(scratch.glob("kb-*"))


def test_a_judge_removes_its_shared_memory_folders_when_it_exits():
    """The folders of torch_shm_manager's socket and of the registry's lie in /tmp (a socket
    path must be short), one each per judge process, apart (no worker is given torch's): the
    judge's exit takes both away once the managers, which outlive the judge by a moment, have
    removed their sockets, so torch's exits cleanly."""
    judge = (
        "import torch\n"
        "from pytest_kernelboard.supervisor import shm_manager\n"
        "shm_manager.shm_manager_folders()\n"
        "print(shm_manager.shm_manager_home(), shm_manager.shm_manager_dir(),"
        " shm_manager.registry_socket())\n"
    )
    # The manager inherits the judge's stderr: run() returns once the manager has exited too.
    ran = subprocess.run(
        [sys.executable, "-c", judge], capture_output=True, text=True, check=True, timeout=120
    )
    home, manager, registry = map(Path, ran.stdout.split())
    assert home.name.startswith("kb-shm-")
    assert registry.parent == home
    assert manager.parent.name.startswith("kb-judge-shm-")  # torch's: not in a worker's folder
    assert not manager.is_relative_to(home)
    assert "terminate called" not in ran.stderr, ran.stderr  # its exit found its folder
    deadline = time.monotonic() + 10
    while (home.exists() or manager.parent.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not home.exists()
    assert not manager.parent.exists()


@pytest.fixture(autouse=True)
def _nothing_staged_before():
    staging.remove_staged()
    yield
    staging.remove_staged()
