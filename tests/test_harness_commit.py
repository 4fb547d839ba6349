"""A run records the commit of the harness's checkout, marked where its files differ from it
(results/recorder.py): a result carries what is needed to reproduce it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_kernelboard.results.recorder import MODIFIED, checkout_commit

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@needs_git
def test_a_clean_checkout_gives_its_commit_and_a_changed_one_says_so(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "timing.py").write_text("TIMING = 1\n")
    (tmp_path / "README.md").write_text("outside the package\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "first")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert checkout_commit(package) == head

    (tmp_path / "README.md").write_text("changed outside the package\n")
    assert checkout_commit(package) == head  # only the package's own files count

    (package / "timing.py").write_text("TIMING = 2\n")
    assert checkout_commit(package) == head + MODIFIED

    git(tmp_path, "checkout", "-q", "--", "pkg/timing.py")
    (package / "extra.py").write_text("NEW = True\n")  # a file the commit does not have
    assert checkout_commit(package) == head + MODIFIED
