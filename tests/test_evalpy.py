"""Problems whose contract lives in their own eval.py run through it by the runner protocol.

Fixture (tests/fixtures/evalpy): `fwdbwd` has task.yml + reference.py (no generate_input or
check_implementation) + its own eval.py that checks forward and backward and times them.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from pytest_kernelboard.judge.evalpy import (
    EvalPyRunner,
    case_line,
    is_evalpy_task,
    parse_report,
    timing_record,
)
from pytest_kernelboard.spec.cases import BENCHMARK, TEST
from pytest_kernelboard.spec.task import load_task

FIXTURES = Path(__file__).parent / "fixtures"
EVALPY = FIXTURES / "evalpy"
TASK_YML = EVALPY / "leaderboards" / "fwdbwd" / "task.yml"


def test_only_folders_outside_the_standard_contract_are_eval_py_driven():
    assert is_evalpy_task(load_task(TASK_YML))
    # GPU MODE folders that name eval.py but whose reference has the standard functions
    standard = FIXTURES / "gpumode" / "leaderboards" / "pmpp" / "vectoradd_py" / "task.yml"
    assert load_task(standard).config == {"main": "eval.py"}
    assert not is_evalpy_task(load_task(standard))
    assert not is_evalpy_task(load_task(FIXTURES / "shapes/leaderboards/refclass/task.yml"))


def test_runner_protocol_formats():
    assert case_line({"size": 4, "seed": 7, "flag": True}) == "size: 4; seed: 7; flag: True"
    with pytest.raises(ValueError, match="cannot be written"):
        case_line({"name": "a;b"})
    report = parse_report("check: pass\nbenchmark.0.mean: 2500.0\nnoise line\n")
    assert report == {"check": "pass", "benchmark.0.mean": "2500.0"}
    report.update({"benchmark.0.std": "100", "benchmark.0.err": "10", "benchmark.0.runs": "20"})
    record = timing_record(report, "benchmark.0", use_cuda=False)  # nanoseconds -> us
    assert (record["mean_us"], record["std_us"], record["n"]) == (2.5, 0.1, 20)
    assert record["ci95_us"] == pytest.approx([2.5 - 0.0196, 2.5 + 0.0196])


def test_eval_py_judges_submissions_and_solutions(pytester: pytest.Pytester):
    shutil.copytree(EVALPY, pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    wrong = pytester.path / "submissions" / "fwdbwd" / "bob" / "submission.py"
    wrong.parent.mkdir(parents=True)
    shutil.copyfile(TASK_YML.parent / "solutions" / "wrong" / "submission.py", wrong)
    result = pytester.runpytest_subprocess(
        "-v", "-rfE", "--kb-mode", "benchmark", "--kb-results", "out.json",
        "leaderboards", "submissions",
    )  # fmt: skip
    result.stdout.fnmatch_lines_random(
        [
            "leaderboards/fwdbwd/task.yml::solution[[]correct/submission.py[]] PASSED*",
            "leaderboards/fwdbwd/task.yml::solution[[]wrong/submission.py[]] PASSED*",
            "leaderboards/fwdbwd/task.yml::template[[]Python[]] PASSED*",
            "submissions/fwdbwd/ann/*::benchmark[[]rows=128-cols=32-seed=24-transposed=False[]] PASSED*",
            "*failed: backward output differs*",
        ]
    )
    result.assert_outcomes(passed=8, failed=4, skipped=4)
    doc = json.loads((pytester.path / "out.json").read_text())
    by_author = {e["submission"]["author"]: e for e in doc["evaluations"]}
    ann = by_author["ann"]["cases"]
    assert [(c["kind"], c["status"]) for c in ann] == [(TEST, "passed")] * 2 + [
        (BENCHMARK, "passed")
    ] * 2
    timing = ann[3]["timing"]
    assert timing["n"] == 20 and 0 < timing["min_us"] <= timing["mean_us"] <= timing["max_us"]
    assert "eval.py" in timing["flags"][0]
    assert [c["status"] for c in by_author["bob"]["cases"]] == ["failed"] * 4


def test_a_hanging_eval_py_is_killed_with_its_children(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_TEST_SECRET_TOKEN", "do-not-leak")
    marker = tmp_path / "seen.json"
    submission = tmp_path / "submission.py"
    submission.write_text(
        "import json, os, subprocess, time\n"
        "def custom_kernel(x, w):\n"
        "    child = subprocess.Popen(['sleep', '60'])\n"
        f"    json.dump({{'env': sorted(os.environ), 'child': child.pid}}, open({str(marker)!r}, 'w'))\n"
        "    time.sleep(60)\n"
    )
    runner = EvalPyRunner(load_task(TASK_YML), submission)
    started = time.perf_counter()
    run = runner.run("test", [{"rows": 2, "cols": 2, "seed": 1, "transposed": False}], 15.0)
    assert run.timed_out and time.perf_counter() - started < 30
    assert run.outcome(TEST, 0, use_cuda=False).status == "timeout"
    seen = json.loads(marker.read_text())
    assert "POPCORN_FD" in seen["env"] and "KB_TEST_SECRET_TOKEN" not in seen["env"]
    assert not _running(seen["child"])  # the script's own child went with its group


def _running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever inherited it to reap it."""
    for _ in range(20):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.1)
    return True


def test_a_crashing_eval_py_names_the_exit(tmp_path):
    submission = tmp_path / "submission.py"
    submission.write_text("raise SystemExit(3)\n")
    run = EvalPyRunner(load_task(TASK_YML), tmp_path / "submission.py").run(
        "test", [{"rows": 2, "cols": 2, "seed": 1, "transposed": False}], 60.0
    )
    outcome = run.outcome(TEST, 0, use_cuda=False)
    assert (run.returncode, outcome.status) == (3, "crashed")
    assert "eval.py exited with code 3" in outcome.message
