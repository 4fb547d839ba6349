"""The hostile corpus: every file in tests/hostile/ behaves as its first line says.

Each file is a submission for the fixture leaderboard `addone`, judged once (one worker start
per file; a shared pool starts the next worker while one runs). Header lines:

  # expect: STATUS [STAT>=N] [text the message must contain]   (STAT: a timing key, median_us)
  # mode: benchmark            (else one correctness case)
  # timeout: SECONDS           (the case's limit, for files that hang on purpose)
  # needs: sandbox | gpu | unprivileged
                               (sandbox: skipped with the reason where bwrap cannot run, and
                                 an error under KERNELBOARD_SANDBOX=require, as in CI;
                                 unprivileged: RLIMIT_NPROC does not bind a root judge)
  # cpu-only                   (the judge's CPU clock is what the file attacks)
  # absent: PATH               (must not exist afterwards)
  # no-process: TEXT           (no process whose command line holds TEXT survives the judge)
  # cleanup: GLOB              (removed afterwards: what the file leaves on purpose)

Placeholders (@PORT@, @SECRET_HEX@, @JUDGE_PID@, ...) are filled in by the runner before judging.
A hostile file that reads something it must not raises it in its message; the runner also
checks that no secret appears there.
"""

from __future__ import annotations

import glob
import os
import re
import secrets
import shutil
import socket
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import SANDBOX_INSTALL, missing_system_tool

from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.measure import TimingPlan
from pytest_kernelboard.spec.cases import BENCHMARK, TEST, Case
from pytest_kernelboard.stats.stopping import StoppingRule, Warmup
from pytest_kernelboard.supervisor import sandbox
from pytest_kernelboard.supervisor.environment import default_cache_dir, package_root

HOSTILE = Path(__file__).parent / "hostile"
PLAN = TimingPlan(
    rule=StoppingRule(precision=0.5, min_samples=12, min_time_s=0.0, budget_s=3.0),
    warmup=Warmup(max_calls=3),
    flush_bytes=0,
)
FILES = sorted(HOSTILE.glob("*.py"))


@dataclass
class Header:
    status: str
    bound: tuple[str, float] | None = None  # a timing statistic's lower bound
    text: str = ""
    mode: str = "test"
    timeout_s: float = 60.0
    needs: set[str] = field(default_factory=set)
    cpu_only: bool = False
    absent: list[str] = field(default_factory=list)
    no_process: list[str] = field(default_factory=list)
    cleanup: list[str] = field(default_factory=list)


def parse_header(source: str) -> Header:
    lines = source.splitlines()
    first = re.fullmatch(r"# expect: (\w+)(?: (\w+_us)>=(\d+))?(?: (.*))?", lines[0])
    assert first, f"the first line must be '# expect: STATUS ...', not {lines[0]!r}"
    bound = (first[2], float(first[3])) if first[2] else None
    header = Header(first[1], bound, first[4] or "")
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        key, _, value = line[1:].strip().partition(":")
        value = value.strip()
        if key == "mode":
            header.mode = value
        elif key == "timeout":
            header.timeout_s = float(value)
        elif key == "needs":
            header.needs.add(value)
        elif key == "cpu-only":
            header.cpu_only = True
        elif key in ("absent", "no-process", "cleanup"):
            getattr(header, key.replace("-", "_")).append(value)
    return header


def test_the_corpus_is_large_and_every_file_declares_its_outcome():
    assert len(FILES) >= 25
    for path in FILES:
        header = parse_header(path.read_text())
        assert header.status in ("passed", "failed", "error", "crashed", "timeout"), path.name


def judge_environ_secret() -> str:
    """One NAME=value entry of this process's initial environment that the worker must not see
    (what /proc/<judge>/environ shows); KB_HOSTILE_SECRET when CI sets one."""
    entries = Path("/proc/self/environ").read_bytes().decode(errors="replace").split("\0")
    entries = [e for e in entries if "=" in e]
    for entry in entries:
        if entry.startswith("KB_HOSTILE_SECRET="):
            return entry
    for entry in entries:
        name, _, value = entry.partition("=")
        if name not in ("PATH", "HOME", "LANG", "TERM", "SHELL", "USER", "LOGNAME", "PWD"):
            if len(value) >= 4 and not name.startswith(("LC_", "CUDA", "NVIDIA")):
                return entry
    pytest.skip("this process has no environment entry to use as the judge's secret")


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    yield server
    server.close()


