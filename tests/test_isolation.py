"""A submission that is wrong, raises, crashes, hangs, exits or snoops fails only itself."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.supervisor.pool import WorkerPool

ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"
TIMEOUT_S = 4.0
SLACK_S = 5.0  # "within the timeout plus a few seconds"
# What the hanging submission waits out: the call alone (its worker is started and loaded
# first), so a short limit tells the hang apart as surely and spares the suite the wait.
HANG_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def task():
    return load_task(ADDONE)


@pytest.fixture(scope="module")
def modules(task):
    return LeaderboardModules(task)


@pytest.fixture
def judge_for(task, modules, tmp_path):
    judges = []

    def make(source: str) -> SubmissionJudge:
        path = tmp_path / f"submission_{len(judges)}.py"
        path.write_text(textwrap.dedent(source))
        # No spare: a worker that no case takes would cost a torch start-up for nothing.
        judge = SubmissionJudge(task, modules, path, use_cuda=False, pool=WorkerPool(spares=0))
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        judge.close()


def case(task, index=0) -> Case:
    return Case(TEST, index, task.tests[index])


CORRECT = """
def custom_kernel(data):
    x, out = data
    return out.copy_(x + 1)
"""


def test_correct_submission_passes(task, judge_for):
    outcome = judge_for(CORRECT).check_case(case(task), TIMEOUT_S)
    assert outcome.status == "passed", outcome.message


def test_wrong_output_fails_with_the_references_message(task, judge_for):
    judge = judge_for("""
        def custom_kernel(data):
            x, out = data
            return out.copy_(x + 2)
    """)
    outcome = judge.check_case(case(task), TIMEOUT_S)
    assert outcome.status == "failed"
    assert "mismatch at [0]" in outcome.message


def test_raising_submission_shows_its_own_trimmed_traceback(task, judge_for):
    judge = judge_for("""
        def helper(x):
            raise ValueError("bad block size")

        def custom_kernel(data):
            return helper(data[0])
    """)
    outcome = judge.check_case(case(task), TIMEOUT_S)
    assert outcome.status == "error"
    assert "ValueError: bad block size" in outcome.message
    assert "in helper" in outcome.message and "submission_0.py" in outcome.message
    assert "pytest_kernelboard" not in outcome.message  # harness frames trimmed


def test_segfault_fails_only_its_case_and_the_next_case_gets_a_fresh_worker(task, judge_for):
    judge = judge_for("""
        import os, signal

        def custom_kernel(data):
            x, out = data
            if x.numel() == 3:
                os.kill(os.getpid(), signal.SIGSEGV)
            return out.copy_(x + 1)
    """)
    started = time.perf_counter()
    crashed = judge.check_case(case(task, 0), TIMEOUT_S)
    assert time.perf_counter() - started < TIMEOUT_S + SLACK_S
    assert crashed.status == "crashed"
    assert "SIGSEGV" in crashed.message
    assert "custom_kernel" in crashed.message  # the faulthandler stack of the submission
    healthy = judge.check_case(case(task, 1), TIMEOUT_S)
    assert healthy.status == "passed", healthy.message


def test_hanging_submission_times_out_once_and_its_other_cases_fail_at_once(task, judge_for):
    judge = judge_for("""
        import time

        def custom_kernel(data):
            x, out = data
            if x.numel() == 3:
                while True:
                    time.sleep(0.1)
            return out.copy_(x + 1)
    """)
    judge.worker()  # started and loaded: the worker's start-up is not part of the timeout
    started = time.perf_counter()
    outcome = judge.check_case(case(task, 0), HANG_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    assert outcome.status == "timeout"
    assert f"{HANG_TIMEOUT_S:g} s" in outcome.message
    assert HANG_TIMEOUT_S <= elapsed < HANG_TIMEOUT_S + SLACK_S
    started = time.perf_counter()
    rest = judge.check_case(case(task, 1), TIMEOUT_S)  # would pass: it is never run
    assert time.perf_counter() - started < 1.0
    assert rest.status == "not_run"  # not a second failure: the timeout already failed it
    assert rest.message == "not run: an earlier case timed out"
    # Another submission in the same run is judged as usual.
    assert judge_for(CORRECT).check_case(case(task, 1), TIMEOUT_S).status == "passed"


@pytest.mark.parametrize(
    ("call", "status", "text"),
    [("sys.exit(3)", "error", "exit(3)"), ("os._exit(3)", "crashed", "exited with code 3")],
)
def test_exiting_submission_fails_its_case(task, judge_for, call, status, text):
    judge = judge_for(f"""
        import os, sys

        def custom_kernel(data):
            {call}
    """)
    outcome = judge.check_case(case(task), TIMEOUT_S)
    assert outcome.status == status
    assert text in outcome.message


def test_import_error_is_reported_for_every_case(task, judge_for):
    judge = judge_for("import no_such_module_anywhere\n")
    for index in (0, 1):
        outcome = judge.check_case(case(task, index), TIMEOUT_S)
        assert outcome.status == "error"
        assert "No module named 'no_such_module_anywhere'" in outcome.message


def test_input_mutated_in_place_is_judged_against_the_pristine_input(task, judge_for):
    judge = judge_for("""
        def custom_kernel(data):
            x, out = data
            out.copy_(x + 1)
            x.zero_()  # vandalise the input after computing the answer
            return out
    """)
    outcome = judge.check_case(case(task, 1), TIMEOUT_S)
    assert outcome.status == "passed", outcome.message


def test_input_mutation_cannot_make_a_wrong_answer_pass(task, judge_for):
    # Zeroing x and returning 1s would pass a check that read the worker's copy of x.
    judge = judge_for("""
        def custom_kernel(data):
            x, out = data
            x.zero_()
            return out.fill_(1.0)
    """)
    assert judge.check_case(case(task, 1), TIMEOUT_S).status == "failed"


def test_worker_cannot_see_the_parents_secrets(task, judge_for, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_fake_secret_value")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "another_fake_secret")
    judge = judge_for("""
        import os

        def custom_kernel(data):
            raise RuntimeError("ENV " + repr(sorted(os.environ.items())))
    """)
    outcome = judge.check_case(case(task), TIMEOUT_S)
    assert outcome.status == "error"
    assert "ENV" in outcome.message
    assert "GITHUB_TOKEN" not in outcome.message
    assert "fake_secret" not in outcome.message
    assert "AWS_SECRET_ACCESS_KEY" not in outcome.message


def test_worker_inherits_no_open_descriptors(task, judge_for, tmp_path):
    secret_file = open(tmp_path / "judge-only-secret.txt", "w")  # an fd the judge holds open
    try:
        judge = judge_for("""
            import os

            def custom_kernel(data):
                fds = {}
                for fd in os.listdir("/proc/self/fd"):
                    try:
                        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
                    except OSError:
                        pass
                raise RuntimeError("FDS " + repr(fds))
        """)
        outcome = judge.check_case(case(task), TIMEOUT_S)
    finally:
        secret_file.close()
    assert "FDS" in outcome.message
    assert "judge-only-secret.txt" not in outcome.message


def test_worker_is_a_separate_process(task, judge_for):
    judge = judge_for("""
        import os

        def custom_kernel(data):
            raise RuntimeError(f"PID {os.getpid()}")
    """)
    outcome = judge.check_case(case(task), TIMEOUT_S)
    assert f"PID {os.getpid()}" not in outcome.message
