"""lang: cu on a real GPU: the built entry point is judged and timed like a Python submission,
and a build slower than the case timeout still passes (it runs under the build budget)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.judge import devices
from pytest_kernelboard.results.records import validate_run

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device"),
]

LEADERBOARDS = Path(__file__).resolve().parent.parent / "leaderboards"
BOARD = LEADERBOARDS / "vectoradd_cu"


@pytest.fixture
def cu_repo(pytester: pytest.Pytester, tmp_path: Path, monkeypatch) -> Path:
    shutil.copytree(BOARD, pytester.path / "leaderboards" / "vectoradd_cu")
    shutil.copyfile(LEADERBOARDS / "utils.py", pytester.path / "leaderboards" / "utils.py")
    solutions = BOARD / "solutions"
    for author, source in (
        ("alice", solutions / "correct" / "submission_cuda.cu"),
        ("bob", solutions / "wrong" / "submission_tail_unwritten.cu"),
        ("carol", solutions / "wrong" / "submission_compile_error.cu"),
    ):
        folder = pytester.path / "submissions" / "vectoradd_cu" / author
        folder.mkdir(parents=True)
        shutil.copyfile(source, folder / "submission.cu")
    # A cold build cache: every build really happens, under a 1 s case timeout.
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    monkeypatch.setenv("PYTHONPATH", str(LEADERBOARDS.parent))  # this checkout
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return pytester.path


def test_cuda_source_is_built_judged_and_timed_like_python(pytester, cu_repo):
    pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-results", "out.json", "--kb-timeout", "30", "submissions"
    )
    doc = json.loads((cu_repo / "out.json").read_text())
    validate_run(doc)
    by_author = {e["submission"]["author"]: e for e in doc["evaluations"]}
    alice = by_author["alice"]
    assert alice["summary"]["status"] == "passed", alice
    for case in alice["cases"]:
        assert case["status"] == "passed", case
        if case["kind"] == "benchmark":
            assert case["timing"]["mean_us"] > 0 and case["speedup"] > 0
    assert by_author["bob"]["summary"]["status"] == "failed"
    carol = [c for c in by_author["carol"]["cases"] if c["status"] != "passed"]
    assert carol and "undeclared_helper" in carol[0]["message"]  # nvcc's own message


def test_a_build_slower_than_the_case_timeout_passes(pytester, cu_repo):
    result = pytester.runpytest_subprocess(
        "--kb-timeout", "1", "submissions/vectoradd_cu/alice/submission.cu"
    )
    result.assert_outcomes(passed=4)