def _process_with(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_hostile_submission(path, addone_task, addone_modules, worker_pool, listener, tmp_path):
    header = parse_header(path.read_text())
    use_cuda = devices.has_cuda()
    if "gpu" in header.needs and not use_cuda:
        pytest.skip("needs a CUDA GPU (run on the H100 with -m gpu)")
    if "unprivileged" in header.needs and os.geteuid() == 0:
        pytest.skip("the process limit does not bind root: judge as an unprivileged account")
    if header.cpu_only and use_cuda:
        pytest.skip("attacks the judge's CPU clock; runs on CPU machines")
    if "sandbox" in header.needs and not sandbox.enabled():  # raises under =require
        missing_system_tool(
            f"needs the worker sandbox, unavailable here: {sandbox.probe()}", SANDBOX_INSTALL
        )

    marker = f"kbhostile{secrets.token_hex(6)}"
    secret = judge_environ_secret()
    secret_file = tmp_path / "judge_secret.txt"
    secret_file.write_text("judge-only " + marker)
    values = {
        "@PORT@": str(listener.getsockname()[1]),
        "@SECRET_HEX@": secret.encode().hex(),
        "@SECRET_FILE@": str(secret_file),
        "@JUDGE_PID@": str(os.getpid()),
        "@JUDGE_TMP@": str(tmp_path),
        "@SITE_PACKAGES@": sysconfig.get_paths()["purelib"],
        "@USER_CACHE@": os.path.join(os.path.expanduser("~"), ".cache"),
        "@CACHE_ROOT@": str(default_cache_dir()),
        "@REPO@": str(package_root()),
        "@MARKER@": marker,
    }

    def fill(text: str) -> str:
        for key, value in values.items():
            text = text.replace(key, value)
        return text

    submission = tmp_path / "submission.py"
    submission.write_text(fill(path.read_text()))
    judge = SubmissionJudge(addone_task, addone_modules, submission, use_cuda, pool=worker_pool)
    absent = [Path(fill(p)) for p in header.absent]
    try:
        started = time.perf_counter()
        if header.mode == "benchmark":
            case = Case(BENCHMARK, 0, addone_task.benchmarks[0])
            outcome = judge.benchmark_case(case, header.timeout_s, PLAN)
        else:
            outcome = judge.check_case(Case(TEST, 0, addone_task.tests[0]), header.timeout_s)
        elapsed = time.perf_counter() - started
    finally:
        judge.close()
        worker_pool.prestart()  # the next file's worker starts while this one's checks run
        for pattern in header.cleanup:
            for leftover in glob.glob(fill(pattern)):
                os.remove(leftover)
        planted = [p for p in absent if os.path.lexists(p)]
        for p in planted:
            shutil.rmtree(p) if p.is_dir() else p.unlink()

    assert outcome.status == header.status, f"{path.name}: {outcome.status}: {outcome.message}"
    assert header.text in outcome.message, outcome.message
    assert secret not in outcome.message and marker not in outcome.message
    assert "LEAKED" not in outcome.message and "ATTACHED" not in outcome.message
    if header.bound is not None:
        stat, lowest = header.bound
        assert outcome.timing[stat] >= lowest, outcome.timing
    assert not planted, f"{path.name} wrote {planted}"
    with pytest.raises(BlockingIOError):
        listener.accept()  # nothing reached the judge's loopback port
    deadline = time.monotonic() + 5.0
    while _process_with(fill(" ".join(header.no_process))) if header.no_process else False:
        assert time.monotonic() < deadline, f"{path.name} left processes behind"
        time.sleep(0.1)
    # The judge is alive and waited no longer than the case's limit (plus its worker's start).
    assert elapsed < header.timeout_s + 30.0
