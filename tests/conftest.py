import fcntl
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import forked_pytest
import pytest

FIXTURES = Path(__file__).parent / "fixtures"
# Set where the machine must have every system tool the tests use (CI installs them): a missing
# one then fails its tests instead of skipping them.
REQUIRE_SYSTEM_TOOLS = "KERNELBOARD_REQUIRE_SYSTEM_TOOLS"
BROWSER_INSTALL = "apt-get install chromium chromium-driver"
SANDBOX_INSTALL = "apt-get install bubblewrap"
# An addone submission whose worker dies of SIGSEGV on the size-3 case (the other case passes).
SEGFAULTS_ON_SIZE_3 = """
import ctypes

def custom_kernel(data):
    x, out = data
    if x.numel() == 3:
        ctypes.string_at(0)  # reads address 0: a real segmentation fault
    return out.copy_(x + 1)
"""
# Fixture leaderboards and submissions are inputs of the tests, not tests themselves.
collect_ignore = ["fixtures"]
pytest_plugins = ["pytester"]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` runs one xdist process more than the machine has cores. A good part of this
    suite waits on the wall clock (hang and stall windows, timeouts, servers and clusters
    starting) rather than computing; the extra process keeps the cores busy meanwhile (2 cores:
    175 s against 194 s with a warm build cache)."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The items that take longest start first, one at the head of each xdist process's share.

    Under `-n`, worksteal first hands each process a contiguous slice of this order (process j:
    what is left // the processes left), and later moves work only from the end of a queue. The
    CUDA leaderboard's self-check builds (`nvcc -c` of torch's headers: 70 s of one core each
    with a cold build cache) are collected last of all, so they started last and ended the run
    on one core while the others idled; placed all at the head of one slice they would run one
    after another. Every process collects the same order, as xdist requires."""
    processes = getattr(config, "workerinput", {}).get("workercount", 1)
    long_items = [item for item in items if _runs_long(item)]
    long_items.sort(key=lambda item: not _is_cuda_build(item))  # the builds are the longest
    rest = [item for item in items if not _runs_long(item)]
    ordered: list[pytest.Item] = []
    for process in range(processes):
        share = (len(items) - len(ordered)) // (processes - process)
        heads = long_items[process::processes]
        ordered += heads
        ordered += rest[: max(0, share - len(heads))]
        del rest[: max(0, share - len(heads))]
    items[:] = ordered + rest


def _is_cuda_build(item: pytest.Item) -> bool:
    return item.nodeid.endswith(".cu]")  # a `lang: cu` leaderboard's solution: built with nvcc


def _runs_long(item: pytest.Item) -> bool:
    return _is_cuda_build(item) or item.get_closest_marker("runs_long") is not None


@pytest.fixture
def torch_imported() -> None:
    """torch imported in this test process before pytester takes its snapshot of sys.modules:
    a test that imports it afterwards (a results document asks torch for the device) would
    otherwise see pytester drop torch's modules at its end, and the next test to import torch
    would load its C extension a second time: a segmentation fault in the collector."""
    import torch  # noqa: F401


@pytest.fixture
def pytester(torch_imported: None, pytester: pytest.Pytester) -> pytest.Pytester:
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
    from pytest_kernelboard.supervisor.pool import WorkerPool

    pool = WorkerPool()
    yield pool
    pool.close()


def made_once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[], Any]
) -> Any:
    """make()'s result (JSON), made by the first xdist process of the run to ask for it and
    read by the others. A module fixture otherwise runs once in every process that takes one of
    its tests, and runs_long items are dealt one to each process, so all at once."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        return make()
    shared = tmp_path_factory.getbasetemp().parent  # every process's basetemp is under it
    made = shared / f"{name}-{run}.json"  # this run's: a --basetemp kept from an earlier run
    with open(shared / f"{name}-{run}.lock", "w") as lock:  # cannot hand over its results
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait while the first makes it
        if not made.is_file():
            made.write_text(json.dumps(make()))
        return json.loads(made.read_text())


def missing_system_tool(what: str, install: str) -> NoReturn:
    """A test needs a system tool this machine lacks (the browser, bubblewrap): skip, saying how
    to install it, or fail where KERNELBOARD_REQUIRE_SYSTEM_TOOLS=1. Test modules import it as
    `from conftest import missing_system_tool` (pytest puts tests/ on the path)."""
    message = f"{what}; to install: {install}"
    if os.environ.get(REQUIRE_SYSTEM_TOOLS) == "1":
        pytest.fail(f"{message} ({REQUIRE_SYSTEM_TOOLS}=1: required here)", pytrace=False)
    pytest.skip(message)
