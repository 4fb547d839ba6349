"""A shipped solution whose optional toolchain (JAX) is not installed is skipped, not failed."""

from __future__ import annotations

from pytest_kernelboard.plugin.selfcheck import missing_optional_package


def test_a_missing_optional_toolchain_is_named() -> None:
    assert missing_optional_package("ModuleNotFoundError: No module named 'jax'") == "jax"
    assert missing_optional_package("No module named 'jaxlib.xla_client'") == "jaxlib"
    assert missing_optional_package("No module named 'jax_cuda_plugin': ...") == "jax_cuda_plugin"
    assert missing_optional_package("No module named 'jaxtyping'") is None
    assert missing_optional_package("AssertionError: mismatch") is None


def test_the_self_check_skips_a_solution_whose_jax_is_missing(
    pytester, core_repo, monkeypatch
) -> None:
    import shutil
    from pathlib import Path

    board = pytester.path / "leaderboards" / "addone"
    shutil.copytree(core_repo / "leaderboards", pytester.path / "leaderboards")
    correct = board / "solutions" / "correct"
    correct.mkdir(parents=True, exist_ok=True)
    # What a JAX solution meets on a machine without JAX (or without the module it needs).
    (correct / "submission_needs_jax.py").write_text(
        "import jax.not_installed_here\n\ndef custom_kernel(data):\n    return data[1]\n"
    )
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    root = Path(__file__).resolve().parent.parent
    monkeypatch.setenv("PYTHONPATH", str(root))  # this checkout, in the subprocess too
    result = pytester.runpytest_subprocess("leaderboards/addone", "-k", "needs_jax", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs the optional package jax*"])
