"""The pytest plugin as a participant and a maintainer meet it: ids, selection, results, self-check.

Each test runs pytest in a subprocess on a private copy of the fixture repository (the plugin
starts worker processes, which an in-process run would share with this one).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import SEGFAULTS_ON_SIZE_3

from pytest_kernelboard.results.records import validate_run

FIXTURES = Path(__file__).parent / "fixtures"
ALICE = "submissions/addone/alice/submission.py"
NODE = f"{ALICE}::addone"
TEST_IDS = [
    f"{NODE}::test[size=3-seed=11-flag=True-label=odd]",
    f"{NODE}::test[size=64-seed=12-flag=False-label=even]",
]
BENCHMARK_IDS = [f"{NODE}::benchmark[size=4096-seed=13-flag=False-label=big]"]
CORRECT = """
def custom_kernel(data):
    x, out = data
    return out.copy_(x + 1)
"""


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    """The core fixture repository, copied into the pytester folder that inner runs start in."""
    shutil.copytree(FIXTURES / "core", pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def collected(result: pytest.RunResult) -> list[str]:
    """Node ids printed by `--collect-only -q`."""
    return [line.strip() for line in result.outlines if "::" in line and " " not in line.strip()]


def test_collected_ids(pytester, repo):
    result = pytester.runpytest_subprocess("--collect-only", "-q", ALICE)
    assert collected(result) == TEST_IDS
    result.stdout.fnmatch_lines(["*2/3 tests collected (1 deselected)*"])


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["-m", "correctness", "--kb-mode", "benchmark", ALICE], TEST_IDS),
        (["-m", "benchmark", "--kb-mode", "benchmark", ALICE], BENCHMARK_IDS),
        (["-m", "benchmark", ALICE], []),  # test mode never runs the timed cases
        (["-k", "even", ALICE], TEST_IDS[1:]),
        (["-k", "odd or big", "--kb-mode", "benchmark", ALICE], TEST_IDS[:1] + BENCHMARK_IDS),
        ([TEST_IDS[1]], TEST_IDS[1:]),  # one case by its node id
    ],
    ids=[
        "m-correctness",
        "m-benchmark",
        "m-benchmark-in-test-mode",
        "k",
        "k-or",
        "node-id",
    ],
)
def test_selection(pytester, repo, options, expected):
    result = pytester.runpytest_subprocess("--collect-only", "-q", *options)
    assert collected(result) == expected
    assert result.ret in (0, 5), result.stderr.str()  # 5: nothing selected


def test_results_document(pytester, repo):
    result = pytester.runpytest_subprocess("--kb-results", "out.json", "submissions")
    result.assert_outcomes(passed=2, deselected=1)
    doc = json.loads((repo / "out.json").read_text())
    validate_run(doc)
    assert doc["mode"] == "test"
    assert doc["environment"]["device"] == "CPU"
    assert doc["environment"]["device_kind"] == "cpu"
    (evaluation,) = doc["evaluations"]
    assert evaluation["leaderboard"]["name"] == "addone"
    assert evaluation["leaderboard"]["ranking_by"] == "geom"
    submission = evaluation["submission"]
    assert submission["path"] == ALICE
    assert submission["author"] == "alice"
    assert submission["sha256"] == hashlib.sha256((repo / ALICE).read_bytes()).hexdigest()
    cases = evaluation["cases"]
    assert [c["kind"] for c in cases] == ["test", "test"]
    assert [c["spec"] for c in cases] == [
        {"size": 3, "seed": 11, "flag": True, "label": "odd"},
        {"size": 64, "seed": 12, "flag": False, "label": "even"},
    ]
    assert [c["status"] for c in cases] == ["passed", "passed"]
    assert [c["message"] for c in cases] == ["", ""]
    assert all(c["duration_s"] >= 0 for c in cases)
    assert evaluation["summary"]["status"] == "passed"
    assert (evaluation["summary"]["tests_passed"], evaluation["summary"]["tests_total"]) == (2, 2)


def test_results_record_the_failure_message(pytester, repo):
    write(
        repo / "submissions/addone/bob/submission.py",
        """
        def custom_kernel(data):
            x, out = data
            return out.copy_(x + 2)
        """,
    )
    result = pytester.runpytest_subprocess("--kb-results", "out.json", "submissions/addone/bob")
    result.assert_outcomes(failed=2, deselected=1)
    result.stdout.fnmatch_lines(["*failed: mismatch at [[]0[]]*"])
    doc = json.loads((repo / "out.json").read_text())
    validate_run(doc)
    (evaluation,) = doc["evaluations"]
    assert evaluation["submission"]["author"] == "bob"
    assert [c["status"] for c in evaluation["cases"]] == ["failed", "failed"]
    assert all("mismatch at [0]" in c["message"] for c in evaluation["cases"])
    assert evaluation["summary"]["status"] == "failed"


def test_a_wrong_submissions_benchmark_case_fails_without_a_teardown_error(pytester, repo):
    """pytest-benchmark warns at teardown about its unused fixture, through the item's warn(),
    which needs the item's line (a case item reports 0); the warning itself would only repeat
    the verdict, so it is filtered on kernelboard's benchmark items."""
    write(
        repo / "submissions/addone/bob/submission.py",
        """
        def custom_kernel(data):
            x, out = data
            return out.copy_(x + 2)
        """,
    )
    result = pytester.runpytest_subprocess("--kb-mode", "benchmark", "submissions/addone/bob")
    result.assert_outcomes(failed=3, errors=0, warnings=0)


