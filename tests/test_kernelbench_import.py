"""`kernelboard import kernelbench`: KernelBench-shaped problems become leaderboards."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tomllib
from pathlib import Path
from types import ModuleType

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
    # Only the degenerate problem is flagged: its progress line, its warning, the summary.
    flagged = [line for line in err.splitlines() if "degenerate" in line]
    assert len(flagged) == 3 and all("4_saturated_mask" in line.lower() for line in flagged[:2])
    assert "4 imported (1 flagged degenerate), 0 skipped" in flagged[2]
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


CASES = Path(__file__).parent / "fixtures" / "kernelbench_cases" / "level1"


def level_with(tmp_path: Path, *numbers: str) -> Path:
    """A KernelBench folder whose level1/ holds two problems that import and the numbered
    problems of fixtures/kernelbench_cases."""
    level = tmp_path / "kernelbench" / "level1"
    level.mkdir(parents=True)
    for name in ("1_Scaled_linear.py", "2_Row_logsoftmax.py"):
        shutil.copyfile(FIXTURES / "level1" / name, level / name)
    for path in CASES.glob("*.py"):
        if path.stem.split("_")[0] in numbers:
            shutil.copyfile(path, level / path.name)
    return level.parent


def progress_lines(err: str) -> dict[str, str]:
    """The per-problem lines of stderr, by problem file stem (details below a line joined)."""
    lines: dict[str, str] = {}
    last = None
    for line in err.splitlines():
        if line.startswith("["):
            last = line.split("] ", 1)[1].split(":", 1)[0]
            lines[last] = line
        elif line.startswith("    ") and last:
            lines[last] += "\n" + line
    return lines


def test_problems_that_cannot_be_imported_shrunk_or_run_are_skipped_and_the_rest_imported(
    tmp_path: Path, capsys
) -> None:
    root = level_with(tmp_path, "5", "6", "7", "8", "9", "10")
    dest = tmp_path / "out"
    argv = ["kernelbench", str(root), "--level", "1", "--dest", str(dest), "--memory-limit", "1.2"]
    status = run_cli(argv)
    err = capsys.readouterr().err
    lines = progress_lines(err)
    assert list(lines) == [
        "1_Scaled_linear",
        "2_Row_logsoftmax",
        "5_Missing_module",
        "6_Never_runs",
        "7_Huge_published",
        "8_Huge_unshrinkable",
        "9_Memory_hog",
        "10_Crashes",
    ], err
    assert lines["1_Scaled_linear"].startswith("[1/8 ")
    assert lines["10_Crashes"].startswith("[8/8 ")
    assert (
        "1_Scaled_linear: imported as l1_1_scaled_linear; test shapes / 64: batch_size 32 -> 4, "
        "in_features 256 -> 4, out_features 128 -> 4 (" in lines["1_Scaled_linear"]
    )
    # KernelBench's 100_HingeLoss: a shape tuple shrinks with the integer it repeats, so the
    # problem imports at scale 64 without its published 16 GiB (get_inputs() raises on those).
    assert (
        "7_Huge_published: imported as l1_7_huge_published; test shapes / 64: batch_size 65536 "
        "-> 1024, input_shape (65536,) -> (1024,)" in lines["7_Huge_published"]
    )
    assert (
        "5_Missing_module: skipped: cannot import: ModuleNotFoundError: No module named "
        "'kernelboard_fixture_module_that_does_not_exist'" in lines["5_Missing_module"]
    )
    assert "6_Never_runs: skipped: the reference does not run at any test scale" in err
    assert "scale 64: RuntimeError" in lines["6_Never_runs"]
    # Too large at the one size that would run: sized on the meta device, never allocated.
    assert (
        "8_Huge_unshrinkable: skipped: the reference does not run" in lines["8_Huge_unshrinkable"]
    )
    assert (
        "scale 1: inputs and output 64.0 GiB, over the test cases' 256 MiB (never allocated)"
        in lines["8_Huge_unshrinkable"]
    )
    assert "scale 64: ValueError: width 4096" in lines["8_Huge_unshrinkable"]
    assert "MemoryError" not in err
    assert "9_Memory_hog: skipped: stopped: its process passed --memory-limit 1.2 GB" in err
    assert "10_Crashes: skipped: its process died (exit status -9) before it was done" in err
    assert (
        "level 1: 8 problems in " in err
        and "s: 3 imported, 5 skipped (5_Missing_module, 6_Never_runs, 8_Huge_unshrinkable, "
        "9_Memory_hog, 10_Crashes)"
        in err
    )
    assert status == 5  # the exit status is the number of problems skipped
    assert sorted(p.name for p in dest.iterdir()) == [
        "kernelbench_utils.py",
        "l1_1_scaled_linear",
        "l1_2_row_logsoftmax",
        "l1_7_huge_published",
    ]
    meta = json.loads((dest / "l1_7_huge_published" / "kernelbench.json").read_text())
    assert meta["test_shapes"] == {"batch_size": 1024, "input_shape": [1024]}
    assert meta["benchmark_shapes"] == {"batch_size": 65536, "input_shape": [65536]}


def test_problems_with_large_published_sizes_import_within_small_memory(tmp_path: Path) -> None:
    """The problems' processes report their peak RSS (torch's own pages included): small, for
    16 GiB of published inputs and for a model of 2 GiB as published, built at the test scale."""
    report = kernelbench.import_level(level_with(tmp_path, "7", "12"), 1, None, tmp_path / "out")
    assert [(p.source, p.scale) for p in report.imported] == [
        ("1_Scaled_linear", 64),
        ("2_Row_logsoftmax", 64),
        ("7_Huge_published", 64),
        ("12_Hidden_state_from_constants", 64),
    ]
    for item in report.imported:
        assert 0 < item.peak_rss < 1.0e9, (item.source, item.peak_rss)


def test_a_model_reading_its_shape_constants_passes_its_self_check(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """The test cases build the model while the constants are shrunk, as the import did."""
    kernelbench.import_kernelbench(
        level_with(tmp_path, "12"), 1, ["12"], pytester.path / "leaderboards" / "kernelbench"
    )
    shutil.copyfile(UTILS, pytester.path / "leaderboards" / "utils.py")
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    result = pytester.runpytest_subprocess("leaderboards")
    result.assert_outcomes(passed=6, skipped=1)


def test_a_problem_that_hangs_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    root = level_with(tmp_path, "11")
    lines: list[str] = []
    report = kernelbench.import_level(
        root, 1, ["2", "11"], tmp_path / "out", timeout_s=3, progress=lines.append
    )
    assert [p.source for p in report.imported] == ["2_Row_logsoftmax"]
    (hung,) = report.skipped
    assert hung.reason == "stopped: still running after --timeout 3 s"
    assert 3 <= hung.seconds < 20
    assert lines[1].startswith("[2/2 ") and "11_Hangs: skipped: stopped: still running" in lines[1]
    with pytest.raises(kernelbench.ImportError_, match="level1/11_Hangs.py: stopped"):
        kernelbench.import_kernelbench(root, 1, ["11"], tmp_path / "again", timeout_s=1)


def test_a_missing_package_of_the_kernelbench_extra_is_named(tmp_path: Path, monkeypatch) -> None:
    """Level 3's Mamba2 problems import einops: the reason names the extra that installs it."""
    problem = tmp_path / "48_Mamba2ReturnY.py"
    problem.write_text("from einops import rearrange\n")
    monkeypatch.setitem(sys.modules, "einops", None)  # as if it were not installed
    with pytest.raises(kernelbench.ImportError_) as raised:
        kernelbench.load_problem(problem)
    assert "cannot import: ModuleNotFoundError" in str(raised.value)
    assert 'pip install -e ".[kernelbench]"' in str(raised.value)
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(kernelbench.EXTRA_MODULES) <= set(extras["optional-dependencies"]["kernelbench"])


def test_shape_tuples_shrink_with_the_integers() -> None:
    kbu = pytest.importorskip("pytest_kernelboard.importers.kernelbench_utils")
    problem = ModuleType("problem")
    problem.batch_size, problem.input_shape, problem.kernel = 4096, (4096, 3, 64), [3, 5]
    problem.flag, problem.scale = True, 0.5
    with kbu.scaled(problem, 64) as shrunk:
        assert shrunk == {"batch_size": 64, "input_shape": (64, 3, 4), "kernel": [3, 5]}
        assert problem.input_shape == (64, 3, 4)
    assert (problem.batch_size, problem.input_shape, problem.kernel) == (
        4096,
        (4096, 3, 64),
        [3, 5],
    )


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
