"""A case whose judging raises is recorded as `error`, never dropped from the results."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.results.records import validate_run

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    shutil.copytree(FIXTURES / "core", pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def _patch_reference(repo: Path, old: str, new: str) -> None:
    reference = repo / "leaderboards/addone/reference.py"
    text = reference.read_text()
    assert old in text
    reference.write_text(text.replace(old, new))


CHECK = "def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:\n"


def test_a_checker_that_cannot_run_leaves_its_cases_not_run_for_everyone(pytester, repo):
    """The leaderboard's own check raising on the reference's output too is the leaderboard's
    failure: each case is recorded as not run, naming the reference's file and line, and the
    submission is not failed for it."""
    _patch_reference(repo, CHECK, CHECK + "    raise ValueError('checker exploded')\n")
    result = pytester.runpytest_subprocess(
        "--kb-results", "out.json", "submissions/addone/alice/submission.py"
    )
    result.assert_outcomes(skipped=2, deselected=1)
    doc = json.loads((repo / "out.json").read_text())
    validate_run(doc)
    (evaluation,) = doc["evaluations"]
    cases = evaluation["cases"]
    assert [c["status"] for c in cases] == ["not_run", "not_run"]
    for case in cases:
        assert "the leaderboard's reference cannot run this case" in case["message"]
        assert "check_implementation raised ValueError: checker exploded" in case["message"]
        # Where, in the leaderboard's own file: its line, not the harness's frames.
        assert "leaderboards/addone/reference.py:" in case["message"]
        assert "raise ValueError('checker exploded')" in case["message"]
        assert "pytest_kernelboard" not in case["message"]
    assert evaluation["summary"]["status"] == "skipped"


def test_a_reference_out_of_memory_on_one_case_is_that_cases_not_run(pytester, repo):
    """A reference that runs out of memory on one case: that case is not run (the reference
    named as the reason), and the submission passes the others."""
    _patch_reference(
        repo,
        "def ref_kernel(data: input_t) -> output_t:\n",
        "def ref_kernel(data: input_t) -> output_t:\n"
        "    if data[0].numel() == 64:\n"
        "        raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 40.00 GiB')\n",
    )
    result = pytester.runpytest_subprocess(
        "--kb-results", "out.json", "submissions/addone/alice/submission.py"
    )
    result.assert_outcomes(passed=1, skipped=1, deselected=1)
    (evaluation,) = json.loads((repo / "out.json").read_text())["evaluations"]
    small, large = evaluation["cases"]
    assert small["status"] == "passed"
    assert large["status"] == "not_run"
    assert "ref_kernel raised torch.OutOfMemoryError" in large["message"]
    assert evaluation["summary"]["status"] == "passed"


def test_a_check_only_this_output_breaks_fails_the_submission(pytester, repo):
    """check_implementation raising on a malformed output (but not on the reference's own) is
    the submission's failure, and says so."""
    submission = repo / "submissions/addone/alice/submission.py"
    submission.write_text("def custom_kernel(data):\n    return [1, 2, 3]\n")
    result = pytester.runpytest_subprocess(
        "--kb-results", "out.json", "submissions/addone/alice/submission.py"
    )
    result.assert_outcomes(failed=2, deselected=1)
    (evaluation,) = json.loads((repo / "out.json").read_text())["evaluations"]
    for case in evaluation["cases"]:
        assert case["status"] == "failed"
        assert "could not compare this output" in case["message"]
        assert "AttributeError" in case["message"]


def test_a_check_that_spends_the_budget_says_so(pytester, repo):
    """A benchmark case whose correctness check alone outlasts the case's budget times out
    naming the check and how long it took, not "after 0.001 s" of a timing that never began."""
    _patch_reference(
        repo,
        CHECK,
        CHECK + "    if data[0].numel() == 4096:\n        import time\n        time.sleep(2.5)\n",
    )
    pytester.runpytest_subprocess(
        "--kb-results",
        "out.json",
        "--kb-mode",
        "benchmark",
        "--kb-timeout",
        "2",
        "-k",
        "benchmark and submission",
        "submissions/addone/alice/submission.py",
    )
    (evaluation,) = json.loads((repo / "out.json").read_text())["evaluations"]
    (case,) = [c for c in evaluation["cases"] if c["status"] != "deselected"]
    assert case["status"] == "timeout"
    assert case["message"].startswith("timed out after 2 s (the limit that applied")
    assert re.search(r"its correctness check took \d+ s of the case's 2 s", case["message"])