def test_popcorn_header_outside_submissions(pytester, repo):
    write(repo / "scratch/mine.py", "#!POPCORN leaderboard addone\n" + CORRECT)
    write(repo / "scratch/plain.py", CORRECT)  # named too, but says no leaderboard
    result = pytester.runpytest_subprocess("-v", "scratch/mine.py", "scratch/plain.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["scratch/mine.py::addone::test[[]size=3-*PASSED*"])
    assert "plain.py::" not in result.stdout.str()


def test_header_file_not_named_is_not_collected(pytester, repo):
    write(repo / "scratch/mine.py", "#!POPCORN leaderboard addone\n" + CORRECT)
    result = pytester.runpytest_subprocess("--collect-only", "-q", "scratch")
    assert collected(result) == []


def test_kb_leaderboard_option(pytester, repo):
    write(repo / "scratch/plain.py", CORRECT)
    result = pytester.runpytest_subprocess("-v", "--kb-leaderboard", "addone", "scratch/plain.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["scratch/plain.py::addone::test[[]*PASSED*"])


def test_unknown_leaderboard_is_one_failing_item(pytester, repo):
    write(repo / "submissions/nosuch/bob/submission.py", CORRECT)
    result = pytester.runpytest_subprocess("-rf", "submissions/nosuch")
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "unknown leaderboard 'nosuch'" in output
    assert "known: addone" in output
    assert "ERROR collecting" not in output
    assert "Traceback" not in output
    result.stdout.fnmatch_lines(["FAILED submissions/nosuch/bob/submission.py::submission*"])


def test_cu_submission_without_nvcc_or_gpu_is_skipped_with_the_reason(pytester, repo, monkeypatch):
    board = repo / "leaderboards/cuadd"
    write(
        board / "reference.py",
        """
        import torch

        def generate_input(size, seed):
            x = torch.arange(size, dtype=torch.float32)
            return x, torch.empty_like(x)

        def ref_kernel(data):
            x, out = data
            return out.copy_(x + 1)

        def check_implementation(data, output):
            return bool(torch.equal(output, data[0] + 1)), "mismatch"
        """,
    )
    write(
        board / "task.yml",
        """
        files:
          - {"name": "submission.cu", "source": "@SUBMISSION@"}
          - {"name": "reference.py", "source": "reference.py"}
        lang: "cu"
        description: "Add one, in CUDA C++."
        config:
          sources: ["submission.cu"]
          include_dirs: []
          defines: {}
          compile_flags: []
        tests:
          - {"size": 3, "seed": 1}
          - {"size": 5, "seed": 2}
        """,
    )
    write(repo / "submissions/cuadd/bob/submission.cu", "__global__ void add_one() {}\n")
    monkeypatch.setenv("PATH", os.pathsep.join(["/usr/bin", "/bin"]))  # no nvcc on it
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))  # this checkout
    result = pytester.runpytest_subprocess("-v", "-rs", "submissions/cuadd")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(
        [
            "*submission.cu::cuadd::test[[]size=3-seed=1[]] SKIPPED*",
            "SKIPPED*needs CUDA, which this machine lacks:*",
            "*BuildUnavailable: nvcc: not found*",
        ]
    )


def test_segfault_fails_only_its_case(pytester, repo):
    write(repo / "submissions/addone/crashy/submission.py", SEGFAULTS_ON_SIZE_3)
    result = pytester.runpytest_subprocess("-v", "submissions/addone/crashy")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*::test[[]size=3-*FAILED*",
            "*::test[[]size=64-*PASSED*",
        ]
    )
    output = result.stdout.str()
    assert "crashed" in output and "SIGSEGV" in output


def test_selfcheck_passes_on_the_fixture(pytester, repo):
    result = pytester.runpytest_subprocess("-v", "-rs", "leaderboards")
    result.assert_outcomes(passed=6, skipped=1)  # the benchmark-sized reference needs a GPU
    result.stdout.fnmatch_lines_random(
        [
            "*task.yml::task PASSED*",
            "*task.yml::reference[[]test:size=3-*PASSED*",
            "*task.yml::reference[[]test:size=64-*PASSED*",
            "*task.yml::reference[[]benchmark:size=4096-*SKIPPED*",
            "*task.yml::template[[]Python[]] PASSED*",
            "*task.yml::solution[[]correct/torch_add.py[]] PASSED*",
            "*task.yml::solution[[]wrong/skips_last.py[]] PASSED*",
        ]
    )


def test_selfcheck_fails_when_the_wrong_solution_passes(pytester, repo):
    write(repo / "leaderboards/addone/solutions/wrong/skips_last.py", CORRECT)
    result = pytester.runpytest_subprocess("-v", "leaderboards")
    result.assert_outcomes(passed=5, skipped=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*solution[[]wrong/skips_last.py[]] FAILED*",
            "*wrong solution skips_last.py passes every test case*",
        ]
    )


