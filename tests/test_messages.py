"""What a participant reads: limits named with how to change them, cases not run said so,
headers that rerun the case, an import failure shown once, the leaderboard's own errors at its
file and line, progress and the speedup while benchmark mode runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SUBMISSION = "submissions/addone/alice/submission.py"
HANGS = "import time\n\ndef custom_kernel(data):\n    while True:\n        time.sleep(0.1)\n"


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    shutil.copytree(FIXTURES / "core", pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def run(pytester: pytest.Pytester, *args: str) -> str:
    result = pytester.runpytest_subprocess("-rs", *args)
    return result.stdout.str()


def test_a_timeout_names_the_limit_that_applied_and_how_to_change_it(pytester, repo):
    (repo / SUBMISSION).write_text(HANGS)
    out = run(pytester, SUBMISSION, "--kb-timeout", "2")
    assert (
        "timed out after 2 s (the limit that applied: --kb-timeout 2; without it, test_timeout "
        "in task.yml allows 20 s)" in out
    )
    # The case after it is not run, and says which case timed out; it is no second failure.
    assert (
        re.search(
            r"SKIPPED .*not run: an earlier case, alice/submission.py::addone::test\[size=3-", out
        )
        or "not run: an earlier case, alice/submission.py::addone::test[size=3-" in out
    )
    assert "1 failed, 1 skipped" in out


def test_without_an_override_the_timeout_names_task_yml(pytester, repo):
    task = repo / "leaderboards/addone/task.yml"
    task.write_text(task.read_text().replace("test_timeout: 20", "test_timeout: 2"))
    (repo / SUBMISSION).write_text(HANGS)
    out = run(pytester, SUBMISSION)
    assert (
        "timed out after 2 s (the limit that applied: test_timeout: 2 in task.yml; change it "
        "with --kb-timeout SECONDS)" in out
    )


def test_a_failure_header_is_the_command_that_reruns_the_case(pytester, repo):
    (repo / SUBMISSION).write_text("def custom_kernel(data):\n    return data[1].fill_(0)\n")
    out = run(pytester, SUBMISSION)
    header = re.search(r"_+ (pytest \S+) _+", out)
    assert header, out
    command = header.group(1)
    assert command.startswith(f"pytest {SUBMISSION}::addone::test[size=")
    # Pasted back, it runs exactly that case.
    rerun = pytester.runpytest_subprocess(command.removeprefix("pytest "))
    rerun.assert_outcomes(failed=1)


def test_an_import_error_is_shown_once_without_harness_frames(pytester, repo):
    (repo / SUBMISSION).write_text("def custom_kernel(data)\n    return data\n")
    out = run(pytester, SUBMISSION)
    assert out.count("SyntaxError: expected ':'") == 1
    assert "frozen importlib" not in out
    assert "the submission failed to import; the message is shown once, on " in out
    assert "2 failed" in out


def test_the_leaderboards_own_error_points_at_its_file_and_line(pytester, repo):
    reference = repo / "leaderboards/addone/reference.py"
    reference.write_text(
        reference.read_text().replace(
            "def generate_input(size: int, seed: int, flag: bool, label: str)",
            "def generate_input(size: int, seed: int, flag: bool)",
        )
    )
    out = run(pytester, "leaderboards/addone")
    assert "the reference cannot run" in out
    assert "generate_input raised TypeError" in out and "unexpected keyword argument 'label'" in out
    # Short, and about the leaderboard: no page of harness frames.
    failure = out[out.index("FAILURES") : out.index("short test summary")]
    assert "pytest_kernelboard/" not in failure
    first = failure.split("_ reference[", 2)
    assert len(first[1].splitlines()) < 15 if len(first) > 1 else True
    # A submission to it is not failed for the leaderboard's error: its cases are not run.
    sub = run(pytester, SUBMISSION)
    assert "not run: the leaderboard's reference cannot run this case" in sub
    assert "failed" not in sub.splitlines()[-1]


def test_benchmark_mode_shows_each_timed_case_and_the_speedup(pytester, repo):
    out = run(pytester, SUBMISSION, "--kb-mode", "benchmark", "-p", "no:randomly")
    assert re.search(r"addone benchmark\[size=4096[^\]]*\]: median [\d.]+ [µm]?s", out), out
    assert re.search(r"reference [\d.]+ [µm]?s: [\d.]+×; stopped: \w+", out), out
    assert re.search(
        r"addone alice/submission.py: passed, .* score [\d.]+ [µm]?s, [\d.]+× the reference", out
    )
