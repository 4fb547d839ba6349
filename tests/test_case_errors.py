"""A case whose judging raises is recorded as `error`, never dropped from the results."""

from __future__ import annotations

import json
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


def test_a_raising_checker_yields_error_cases(pytester, repo):
    reference = repo / "leaderboards/addone/reference.py"
    text = reference.read_text().replace(
        "def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:\n",
        "def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:\n"
        "    raise ValueError('checker exploded')\n",
    )
    assert "checker exploded" in text
    reference.write_text(text)
    result = pytester.runpytest_subprocess(
        "--kb-results", "out.json", "submissions/addone/alice/submission.py"
    )
    result.assert_outcomes(failed=2, deselected=1)
    doc = json.loads((repo / "out.json").read_text())
    validate_run(doc)
    (evaluation,) = doc["evaluations"]
    cases = evaluation["cases"]
    assert [c["kind"] for c in cases] == ["test", "test"]
    assert [c["status"] for c in cases] == ["error", "error"]
    # The traceback's last line names the exception; the judge raised, not the submission.
    assert all(c["message"].endswith("ValueError: checker exploded") for c in cases)
    assert evaluation["summary"]["status"] == "failed"
    assert evaluation["summary"]["tests_passed"] == 0
