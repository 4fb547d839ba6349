"""The device-memory fixtures, checked on a CPU: sizes, arithmetic, and that they judge.

Two sets (GPU use in test_memory_gpu.py and benchmarks/memory_peak.py):
- fixtures/kernelbench_big/: seven KernelBench-shaped problems at KernelBench's level-1 sizes,
  each with an identical-code submission (ModelNew = Model);
- fixtures/memory/leaderboards/: four GPU MODE-format leaderboards whose benchmark case needs
  20-30 GB under a frugal harness, each with a correct and a wrong solution.
Sizes are checked on the meta device, so nothing large is allocated here.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import yaml

from pytest_kernelboard import cli
from pytest_kernelboard.importers import kernelbench

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
KB_BIG = FIXTURES / "kernelbench_big"
MEMORY = FIXTURES / "memory" / "leaderboards"
GIB = 1 << 30
GB = 10**9
HARNESS_ALLOWANCE = 2 * GIB  # the "+ 2 GiB" of the bound: contexts, allocator slack
H100_BYTES = 80 * GIB  # more than an H100 80GB has (81,559 MiB)

# The seven, at KernelBench's published level-1 sizes: (inputs, outputs) in bytes, by hand.
KB_SIZES = {
    "19_ReLU": (6 * GIB, 6 * GIB),  # [4096, 393216] fp32 = 1.5 Gi elements * 4 B
    "23_Softmax": (6 * GIB, 6 * GIB),
    "24_LogSoftmax": (6 * GIB, 6 * GIB),
    "36_RMSNorm_": (7 * GIB, 7 * GIB),  # [112, 64, 512, 512] fp32 = 1.75 Gi elements
    # [128, 4096, 4095] fp32 in (8 GiB - 2 MiB), [128, 1, 4095] out (2 MiB - 512 B)
    "47_Sum_reduction_over_a_dimension": (8 * GIB - 2 * 2**20, 2 * 2**20 - 512),
    "89_cumsum": (4 * GIB, 4 * GIB),  # [32768, 32768] fp32 = 1 Gi elements
    "97_ScaledDotProductAttention": (3 * 2 * GIB, 2 * GIB),  # 3 x [32, 32, 512, 1024] fp32
}

# The four memory leaderboards: (inputs + outputs, the reference's working memory) as their
# READMEs state them; an output that is one of the inputs' own tensors counts once.
MEMORY_SIZES = {
    "memory_axpy": (10.5 * GIB, 0),
    "memory_row_sumsq": (7 * GIB + 57344 * 4, 7 * GIB),
    "memory_scale_into": (11 * GIB, 0),
    "memory_sign_split": (9 * GIB, 3 * GIB),
}


@pytest.fixture(autouse=True)
def this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester's subprocess (and its workers) import this checkout's package."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def build_repo(root: Path, *, kernelbench_big: bool = True, memory: bool = True) -> Path:
    """A repository of the fixtures: the seven imported with `kernelboard import kernelbench`
    and their identical-code submissions; the four memory leaderboards (in a `memory` group)
    with their correct solutions as submissions (author `correct`)."""
    if kernelbench_big:
        dest = root / "leaderboards" / "kernelbench"
        assert (
            cli.main(["import", "kernelbench", str(KB_BIG), "--level", "1", "--dest", str(dest)])
            == 0
        )
        shutil.copytree(KB_BIG / "submissions", root / "submissions", dirs_exist_ok=True)
    if memory:
        shutil.copytree(MEMORY, root / "leaderboards" / "memory", dirs_exist_ok=True)
        for name in MEMORY_SIZES:
            (solution,) = (MEMORY / name / "solutions" / "correct").glob("*.py")
            folder = root / "submissions" / name / "correct"
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(solution, folder / "submission.py")
    return root


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nbytes(values: Any) -> int:
    """Bytes of the tensors in values, each tensor counted once (an output may be an input)."""
    seen: dict[int, torch.Tensor] = {}
    stack = [values]
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            seen[id(value)] = value
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return sum(t.numel() * t.element_size() for t in seen.values())


def benchmark_case(folder: Path) -> dict[str, Any]:
    (case,) = yaml.safe_load((folder / "task.yml").read_text())["benchmarks"]
    return case


# -- the seven KernelBench-shaped problems ----------------------------------------------------
@pytest.mark.parametrize("stem", sorted(KB_SIZES))
def test_a_kernelbench_problem_has_the_published_size(stem: str) -> None:
    problem = _load(KB_BIG / "level1" / f"{stem}.py", f"kb_big_{stem}")
    with torch.device("meta"):  # shapes and dtypes only: nothing is allocated
        inputs = problem.get_inputs()
        output = problem.Model(*problem.get_init_inputs())(*inputs)
    assert all(t.dtype == torch.float32 for t in [*inputs, output])
    assert (nbytes(inputs), nbytes(output)) == KB_SIZES[stem]


def test_softmax_bound_is_26_gib() -> None:
    inputs, outputs = KB_SIZES["23_Softmax"]
    # 2 x (6 + 6) + 0 + 2 = 26 GiB, where KernelBench's own evaluator peaks at 43.6 GB.
    assert 2 * (inputs + outputs) + 0 + HARNESS_ALLOWANCE == 26 * GIB


def test_every_problem_has_an_identical_code_submission() -> None:
    boards = {
        kernelbench.leaderboard_name(1, stem)[1]: stem
        for stem in (p.stem for p in kernelbench.problem_files(KB_BIG, 1))
    }
    assert sorted(boards.values()) == sorted(KB_SIZES)
    for board in boards:
        source = (KB_BIG / "submissions" / board / "identical" / "submission.py").read_text()
        assert "from problem import Model" in source and "ModelNew = Model" in source


# -- the four memory leaderboards ---------------------------------------------------------------
def load_memory_reference(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The leaderboard's reference.py with its inputs drawn on the meta device."""
    utils = _load(MEMORY / "memory_utils.py", "memory_utils")
    task = _load(MEMORY / name / "task.py", "task")
    monkeypatch.setitem(sys.modules, "memory_utils", utils)
    monkeypatch.setitem(sys.modules, "task", task)
    reference = _load(MEMORY / name / "reference.py", f"memory_reference_{name}")
    monkeypatch.setattr(reference, "device", lambda: torch.device("meta"))
    monkeypatch.setattr(reference, "make_generator", lambda seed: None)
    return reference


