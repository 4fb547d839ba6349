"""The nested pytest runs forked from a torch-loaded server (tests/forked_pytest.py) behave as
the `python -m pytest` subprocesses they replace."""

import os
from pathlib import Path

import forked_pytest
import pytest

PROBE = """
import os, sys, tempfile

def test_probe():
    print("PROBE", os.getcwd(), os.environ.get("KB_PROBE"), tempfile.gettempdir(), os.getppid())
    print("PATH0", sys.path[0])
"""


def _probe(result: pytest.RunResult) -> dict[str, str]:
    """The probe's lines (under -s they follow pytest's progress on the same line)."""
    text = "\n".join(result.outlines)
    cwd, value, tmp, parent = text.split("PROBE ", 1)[1].split()[:4]
    path0 = text.split("PATH0 ", 1)[1].split()[0]
    return {"cwd": cwd, "value": value, "tmp": tmp, "parent": parent, "path0": path0}


def test_a_forked_run_takes_its_folder_environment_and_temporary_folder(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytester.makepyfile(test_probe=PROBE)
    monkeypatch.setenv("KB_PROBE", "seen")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1)
    probe = _probe(result)
    assert probe["parent"] == str(forked_pytest._server.process.pid)  # forked by the server
    assert probe["cwd"] == probe["path0"] == str(pytester.path)
    assert probe["value"] == "seen"
    assert probe["tmp"] == str(tmp_path)


def test_a_failing_run_reports_its_exit_code(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fails="def test_fails():\n    assert 1 == 2\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*1 failed*"])


def test_a_run_past_its_timeout_is_killed_and_the_next_one_runs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_sleeps="import time\n\ndef test_sleeps():\n    time.sleep(60)\n")
    with pytest.raises(pytester.TimeoutExpired):
        pytester.runpytest_subprocess(timeout=2)
    pytester.makepyfile(test_sleeps="def test_sleeps():\n    pass\n")
    pytester.runpytest_subprocess(timeout=60).assert_outcomes(passed=1)


def test_a_start_up_variable_makes_the_run_a_plain_subprocess(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_probe=PROBE)
    monkeypatch.setenv("PYTHONHASHSEED", "123")  # read when the interpreter starts
    result = pytester.runpytest_subprocess("-s")
    result.assert_outcomes(passed=1)
    assert _probe(result)["parent"] == str(os.getpid())
