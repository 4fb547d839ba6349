"""`kernelboard import kernelbench`: KernelBench-shaped problems become leaderboards."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.importers import kernelbench
from pytest_kernelboard.spec.task import load_task

FIXTURES = Path(__file__).parent / "fixtures" / "kernelbench"
ROOT = Path(__file__).resolve().parent.parent
UTILS = ROOT / "leaderboards" / "utils.py"


@pytest.fixture(autouse=True)
def this_checkout(monkeypatch) -> None:
    """pytester's subprocess (and its workers) import this checkout's package."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    kernelbench.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_problems_are_chosen_by_stem_or_number() -> None:
    stems = [p.stem for p in kernelbench.problem_files(FIXTURES, 1, ["3", "2_Row_logsoftmax"])]
    assert stems == ["2_Row_logsoftmax", "3_Conv_relu"]
    assert len(kernelbench.problem_files(FIXTURES, 1)) == 4
    with pytest.raises(kernelbench.ImportError_, match="no problem '99'"):
        kernelbench.problem_files(FIXTURES, 1, ["99"])
    with pytest.raises(kernelbench.ImportError_, match="level7"):
        kernelbench.problem_files(FIXTURES, 7)


def test_import_writes_leaderboards_and_flags_the_degenerate_one(tmp_path: Path, capsys) -> None:
    dest = tmp_path / "leaderboards" / "kernelbench"
    assert run_cli(["kernelbench", str(FIXTURES), "--level", "1", "--dest", str(dest)]) == 0
    err = capsys.readouterr().err
    assert "kernelbench_l1_4_saturated_mask: degenerate reference (its output is all zeros)" in err
    assert err.count("degenerate") == 1  # only the degenerate problem is flagged
    meta = json.loads((dest / "l1_4_saturated_mask" / "kernelbench.json").read_text())
    assert meta["degenerate"] == "its output is all zeros"
    assert (
        "WARNING: degenerate reference" in (dest / "l1_4_saturated_mask" / "README.md").read_text()
    )
    linear = load_task(dest / "l1_1_scaled_linear" / "task.yml")
    assert linear.name == "kernelbench_l1_1_scaled_linear"
    # Test cases shrink; the benchmark keeps KernelBench's sizes.
    assert {c["scale"] for c in linear.tests} == {64} and linear.benchmarks[0]["scale"] == 1
    meta = json.loads((dest / "l1_1_scaled_linear" / "kernelbench.json").read_text())
    assert meta["degenerate"] is None
    assert (
        meta["test_shapes"]["in_features"] == 4 and meta["benchmark_shapes"]["in_features"] == 256
    )
    assert (dest / "l1_1_scaled_linear" / "problem.py").read_bytes() == (
        FIXTURES / "level1" / "1_Scaled_linear.py"
    ).read_bytes()


def test_an_input_returned_as_output_is_degenerate(tmp_path: Path) -> None:
    level = tmp_path / "level1"
    level.mkdir()
    source = (FIXTURES / "level1" / "2_Row_logsoftmax.py").read_text()
    (level / "7_Identity.py").write_text(source.replace("torch.log_softmax(x, dim=self.dim)", "x"))
    (imported,) = kernelbench.import_kernelbench(tmp_path, 1, None, tmp_path / "out")
    assert imported.degenerate == "its output equals an input"


def test_the_reference_passes_its_self_check(pytester: pytest.Pytester) -> None:
    kernelbench.import_kernelbench(
        FIXTURES, 1, ["1"], pytester.path / "leaderboards" / "kernelbench"
    )
    shutil.copyfile(UTILS, pytester.path / "leaderboards" / "utils.py")
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    result = pytester.runpytest_subprocess("leaderboards")
    # task, 3 reference cases, the ModelNew baseline passes, the off-by-one fails as it should;
    # the benchmark-sized reference case waits for a GPU.
    result.assert_outcomes(passed=6, skipped=1)


MODEL_NEW = """
import torch
from torch import nn


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x - torch.logsumexp(x, dim=self.dim, keepdim=True)
"""


