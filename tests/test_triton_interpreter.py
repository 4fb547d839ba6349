"""A Triton kernel that loops to a runtime bound runs on the CPU, through the interpreter.

Each kernel runs in a fresh Python process with TRITON_INTERPRET=1 set before Triton is
imported, as in the worker, so the patch of one test cannot leak into another.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

from pytest_kernelboard.supervisor.environment import package_root

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="Triton is not installed"
)

# A row-wise sum whose loop bound `n_cols` is a plain runtime argument, not tl.constexpr:
# 100 columns in blocks of 32, so the last block is partial and masked.
ROW_SUM = """
import os
os.environ["TRITON_INTERPRET"] = "1"
if {patch}:
    from pytest_kernelboard.worker.triton_compat import patch_triton_interpreter
    patch_triton_interpreter()

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + offs, mask=offs < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc))


x = torch.arange(4 * 100, dtype=torch.float32).reshape(4, 100)
out = torch.zeros(4)
row_sum[(4,)](x, out, x.shape[1], BLOCK=32)
print("SUMS", out.tolist())
"""
EXPECTED = [float(sum(range(100 * r, 100 * (r + 1)))) for r in range(4)]


def run_python(source: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(package_root()))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def sums(result: subprocess.CompletedProcess) -> list[float]:
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("SUMS "))
    return [float(v) for v in line.removeprefix("SUMS ").strip("[]").split(",")]


@needs_triton
def test_runtime_loop_bound_works_with_the_patch():
    assert sums(run_python(ROW_SUM.format(patch=True))) == EXPECTED


@needs_triton
def test_runtime_loop_bound_fails_without_the_patch():
    """Proves the patch does something: the bare interpreter fails on the same kernel."""
    result = run_python(ROW_SUM.format(patch=False))
    if result.returncode == 0:
        pytest.skip("the installed Triton and NumPy run runtime loop bounds unpatched")
    assert "only 0-dimensional arrays can be converted to Python scalars" in result.stderr


@needs_triton
def test_patch_is_idempotent_and_scoped_to_launches():
    result = run_python(
        """
        import os
        os.environ["TRITON_INTERPRET"] = "1"
        from pytest_kernelboard.worker.triton_compat import patch_triton_interpreter
        patch_triton_interpreter()
        from triton.runtime import interpreter
        first = interpreter._patch_lang_tensor
        patch_triton_interpreter()
        assert interpreter._patch_lang_tensor is first, "wrapped twice"
        import triton.language as tl
        assert "__index__" not in vars(tl.tensor), "__index__ left installed outside a launch"
        print("OK")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout


def test_module_does_not_import_triton_and_is_a_noop_without_it():
    result = run_python(
        """
        import sys
        from pytest_kernelboard.worker.triton_compat import patch_triton_interpreter
        assert "triton" not in sys.modules, "importing the module imported Triton"
        sys.modules["triton"] = None  # as if Triton were not installed
        patch_triton_interpreter()
        assert not any(name.startswith("triton.") for name in sys.modules), "imported Triton"
        print("OK")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout
