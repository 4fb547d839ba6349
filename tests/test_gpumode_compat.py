"""A problem folder in GPU MODE's layout runs unmodified.

The fixture keeps their conventions: a problem-set group with shared ../utils.py, ../eval.py and
../template.py, references that hard-code device="cuda", both forms of check_implementation,
boolean case values, and none of our extension keys.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.discovery import load_catalog
from pytest_kernelboard.spec.task import GPUMODE_KEYS, load_task

GPUMODE = Path(__file__).parent / "fixtures" / "gpumode"
GROUP = GPUMODE / "leaderboards" / "pmpp"
SUBMISSION = "submissions/vectoradd_py/gm/submission.py"
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture
def gpumode_repo(pytester: pytest.Pytester) -> Path:
    shutil.copytree(GPUMODE, pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def test_fixture_uses_only_gpumode_keys():
    for name in ("vectoradd_py", "grayscale_py"):
        raw = yaml.safe_load((GROUP / name / "task.yml").read_text())
        assert set(raw) <= GPUMODE_KEYS, name
        assert "gpus" not in raw and "ranking_by" not in raw


def test_the_folder_loads_unmodified(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(GPUMODE, root)
    catalog = load_catalog(root)
    assert sorted(catalog.tasks) == ["grayscale_py", "vectoradd_py"]
    vectoradd = catalog.get("vectoradd_py")
    assert vectoradd.root == (root / "leaderboards" / "pmpp" / "vectoradd_py").resolve()
    support = dict(vectoradd.support_files())
    assert support["utils.py"] == (root / "leaderboards" / "pmpp" / "utils.py").resolve()
    assert support["eval.py"] == (root / "leaderboards" / "pmpp" / "eval.py").resolve()
    assert vectoradd.config == {"main": "eval.py"}
    assert vectoradd.templates == {"Python": "../template.py"}
    assert vectoradd.ranking_by == "last" and vectoradd.gpus == ()
    assert vectoradd.tests[1] == {"size": 128, "seed": 5236, "contiguous": False}
    grayscale = catalog.get("grayscale_py")
    assert (grayscale.test_timeout, grayscale.ranked_timeout) == (120, 300)
    assert grayscale.tests[0]["clamp"] is True


def test_both_check_forms_are_understood():
    """The older '' == ok string and the (bool, str) tuple, on hand-made CPU tensors."""
    vectoradd = LeaderboardModules(load_task(GROUP / "vectoradd_py" / "task.yml"))
    a, b = torch.ones(2, 2, dtype=torch.float16), torch.ones(2, 2, dtype=torch.float16)
    assert vectoradd.check((a, b), a + b) == (True, "")
    ok, message = vectoradd.check((a, b), a + b + 1)
    assert not ok and "mismatch found" in message

    grayscale = LeaderboardModules(load_task(GROUP / "grayscale_py" / "task.yml"))
    image = torch.full((2, 2, 3), 0.5)
    assert grayscale.check(image, image.sum(-1) * 0.0 + 0.49995) == (True, "")
    ok, message = grayscale.check(image, torch.zeros(2, 2))
    assert not ok and "mismatch found" in message


@pytest.mark.skipif(HAS_CUDA, reason="checks the behaviour without a GPU")
def test_without_cuda_the_cases_are_skipped(pytester, gpumode_repo):
    result = pytester.runpytest_subprocess(
        "-v", "-rs", "--kb-results", "out.json", "leaderboards", "submissions"
    )
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes, result.stdout.str()
    assert "ERROR collecting" not in result.stdout.str()
    # every correctness case of the submission is skipped, not failed or errored ...
    node = f"{SUBMISSION}::vectoradd_py"
    result.stdout.fnmatch_lines_random(
        [
            f"{node}::test[[]size=127-seed=4242-contiguous=True[]] SKIPPED*",
            f"{node}::test[[]size=128-seed=5236-contiguous=False[]] SKIPPED*",
            f"{node}::test[[]size=129-seed=1001-contiguous=True[]] SKIPPED*",
            f"{node}::test[[]size=256-seed=5531-contiguous=True[]] SKIPPED*",
            # ... and the task definitions themselves pass the self-check without a GPU
            "leaderboards/pmpp/vectoradd_py/task.yml::task PASSED*",
            "leaderboards/pmpp/grayscale_py/task.yml::task PASSED*",
        ]
    )
    # ... with a reason that says CUDA is what is missing
    doc = json.loads((gpumode_repo / "out.json").read_text())
    (evaluation,) = doc["evaluations"]
    cases = evaluation["cases"]
    assert len(cases) == 4
    assert all(c["status"] == "skipped" and "CUDA" in c["message"] for c in cases), cases
    assert evaluation["summary"]["status"] == "skipped"
    reasons = [line for line in result.outlines if line.startswith("SKIPPED")]
    assert reasons and all("CUDA" in line or "GPU" in line for line in reasons), reasons


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_on_a_gpu_every_case_passes(pytester, gpumode_repo):
    result = pytester.runpytest_subprocess("-v", "-rfEs", "leaderboards", "submissions")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and "errors" not in outcomes, result.stdout.str()
    assert "skipped" not in outcomes, result.stdout.str()
    # 4 vectoradd correctness cases for the submission, and the self-check of both problems:
    # task + reference on every case (4+2, 3+2) + template, per problem
    result.stdout.fnmatch_lines([f"{SUBMISSION}::*::test[[]size=127-*PASSED*"])
    assert outcomes["passed"] == 4 + (1 + 6 + 1) + (1 + 5 + 1)
