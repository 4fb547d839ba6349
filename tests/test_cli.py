"""The `kernelboard` command line: installed script and `python -m` entry."""

from __future__ import annotations

import argparse
import importlib.metadata
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


def test_no_subcommand_prints_the_help():
    """A first `kernelboard` shows what there is to do, not a usage error."""
    result = run(kernelboard_script())
    assert result.returncode == 0, result.stderr
    assert_lists_subcommands(result.stdout)
    assert result.stderr == ""


def test_version_comes_from_the_package_metadata():
    result = run(kernelboard_script(), "--version")
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip() == f"kernelboard {importlib.metadata.version('pytest-kernelboard')}"
    )


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("kernelboard",)):
    """Every (command path, parser, subcommand help) below `parser`, recursively."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                assert (helps.get(name) or "").strip(), f"{' '.join(path)} {name}: no help"
                yield from _parsers(sub, (*path, name))


def test_every_option_and_positional_has_help():
    """Walks every subcommand, so an option added later without help fails here."""
    missing = []
    parsers = list(_parsers(cli.build_parser()))
    assert len(parsers) > 20, "the walk reaches the nested subcommands"
    for path, parser in parsers:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert missing == [], "options without help text:\n" + "\n".join(missing)


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


def test_every_option_with_a_default_names_it_in_its_help():
    """`--help` is where a reader looks for what happens when an option is left out
    (`kernelboard serve --help`: the port and address it listens on)."""
    silent = []
    for path, parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            default = action.default
            if not action.option_strings or default in (None, False, [], argparse.SUPPRESS):
                continue
            if "default" not in (action.help or ""):
                silent.append(f"{' '.join(path)} {'/'.join(action.option_strings)} ({default!r})")
    assert silent == [], "options whose help hides their default:\n" + "\n".join(silent)


def test_serve_help_names_where_it_listens_and_its_limits(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["serve", "--help"])
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for shown in (
        "default 127.0.0.1: loopback only",
        "default 8765",
        "default 4096",
        "default 7)",
        "default: a temporary folder",
        "default: found from the current folder",
        "default: off, the sandbox is required",
    ):
        assert shown in text, shown