def test_a_model_new_submission_is_judged_and_timed_with_a_speedup(
    pytester: pytest.Pytester,
) -> None:
    kernelbench.import_kernelbench(
        FIXTURES, 1, ["2"], pytester.path / "leaderboards" / "kernelbench"
    )
    folder = pytester.path / "submissions" / "kernelbench_l1_2_row_logsoftmax" / "alice"
    folder.mkdir(parents=True)
    (folder / "submission.py").write_text(MODEL_NEW)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    result = pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-timeout", "10", "--kb-results", "out.json", "submissions"
    )
    result.assert_outcomes(passed=4)
    doc = json.loads((pytester.path / "out.json").read_text())
    # The submission's evaluation, then the reference run measured with it (reference_runs.py).
    (evaluation,) = [e for e in doc["evaluations"] if not e["submission"].get("is_reference")]
    (bench,) = [c for c in evaluation["cases"] if c["kind"] == "benchmark"]
    assert bench["timing"]["mean_us"] > 0 and bench["reference_timing"]["mean_us"] > 0
    speedup = evaluation["summary"]["speedup"]
    assert speedup == pytest.approx(
        bench["reference_timing"]["rank_us"] / bench["timing"]["rank_us"]
    )
    shares = kernelbench.fast_p_over_problems([evaluation])
    assert shares["fast_0"] == 1.0 and shares["fast_1"] == (1.0 if speedup > 1 else 0.0)
    # The results document carries fast_p over the run's KernelBench problems, per author.
    (alice,) = doc["kernelbench"].values()
    assert alice["problems"] == 1
    assert alice["fast_p"]["0"] == 1.0 and alice["fast_p"]["1"] == (1.0 if speedup > 1 else 0.0)


def _evaluation(status: str, speedup: float | None) -> dict:
    return {"summary": {"status": status, "speedup": speedup}}


def test_fast_p_over_problems_matches_a_hand_computed_value() -> None:
    evaluations = [
        _evaluation("passed", 2.5),  # correct, 2.5x
        _evaluation("passed", 1.2),  # correct, 1.2x
        _evaluation("passed", 0.7),  # correct but slower
        _evaluation("failed", 3.0),  # fast but wrong: never counts
        _evaluation("passed", None),  # correct, not timed: counts only for fast_0
    ]
    # By hand: fast_0 = 4/5 correct; fast_0.5 = 3/5 (2.5, 1.2, 0.7); fast_1 = 2/5 (2.5, 1.2);
    # fast_1.5 = 1/5 (2.5); fast_2 = 1/5 (2.5).
    assert kernelbench.fast_p_over_problems(evaluations) == {
        "fast_0": 0.8,
        "fast_0.5": 0.6,
        "fast_1": 0.4,
        "fast_1.5": 0.2,
        "fast_2": 0.2,
    }


def test_the_run_document_gets_fast_p_per_author_over_kernelbench_problems() -> None:
    def evaluation(board: str, author: str, status: str, speedup: float | None, ref=False):
        return {
            "leaderboard": {"name": board},
            "submission": {"author": author, "is_reference": ref},
            "summary": {"status": status, "speedup": speedup},
        }

    evaluations = [
        evaluation("kernelbench_l1_1_a", "alice", "passed", 1.8),
        evaluation("kernelbench_l1_2_b", "alice", "passed", 0.9),
        evaluation("kernelbench_l1_3_c", "alice", "failed", None),
        evaluation("kernelbench_l1_1_a", "bob", "passed", 1.1),
        evaluation("kernelbench_l1_1_a", "reference", "passed", 1.0, ref=True),  # not a method
        evaluation("vectoradd", "alice", "passed", 5.0),  # not a KernelBench problem
    ]
    # By hand: alice 3 problems: fast_0 2/3, fast_0.5 2/3, fast_1 1/3, fast_1.5 1/3, fast_2 0;
    # bob 1 problem at 1.1x: fast_0 = fast_0.5 = fast_1 = 1, fast_1.5 = fast_2 = 0.
    summary = kernelbench.run_fast_p(evaluations)
    assert summary["alice"] == {
        "problems": 3,
        "fast_p": {"0": 2 / 3, "0.5": 2 / 3, "1": 1 / 3, "1.5": 1 / 3, "2": 0.0},
    }
    assert summary["bob"]["fast_p"] == {"0": 1.0, "0.5": 1.0, "1": 1.0, "1.5": 0.0, "2": 0.0}
    assert kernelbench.run_fast_p(evaluations[-1:]) is None
