import functools
import os
from pathlib import Path
from typing import NoReturn

import forked_pytest
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
# Set where the machine must have every system tool the tests use (CI installs them): a missing
# one then fails its tests instead of skipping them.
REQUIRE_SYSTEM_TOOLS = "KERNELBOARD_REQUIRE_SYSTEM_TOOLS"
BROWSER_INSTALL = "apt-get install chromium chromium-driver"
SANDBOX_INSTALL = "apt-get install bubblewrap"
# Fixture leaderboards and submissions are inputs of the tests, not tests themselves.
collect_ignore = ["fixtures"]
pytest_plugins = ["pytester"]


@pytest.fixture
def pytester(pytester: pytest.Pytester) -> pytest.Pytester:
    """pytester whose nested `pytest` runs fork from a process that has imported torch
    (tests/forked_pytest.py): each is still a judge process of its own, without the import."""
    pytester.popen = functools.partial(forked_pytest.popen, pytester.popen)
    return pytester


@pytest.fixture
def core_repo(tmp_path: Path) -> Path:
    """A private copy of the fixture repository (leaderboards/ + submissions/)."""
    import shutil

    dest = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", dest)
    return dest


@pytest.fixture(scope="module")
def addone_task():
    """The fixture repository's addone leaderboard (x + 1 into a given output), loaded."""
    from pytest_kernelboard.spec.task import load_task

    return load_task(FIXTURES / "core" / "leaderboards" / "addone" / "task.yml")


@pytest.fixture(scope="module")
def addone_modules(addone_task):
    from pytest_kernelboard.judge.reference_loader import LeaderboardModules

    return LeaderboardModules(addone_task)


@pytest.fixture(scope="module")
def worker_pool():
    """One pool for a module's judges: the next worker starts while a test runs."""
    from pytest_kernelboard.worker.client import WorkerPool

    pool = WorkerPool()
    yield pool
    pool.close()


def missing_system_tool(what: str, install: str) -> NoReturn:
    """A test needs a system tool this machine lacks (the browser, bubblewrap): skip, saying how
    to install it, or fail where KERNELBOARD_REQUIRE_SYSTEM_TOOLS=1. Test modules import it as
    `from conftest import missing_system_tool` (pytest puts tests/ on the path)."""
    message = f"{what}; to install: {install}"
    if os.environ.get(REQUIRE_SYSTEM_TOOLS) == "1":
        pytest.fail(f"{message} ({REQUIRE_SYSTEM_TOOLS}=1: required here)", pytrace=False)
    pytest.skip(message)
