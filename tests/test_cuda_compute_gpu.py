"""cuda.compute on a Python leaderboard, on a real GPU: the bundled prefixsum submission (CUB's
inclusive scan, JIT-compiled at import inside the sandboxed worker, with no network there) is
judged and timed like any other, and the same code with the wrong operator fails the check."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.judge import devices
from pytest_kernelboard.results.records import validate_run
from pytest_kernelboard.supervisor import sandbox

ROOT = Path(__file__).resolve().parent.parent
SUBMISSION = ROOT / "submissions" / "prefixsum" / "cuda-compute" / "submission.py"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device"),
    pytest.mark.skipif(
        importlib.util.find_spec("cuda") is None
        or importlib.util.find_spec("cuda.compute") is None,
        reason='needs cuda.compute: pip install -e ".[cuda-compute]"',
    ),
]


@pytest.fixture
def prefixsum_repo(pytester: pytest.Pytester, monkeypatch) -> Path:
    shutil.copytree(
        ROOT / "leaderboards" / "prefixsum", pytester.path / "leaderboards" / "prefixsum"
    )
    shutil.copyfile(ROOT / "leaderboards" / "utils.py", pytester.path / "leaderboards" / "utils.py")
    source = SUBMISSION.read_text()
    running_max = source.replace("OpKind.PLUS", "OpKind.MAXIMUM")
    assert running_max != source  # the wrong variant really differs
    for author, text in (("cccl", source), ("wrong", running_max)):
        folder = pytester.path / "submissions" / "prefixsum" / author
        folder.mkdir(parents=True)
        (folder / "submission.py").write_text(text)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # this checkout
    if sandbox.probe() is None:  # the JIT build must work in the cage: no network, scratch home
        monkeypatch.setenv("KERNELBOARD_SANDBOX", "require")
    return pytester.path


def test_a_cuda_compute_scan_is_judged_and_timed(pytester, prefixsum_repo):
    pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-results", "out.json", "--kb-timeout", "120", "submissions"
    )
    doc = json.loads((prefixsum_repo / "out.json").read_text())
    validate_run(doc)
    by_author = {e["submission"]["author"]: e for e in doc["evaluations"]}
    cccl = by_author["cccl"]
    assert cccl["summary"]["status"] == "passed", cccl
    for case in cccl["cases"]:
        assert case["status"] == "passed", case
        if case["kind"] == "benchmark":
            assert case["timing"]["mean_us"] > 0 and case["speedup"] > 0
    wrong = by_author["wrong"]
    assert wrong["summary"]["status"] == "failed"
    assert any(c["status"] == "failed" for c in wrong["cases"] if c["kind"] == "test")
