"""The `kernelboard` command line: installed script and `python -m` entry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_kernelboard import cli

SUBCOMMANDS = ("new", "pr", "results", "site")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def kernelboard_script() -> str:
    """The installed console script: next to this interpreter first, else on PATH."""
    beside = Path(sys.executable).with_name("kernelboard")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("kernelboard")
    if found is None:
        pytest.fail("the kernelboard console script is not installed")
    return found


def assert_lists_subcommands(help_text: str) -> None:
    assert help_text.startswith("usage: kernelboard")
    listed = [line.split()[0] for line in help_text.splitlines() if line.startswith("    ")]
    for name in SUBCOMMANDS:
        assert name in listed, (name, help_text)


def test_script_help_lists_subcommands():
    result = run(kernelboard_script(), "--help")
    assert result.returncode == 0, result.stderr
    assert_lists_subcommands(result.stdout)


def test_python_m_entry_help():
    result = run(sys.executable, "-m", "pytest_kernelboard.cli", "--help")
    assert result.returncode == 0, result.stderr
    assert_lists_subcommands(result.stdout)


def test_python_m_entry_runs_a_subcommand_help():
    result = run(sys.executable, "-m", "pytest_kernelboard.cli", "new", "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: kernelboard new")


def test_no_subcommand_is_a_usage_error():
    result = run(sys.executable, "-m", "pytest_kernelboard.cli")
    assert result.returncode == 2
    assert "usage: kernelboard" in result.stderr and "COMMAND" in result.stderr


def test_unknown_subcommand_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["frobnicate"])
    assert info.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_every_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([name, "--help"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: kernelboard {name}")
