"""A `lang: cu` leaderboard that offers a header-only library to its submissions.

tests/fixtures/header_library/ holds saxpy_tinyvec, whose task.yml names its own include/
(config.include_dirs) and whose submission includes <tinyvec/tinyvec.cuh> from there. The
builds run nvcc for real: a compile-only check without a GPU, the built extension on one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pytest_kernelboard.channel import build_spec
from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.spec.task import TaskError, load_task
from pytest_kernelboard.supervisor.pool import WorkerPool
from pytest_kernelboard.worker import builds

FIXTURE = Path(__file__).parent / "fixtures" / "header_library"
BOARD = FIXTURE / "leaderboards" / "saxpy_tinyvec"
SUBMISSION = FIXTURE / "submissions" / "saxpy_tinyvec" / "alice" / "submission.cu"
HEADER = Path("tinyvec") / "tinyvec.cuh"

needs_nvcc = pytest.mark.skipif(builds.nvcc_path() is None, reason="needs nvcc (CUDA toolkit)")


def board_with(tmp_path: Path, include_dirs: list[str]) -> Path:
    """A copy of saxpy_tinyvec whose task.yml names `include_dirs`; its task.yml."""
    board = tmp_path / "leaderboards" / "saxpy_tinyvec"
    shutil.copytree(BOARD, board)
    task_yml = board / "task.yml"
    raw = yaml.safe_load(task_yml.read_text())
    raw["config"]["include_dirs"] = include_dirs
    task_yml.write_text(yaml.safe_dump(raw))
    return task_yml


def staged(tmp_path: Path, task_yml: Path) -> tuple[Path, dict]:
    """The submission staged as the judge stages it, and the build spec written beside it."""
    stage = tmp_path / "stage"
    stage.mkdir()
    shutil.copyfile(SUBMISSION, stage / "submission.cu")
    build_spec.write_build_spec(stage, load_task(task_yml))
    return stage, build_spec.read_build_spec(stage)


def test_the_leaderboards_headers_are_staged_beside_the_submission(tmp_path: Path) -> None:
    stage, spec = staged(tmp_path, BOARD / "task.yml")
    assert spec["include_dirs"] == ["include"] and "unavailable" not in spec
    assert (stage / "include" / HEADER).read_bytes() == (BOARD / "include" / HEADER).read_bytes()
    # The build's hash covers the headers: a changed library is a new build.
    assert str(Path("include") / HEADER) in builds._source_files(stage)


def test_an_include_dir_that_does_not_exist_names_the_file_and_key(tmp_path: Path) -> None:
    task_yml = board_with(tmp_path, ["include", "third_party/include"])
    with pytest.raises(TaskError) as failure:
        load_task(task_yml)
    message = str(failure.value)
    assert message.startswith(f"{task_yml}: config.include_dirs[1] ('third_party/include')")
    assert "not found" in message


@pytest.mark.parametrize(
    ("entry", "held"),
    [
        ("..", "holds the leaderboard itself"),
        ("solutions/correct", "holds the leaderboard's solutions"),
        ("../other", "holds task.yml"),
    ],
)
def test_an_include_dir_that_would_expose_a_leaderboard_is_refused(
    tmp_path: Path, entry: str, held: str
) -> None:
    task_yml = board_with(tmp_path, [entry])
    (task_yml.parent / "solutions" / "correct").mkdir(parents=True)
    (task_yml.parent.parent / "other").mkdir()
    (task_yml.parent.parent / "other" / "task.yml").write_text("lang: cu\n")
    with pytest.raises(TaskError) as failure:
        load_task(task_yml)
    message = str(failure.value)
    assert message.startswith(f"{task_yml}: config.include_dirs[0] ({entry!r}): the folder {held}")
    assert "which a submission must not read" in message


def test_a_groups_shared_headers_are_staged_apart(tmp_path: Path) -> None:
    task_yml = board_with(tmp_path, ["../common/include"])
    shutil.copytree(BOARD / "include", task_yml.parent.parent / "common" / "include")
    stage, spec = staged(tmp_path, task_yml)
    assert spec["include_dirs"] == ["kb_include/0"]  # never outside the staged folder
    assert (stage / "kb_include" / "0" / HEADER).is_file()


def test_dot_is_the_staged_folder_itself(tmp_path: Path) -> None:
    assert load_task(board_with(tmp_path, ["."])).include_dirs == ()  # on the include path already


def test_a_runner_folder_comes_from_the_judges_environment(tmp_path: Path, monkeypatch) -> None:
    task_yml = board_with(tmp_path, ["$TINYVEC_HOME/include"])
    monkeypatch.delenv("TINYVEC_HOME", raising=False)
    stage, spec = staged(tmp_path, task_yml)  # the task loads: the runner may lack the folder
    assert "config.include_dirs[0]" in spec["unavailable"]
    assert "TINYVEC_HOME is not set on this runner" in spec["unavailable"]
    with pytest.raises(builds.BuildUnavailable, match="TINYVEC_HOME is not set"):
        builds.load_cuda_submission(stage, spec, "custom_kernel", False, tmp_path / "cache")

    home = tmp_path / "runner" / "tinyvec-1.0"
    shutil.copytree(BOARD / "include", home / "include")
    monkeypatch.setenv("TINYVEC_HOME", str(home))
    shutil.rmtree(stage)
    stage, spec = staged(tmp_path, task_yml)
    assert spec["include_dirs"] == ["kb_include/0"] and "unavailable" not in spec
    assert (stage / "kb_include" / "0" / HEADER).is_file()


@needs_nvcc
def test_without_the_include_dir_the_submission_does_not_compile(tmp_path: Path) -> None:
    """The include dir is what makes the build find the library (nvcc stops at the #include)."""
    stage, spec = staged(tmp_path, board_with(tmp_path, []))
    with pytest.raises(builds.BuildError, match=r"tinyvec/tinyvec\.cuh"):
        builds.load_cuda_submission(stage, spec, "custom_kernel", False, tmp_path / "cache")


@needs_nvcc
@pytest.mark.runs_long
def test_the_judge_builds_the_submission_against_the_shipped_headers() -> None:
    """Staged, built in the (sandboxed) worker by nvcc against include/: without a GPU the
    build is checked (nvcc -c for sm_90a) and running is skipped with that reason; with one,
    the case passes."""
    task = load_task(BOARD / "task.yml")
    judge = SubmissionJudge(task, LeaderboardModules(task), SUBMISSION, False, WorkerPool(spares=0))
    try:
        outcome = judge.check_case(Case(TEST, 0, task.tests[0]), timeout_s=60.0)
    finally:
        judge.close()
    if devices.has_cuda():  # the worker finds the GPU and runs the built kernel
        assert outcome.status == "passed", outcome.message
        return
    assert outcome.status == "skipped", outcome.message
    assert "submission.cu compiles for sm_90a" in outcome.message


@pytest.mark.gpu
@pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device")
def test_the_header_library_submission_is_judged_and_timed_on_a_gpu(
    pytester: pytest.Pytester, monkeypatch
) -> None:
    shutil.copytree(FIXTURE, pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))  # this checkout
    pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-results", "out.json", "--kb-timeout", "60", "submissions"
    )
    doc = json.loads((pytester.path / "out.json").read_text())
    by_author = {e["submission"]["author"]: e for e in doc["evaluations"]}
    assert set(by_author) == {"alice", "reference"}  # the reference was timed in this run too
    alice = by_author["alice"]
    assert alice["summary"]["status"] == "passed", alice
    assert {case["status"] for case in alice["cases"]} == {"passed"}
    timed = [case for case in alice["cases"] if case["kind"] == "benchmark"]
    assert timed and all(case["timing"]["mean_us"] > 0 for case in timed)