def test_selfcheck_reports_a_broken_task_yml(pytester, repo):
    task_yml = repo / "leaderboards/addone/task.yml"
    task_yml.write_text(task_yml.read_text() + "block_size: 128\n")
    result = pytester.runpytest_subprocess("-v", "leaderboards")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*task.yml::task FAILED*", "*unknown key(s) 'block_size'*"])
    assert "ERROR collecting" not in result.stdout.str()


def test_a_case_not_run_says_why_without_rs(pytester, repo):
    """A submission that hangs times out on its first case; the cases after it show only 's' in
    the progress line, so the kernelboard summary says why they did not run, one line per
    reason, without -rs."""
    write(
        repo / "submissions/addone/spin/submission.py",
        """
        def custom_kernel(data):
            while True:
                pass
        """,
    )
    result = pytester.runpytest_subprocess("--kb-timeout", "2", "submissions/addone/spin")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*kernelboard (test mode on CPU)*",
            "addone spin/submission.py: failed, tests 0/2",
            "  not run: test[[]size=64-seed=12-flag=False-label=even[]]: an earlier case, "
            "*::addone::test[[]size=3-*, timed out",
        ]
    )


def test_benchmark_output_reads_plainly_with_dist_in_addopts(pytester, repo, monkeypatch):
    """`--dist` in the project's addopts without `-n` is no xdist run: pytest-benchmark neither
    warns that xdist is active nor drops the device samples. A case whose budget allows one call
    says so instead of showing an interval from it, and no progress line reads 'inf%'."""
    # The inner run is no xdist worker, even where this test runs in one (pytest-benchmark
    # reads the variable, which the inner run would inherit).
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider --dist worksteal\n")
    write(
        repo / "submissions/addone/slow/submission.py",
        """
        import time

        def custom_kernel(data):
            time.sleep(0.3)
            x, out = data
            return out.copy_(x + 1)
        """,
    )
    # --kb-timeout 10 leaves a case the least budget (0.1 s): one call of 0.3 s uses it up.
    result = pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-timeout", "10", "submissions/addone/slow"
    )
    result.assert_outcomes(passed=3)
    output = result.stdout.str() + result.stderr.str()
    assert "xdist plugin is active" not in output and "PytestBenchmarkWarning" not in output
    assert "inf%" not in output and "+/-" not in output
    result.stdout.fnmatch_lines(
        [
            "*addone benchmark[[]size=4096-*]: median * (1 call in the 0.1 s budget: no "
            "interval), reference *: *",
            "*benchmark*addone*",  # pytest-benchmark's own table: it kept the samples
        ]
    )
    summary = next(line for line in result.outlines if line.startswith("addone slow/"))
    # One case timed once: the run's speedup has no interval to show either.
    assert summary.endswith("× the reference (a case was timed once: no interval)"), summary
