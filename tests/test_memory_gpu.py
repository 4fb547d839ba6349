"""On a GPU with at least 70 GiB: the device-memory fixtures judged at full size (issue 22).

- The seven KernelBench-shaped problems at KernelBench's level-1 sizes (6-8 GiB inputs), each
  with its identical-code submission, judged in benchmark mode as a user would: every one
  passes, is timed with a speedup, and is tied with the reference.
- Four leaderboards that each need 20-30 GB at their peak, judged together (self-check and
  submissions) under `pytest -n 4` on one GPU: together they need more than an 80 GB GPU
  holds, so cases must wait for memory; none may fail for lack of it.
The fixtures and their arithmetic: test_memory_fixtures.py and the fixtures' READMEs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_memory_fixtures import KB_BIG, MEMORY_SIZES, ROOT, build_repo

from pytest_kernelboard.importers import kernelbench
from pytest_kernelboard.judge import devices
from pytest_kernelboard.plugin.xdist_gpus import visible_gpus

MIN_GPU_GIB = 70
RUN_TIMEOUT_S = 1800  # seven cases of 8-14 GiB, each timed with its reference


def gpu_gib() -> float:
    import torch

    return torch.cuda.get_device_properties(0).total_memory / 2**30


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device"),
    pytest.mark.skipif(
        devices.has_cuda() and gpu_gib() < MIN_GPU_GIB,
        reason=f"the fixtures need a GPU with at least {MIN_GPU_GIB} GiB (an 80 GB H100)",
    ),
]


@pytest.fixture(autouse=True)
def this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester's subprocess (and its workers) import this checkout's package."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def evaluations(folder: Path, pattern: str) -> list[dict[str, Any]]:
    """The submissions' evaluations in the results documents matching pattern (one per xdist
    worker under -n)."""
    found = []
    for path in sorted(folder.glob(pattern)):
        found += json.loads(path.read_text())["evaluations"]
    return [e for e in found if not e["submission"].get("is_reference")]


def benchmark_case(evaluation: dict[str, Any]) -> dict[str, Any]:
    (case,) = [c for c in evaluation["cases"] if c["kind"] == "benchmark"]
    return case


def tail(result: pytest.RunResult, lines: int = 80) -> str:
    return "\n".join(result.outlines[-lines:])


def assert_all_passed(result: pytest.RunResult, passed: int) -> None:
    """Exactly `passed` items passed and none failed, errored or skipped."""
    counts = {k: v for k, v in result.parseoutcomes().items() if k not in ("warnings", "warning")}
    assert counts == {"passed": passed}, tail(result)


def test_the_seven_at_kernelbench_sizes_pass_are_timed_and_tie(
    pytester: pytest.Pytester,
) -> None:
    build_repo(pytester.path, memory=False)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    result = pytester.runpytest_subprocess(
        "submissions",
        "--kb-mode",
        "benchmark",
        "--kb-results",
        "out.json",
        "-q",
        "-rfEs",
        timeout=RUN_TIMEOUT_S,
    )
    boards = [
        kernelbench.leaderboard_name(1, p.stem)[1] for p in kernelbench.problem_files(KB_BIG, 1)
    ]
    found = evaluations(pytester.path, "out.json")
    assert sorted(e["leaderboard"]["name"] for e in found) == sorted(boards), tail(result)
    problems = []  # every problem's verdict, so one (long) run reports all seven
    for evaluation in found:
        name, summary = evaluation["leaderboard"]["name"], evaluation["summary"]
        case = benchmark_case(evaluation)
        if case["status"] != "passed" or summary["status"] != "passed":
            problems.append(f"{name}: {case['status']}: {case.get('message', '')}")
        elif summary.get("speedup") is None or not case.get("reference_timing"):
            problems.append(f"{name}: passed without a speedup")
        elif summary.get("tied_with_reference") is not True:
            problems.append(f"{name}: identical code not tied, speedup {summary['speedup']:.3f}")
    assert not problems, "\n".join(problems) + "\n" + tail(result)
    assert_all_passed(result, 7 * 4)  # per submission: 3 test cases and the benchmark


def test_four_leaderboards_of_20_to_30_gb_share_one_gpu_under_n4(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_repo(pytester.path, kernelbench_big=False)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    # All four xdist workers on one GPU, however many the host has.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible_gpus(dict(os.environ))[0])
    result = pytester.runpytest_subprocess(
        "leaderboards",
        "submissions",
        "-n",
        "4",
        "--dist",
        "loadfile",  # each submission (and each self-check) stays on one xdist worker
        "--kb-mode",
        "benchmark",
        "--kb-results",
        "out.json",
        "-q",
        "-rfEs",
        timeout=RUN_TIMEOUT_S,
    )
    out_of_memory = [line for line in result.outlines if "out of memory" in line.lower()]
    assert not out_of_memory, "\n".join(out_of_memory[:20]) + "\n" + tail(result)
    found = evaluations(pytester.path, "out*.json")  # out.gw0.json ... out.gw3.json
    assert sorted(e["leaderboard"]["name"] for e in found) == sorted(MEMORY_SIZES)
    for evaluation in found:
        case = benchmark_case(evaluation)
        assert case["status"] == "passed", f"{evaluation['leaderboard']['name']}: {case}"
        assert case["timing"]["rank_us"] > 0
        assert evaluation["summary"]["status"] == "passed"
    # Per leaderboard: the self-check's 7 items (task, 3 + 1 reference cases, the correct
    # solution passes, the wrong one fails as it should) and the submission's 4 cases.
    assert_all_passed(result, 4 * (7 + 4))
