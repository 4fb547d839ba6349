"""Problems whose contract lives in their own eval.py run through it by the runner protocol.

Fixture (tests/fixtures/evalpy): `fwdbwd` has task.yml + reference.py (no generate_input or
check_implementation) + its own eval.py that checks forward and backward and times them.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_kernelboard.judge.evalpy import (
    EvalPyRunner,
    case_line,
    is_evalpy_task,
    parse_report,
    timing_record,
)
from pytest_kernelboard.plugin import workers_needed
from pytest_kernelboard.spec.cases import BENCHMARK, TEST
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.supervisor import sandbox

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


class _SelfCheckItem:
    """What workers_needed reads of a self-check item: its name, marker and leaderboard."""

    def __init__(self, task: object, name: str) -> None:
        self.parent = SimpleNamespace(task=task)
        self.name = name

    def get_closest_marker(self, name: str) -> bool | None:
        return name == "selfcheck" or None


def test_an_eval_py_leaderboards_items_start_no_spare_worker():
    """eval.py runs them in processes of its own: the run's pool starts no worker for them (a
    Python and torch start-up for nothing), while a standard leaderboard's items still count."""
    standard = load_task(FIXTURES / "core" / "leaderboards" / "addone" / "task.yml")
    items = [
        _SelfCheckItem(task, f"solution[{verdict}/submission.py]")
        for task in (load_task(TASK_YML), standard)
        for verdict in ("correct", "wrong")
    ]
    assert workers_needed(items, "test") == 2  # type: ignore[arg-type]


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


@pytest.mark.runs_long
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


# The runner protocol's bare minimum: no torch import to wait out, so the hang starts at once and
# the test waits a short timeout instead of the seconds a sandboxed torch import takes under load.
BARE_TASK_YML = """files:
  - {"name": "submission.py", "source": "@SUBMISSION@"}
  - {"name": "eval.py", "source": "eval.py"}
lang: "py"
description: "eval.py imports the submission and calls it."
config:
  main: "eval.py"
tests:
  - {"rows": 2, "cols": 2, "seed": 1, "transposed": false}
"""
BARE_EVAL_PY = """import os
out = os.fdopen(int(os.environ["POPCORN_FD"]), "w")
print("test-count: 1", file=out, flush=True)
from submission import custom_kernel
custom_kernel(None, None)
"""
HANG_TIMEOUT_S = 5.0  # a bare Python's start in the sandbox, many times over


def test_a_hanging_eval_py_is_killed_with_its_children(tmp_path, monkeypatch):
    monkeypatch.setenv("KB_TEST_SECRET_TOKEN", "do-not-leak")
    task = tmp_path / "bare"
    task.mkdir()
    (task / "task.yml").write_text(BARE_TASK_YML)
    (task / "eval.py").write_text(BARE_EVAL_PY)
    # The child is found by its command line: inside the sandbox its pid is not the host's.
    nap = f"60.{secrets.randbelow(10**6):06d}"
    submission = tmp_path / "submission.py"
    submission.write_text(
        "import json, os, subprocess, time\n"
        "def custom_kernel(x, w):\n"
        f"    subprocess.Popen(['sleep', {nap!r}])\n"
        "    print('SEEN', json.dumps(sorted(os.environ)), flush=True)\n"
        "    time.sleep(60)\n"
    )
    runner = EvalPyRunner(load_task(task / "task.yml"), submission)
    started = time.perf_counter()
    run = runner.run(
        "test", [{"rows": 2, "cols": 2, "seed": 1, "transposed": False}], HANG_TIMEOUT_S
    )
    assert run.timed_out and time.perf_counter() - started < HANG_TIMEOUT_S + 15
    assert run.outcome(TEST, 0, use_cuda=False).status == "timeout"
    (seen,) = [
        json.loads(line[5:]) for line in run.log_tail.splitlines() if line.startswith("SEEN ")
    ]
    assert "POPCORN_FD" in seen and "KB_TEST_SECRET_TOKEN" not in seen
    assert not _running(f"sleep\0{nap}")  # the script's own child went with it


def _running(cmdline: str) -> bool:
    """A process with this command line is alive (not a zombie left for its reaper)."""
    for _ in range(20):
        alive = False
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if proc.joinpath("cmdline").read_bytes().decode().rstrip("\0") != cmdline:
                    continue
                alive |= proc.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
        if not alive:
            return False
        time.sleep(0.1)
    return True


def test_an_eval_py_submission_runs_inside_the_worker_sandbox(tmp_path):
    """eval.py imports the submission, so it runs where a worker would: the judge's files and
    processes are out of its sight."""
    if (reason := sandbox.probe()) is not None:
        pytest.skip(f"needs the worker sandbox, unavailable here: {reason}")
    judge_file = tmp_path / "judge_only.txt"
    judge_file.write_text("the judge's")
    submission = tmp_path / "submission.py"
    submission.write_text(
        "import os\n"
        "def custom_kernel(x, w):\n"
        f"    print('FILE', os.path.exists({str(judge_file)!r}), flush=True)\n"
        "    print('HOST', open('/proc/sys/kernel/hostname').read().strip(), flush=True)\n"
        "    print('PARENT', os.getppid(), flush=True)\n"
        "    raise SystemExit(0)\n"
    )
    run = EvalPyRunner(load_task(TASK_YML), submission, sandboxed=True).run(
        "test", [{"rows": 2, "cols": 2, "seed": 1, "transposed": False}], 60.0
    )
    lines = [line.split(" ", 1) for line in run.log_tail.splitlines()]
    said = {words[0]: words[-1] for words in lines if words[0] in ("FILE", "HOST", "PARENT")}
    assert said["FILE"] == "False" and said["HOST"] == "kernelboard-worker", run.log_tail
    assert int(said["PARENT"]) != os.getpid()  # the judge is not even a pid it could signal


def test_a_crashing_eval_py_names_the_exit(tmp_path):
    submission = tmp_path / "submission.py"
    submission.write_text("raise SystemExit(3)\n")
    run = EvalPyRunner(load_task(TASK_YML), tmp_path / "submission.py").run(
        "test", [{"rows": 2, "cols": 2, "seed": 1, "transposed": False}], 60.0
    )
    outcome = run.outcome(TEST, 0, use_cuda=False)
    assert (run.returncode, outcome.status) == (3, "crashed")
    assert "eval.py exited with code 3" in outcome.message


def test_kernelboard_judge_judges_an_eval_py_leaderboard():
    """The batch judge takes an eval.py folder like any other: its reference.py (no
    generate_input, ref_kernel or check_implementation) is never imported as a reference."""
    from pytest_kernelboard.batch import Candidate, judge_many

    solutions = EVALPY / "leaderboards" / "fwdbwd" / "solutions"
    candidates = [
        Candidate("good.py", (solutions / "correct" / "submission.py").read_text()),
        Candidate("bad.py", (solutions / "wrong" / "submission.py").read_text()),
    ]
    records = {r["id"]: r for r in judge_many("fwdbwd", candidates, root=EVALPY)}
    assert records["good.py"]["status"] == "passed", records["good.py"]["message"]
    assert records["bad.py"]["status"] == "failed"
    assert "backward output differs" in records["bad.py"]["message"]