@pytest.mark.parametrize("name", sorted(MEMORY_SIZES))
def test_a_memory_leaderboard_needs_20_to_30_gb(name: str, monkeypatch) -> None:
    reference = load_memory_reference(name, monkeypatch)
    data = reference.generate_input(**benchmark_case(MEMORY / name))
    output = reference.ref_kernel(data)
    inputs_outputs, working = MEMORY_SIZES[name]
    assert nbytes([data, output]) == inputs_outputs
    bound = 2 * inputs_outputs + working + HARNESS_ALLOWANCE
    assert 20 * GB <= bound <= 30 * GB, f"{name}: bound {bound / GB:.1f} GB"
    readme = (MEMORY / name / "README.md").read_text()
    assert f"**{bound / GIB:.0f} GiB** ({bound / GB:.1f} GB)" in readme


def test_the_four_together_do_not_fit_on_one_h100() -> None:
    # Without the per-process allowance even: so under -n 4 on one GPU some case must wait.
    need = sum(2 * io + working for io, working in MEMORY_SIZES.values())
    assert need > H100_BYTES, f"{need / GB:.1f} GB"


def test_the_chunked_check_finds_a_difference_in_a_later_chunk(monkeypatch) -> None:
    utils = _load(MEMORY / "memory_utils.py", "memory_utils_under_test")
    monkeypatch.setattr(utils, "CHUNK", 4)
    expected = torch.arange(10, dtype=torch.float32)
    received = expected.clone()
    assert utils.check_close(received, expected, rtol=0, atol=0) == (True, "match")
    received[7] += 1
    received[9] = float("nan")
    ok, message = utils.check_close(received, expected, rtol=0, atol=0)
    assert not ok and message.startswith("2 of 10 elements differ")
    assert "first at flat index 7: received 8, expected 7" in message
    ok, message = utils.check_close((expected, received), (expected, expected), 0, 0)
    assert not ok and message.startswith("output[1]: 2 of 10")
    assert utils.check_close(expected[:9], expected, 0, 0) == (False, "shape (9,), expected (10,)")


# -- judged on the CPU (two tests, so that -n 2 runs them side by side) ------------------------------
@pytest.mark.runs_long
def test_the_seven_pass_their_self_check_and_an_identical_submission_passes(
    pytester: pytest.Pytester,
) -> None:
    build_repo(pytester.path, memory=False)
    imported = json.loads(
        (pytester.path / "leaderboards/kernelbench/l1_23_softmax/kernelbench.json").read_text()
    )
    assert imported["benchmark_shapes"] == {"batch_size": 4096, "dim": 393216}
    assert imported["degenerate"] is None
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    # One identical-code submission stands for the seven (the same two lines each, checked
    # above).
    result = pytester.runpytest_subprocess(
        "leaderboards", "submissions/kernelbench_l1_23_softmax", "-q", "-rfEs"
    )
    # Per leaderboard: the task, 3 reference test cases, its correct solution passes and its
    # wrong one fails as it should; the benchmark-sized reference case waits for a GPU.
    # The submission: its 3 test cases pass.
    result.assert_outcomes(passed=7 * 6 + 3, skipped=7)


def test_the_memory_leaderboards_pass_their_self_check(pytester: pytest.Pytester) -> None:
    build_repo(pytester.path, kernelbench_big=False)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    result = pytester.runpytest_subprocess("leaderboards", "-q", "-rfEs")
    # As above: the correct solutions pass, the wrong ones fail, the big case waits for a GPU.
    result.assert_outcomes(passed=4 * 6, skipped=4)
