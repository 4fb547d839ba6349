"""On a real GPU: the reference is timed once and reused; speed of light of a copy-like kernel.

Runs only with CUDA. One leaderboard (negate a 256 MiB float32 vector: read 256 MiB, write
256 MiB) and one submission identical to the reference.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from test_gpu_timing import REFERENCE, SUBMISSIONS, TASK

from pytest_kernelboard.judge import devices
from pytest_kernelboard.results.records import validate_run
from pytest_kernelboard.results.store import add_run

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device"),
]
PLAIN = "submissions/negate/plain/submission.py"


@pytest.fixture
def negate_repo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    board = pytester.path / "leaderboards" / "negate"
    board.mkdir(parents=True)
    (board / "task.yml").write_text(TASK + f'gpus: ["{devices.device_name()}"]\n')
    (board / "reference.py").write_text(REFERENCE)
    folder = pytester.path / "submissions" / "negate" / "plain"
    folder.mkdir(parents=True)
    (folder / "submission.py").write_text(textwrap.dedent(SUBMISSIONS["plain"]))
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def run(pytester, *options: str) -> dict:
    result = pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-results", "out.json", *options, PLAIN
    )
    result.assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "out.json").read_text())
    validate_run(doc)
    return doc


def benchmark(evaluation: dict) -> dict:
    (case,) = [c for c in evaluation["cases"] if c["kind"] == "benchmark"]
    assert case["status"] == "passed", case["message"]
    return case


def test_reference_is_timed_once_and_speed_of_light_is_physical(pytester, negate_repo):
    first = run(pytester)
    submission, reference = first["evaluations"]
    assert reference["submission"]["is_reference"]
    case = benchmark(submission)
    timing = case["timing"]
    # A 512 MiB stream on an HBM GPU reaches most of the peak, and never more than the floor
    # check allows (median >= 0.9 x floor, so the mean cannot be far below the floor).
    assert 0.3 < timing["speed_of_light"] < 1.12, timing
    # Against the statistic that ranks (the median), as the PR comment and the site show it.
    assert timing["speed_of_light"] == pytest.approx(
        timing["floor_us"] / timing["rank_us"], rel=1e-5
    )
    assert benchmark(reference)["timing"]["speed_of_light"] > 0.3
    assert case["reference_run"]["source"] == "measured"

    add_run(negate_repo, first)
    second = run(pytester)
    assert len(second["evaluations"]) == 1
    again = benchmark(second["evaluations"][0])
    assert again["reference_run"]["source"] == "store"
    assert again["reference_timing"]["mean_us"] == benchmark(reference)["timing"]["mean_us"]
    # identical code: the speedup against the stored reference stays near 1
    assert 0.9 < again["speedup"] < 1.1, again["speedup"]

    forced = run(pytester, "--kb-remeasure-reference")
    assert len(forced["evaluations"]) == 2
    assert benchmark(forced["evaluations"][0])["reference_run"]["source"] == "measured"
