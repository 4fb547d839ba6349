"""Builds: their own budget before the case timeouts; one cached build per source hash."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_kernelboard.channel import build_spec
from pytest_kernelboard.judge import builds as budget
from pytest_kernelboard.judge.core import SubmissionJudge
from pytest_kernelboard.judge.reference_loader import LeaderboardModules
from pytest_kernelboard.spec.cases import TEST, Case
from pytest_kernelboard.spec.task import DEFAULT_COMPILE_TIMEOUT_S, TaskError, load_task
from pytest_kernelboard.supervisor.pool import WorkerPool
from pytest_kernelboard.worker import builds

ADDONE = Path(__file__).parent / "fixtures" / "core" / "leaderboards" / "addone" / "task.yml"

SLOW_IMPORT = """
import time

time.sleep(4.0)  # stands in for an nvcc build: longer than the case timeout below


def custom_kernel(data):
    x, out = data
    return out.copy_(x + 1)
"""


def test_import_slower_than_the_case_timeout_still_passes(tmp_path: Path) -> None:
    task = load_task(ADDONE)
    submission = tmp_path / "submission.py"
    submission.write_text(textwrap.dedent(SLOW_IMPORT))
    judge = SubmissionJudge(task, LeaderboardModules(task), submission, False, WorkerPool(spares=0))
    try:
        outcome = judge.check_case(Case(TEST, 0, task.tests[0]), timeout_s=2.0)
    finally:
        judge.close()
    assert outcome.status == "passed", outcome.message


def test_an_import_over_the_build_budget_times_out(tmp_path: Path) -> None:
    task = replace(load_task(ADDONE), compile_timeout=2.0)
    submission = tmp_path / "submission.py"
    submission.write_text(textwrap.dedent(SLOW_IMPORT))
    judge = SubmissionJudge(task, LeaderboardModules(task), submission, False, WorkerPool(spares=0))
    try:
        outcome = judge.check_case(Case(TEST, 0, task.tests[0]), timeout_s=30.0)
    finally:
        judge.close()
    assert outcome.status == "timeout"
    assert "build budget of 2 s" in outcome.message and "compile_timeout" in outcome.message


def test_the_budget_comes_from_task_yml_or_the_command_line(tmp_path: Path) -> None:
    task = load_task(ADDONE)
    assert budget.compile_timeout(task) == DEFAULT_COMPILE_TIMEOUT_S
    budget.set_compile_timeout_override(42.0)
    try:
        assert budget.compile_timeout(task) == 42.0
    finally:
        budget.set_compile_timeout_override(None)
    shutil.copytree(ADDONE.parent.parent, tmp_path / "leaderboards")
    folder = tmp_path / "leaderboards" / ADDONE.parent.name
    text = ADDONE.read_text()
    (folder / "task.yml").write_text(text + "\ncompile_timeout: 900\n")
    assert budget.compile_timeout(load_task(folder / "task.yml")) == 900.0
    (folder / "task.yml").write_text(text + "\ncompile_timeout: -1\n")
    with pytest.raises(TaskError, match="compile_timeout"):
        load_task(folder / "task.yml")


# A build in another process, as a worker does it: counts its builds in a shared file.
BUILDER = """
import sys, time
from pathlib import Path
from pytest_kernelboard.worker.builds import cached_build

root, key, counter = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])

def build(folder):
    with open(counter, "a") as f:
        f.write("built\\n")
    time.sleep(1.0)  # long enough that the other processes arrive while it builds
    (folder / "artefact.so").write_text("binary")

folder = cached_build(root, key, build)
print((folder / "artefact.so").read_text())
"""


def _builders(n: int, root: Path, key: str, counter: Path) -> list[subprocess.Popen]:
    return [
        subprocess.Popen(
            [sys.executable, "-c", BUILDER, str(root), key, str(counter)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]


def test_concurrent_workers_wait_for_one_build_and_later_ones_reuse_it(tmp_path: Path) -> None:
    root, counter = tmp_path / "builds", tmp_path / "count"
    concurrent = _builders(3, root, "k1", counter)
    outputs = [p.communicate(timeout=60)[0].strip() for p in concurrent]
    assert outputs == ["binary"] * 3
    assert counter.read_text().count("built") == 1  # one compiled, two waited
    (later,) = _builders(1, root, "k1", counter)  # a second worker, a later run
    assert later.communicate(timeout=60)[0].strip() == "binary"
    assert counter.read_text().count("built") == 1
    (other,) = _builders(1, root, "k2", counter)  # other source: its own build
    assert other.communicate(timeout=60)[0].strip() == "binary"
    assert counter.read_text().count("built") == 2


def test_a_failed_build_is_cached_with_its_message(tmp_path: Path) -> None:
    calls = []

    def broken(folder: Path) -> None:
        calls.append(folder)
        raise builds.BuildError("submission.cu(3): error: identifier 'x' is undefined")

    for _ in range(2):
        with pytest.raises(builds.BuildError, match="identifier 'x' is undefined"):
            builds.cached_build(tmp_path, "bad", broken)
    assert len(calls) == 1


def test_a_killed_build_leaves_no_marker_and_is_redone(tmp_path: Path) -> None:
    def interrupted(folder: Path) -> None:
        (folder / "half.o").write_text("")
        raise KeyboardInterrupt  # what a kill looks like from inside: no marker written

    with pytest.raises(KeyboardInterrupt):
        builds.cached_build(tmp_path, "k", interrupted)
    folder = builds.cached_build(tmp_path, "k", lambda f: (f / "whole.o").write_text(""))
    assert sorted(p.name for p in folder.iterdir()) == [builds.OK, "whole.o"]


def test_the_key_follows_sources_and_settings() -> None:
    base = builds.source_key({"submission.cu": b"a"}, {"flags": ["-O3"]})
    assert base == builds.source_key({"submission.cu": b"a"}, {"flags": ["-O3"]})
    assert base != builds.source_key({"submission.cu": b"b"}, {"flags": ["-O3"]})
    assert base != builds.source_key({"submission.cu": b"a"}, {"flags": ["-O2"]})
    assert base != builds.source_key({"other.cu": b"a"}, {"flags": ["-O3"]})


def test_a_stale_torch_extension_lock_no_longer_blocks(tmp_path: Path, monkeypatch) -> None:
    from torch.utils import cpp_extension

    seen = []

    def jit_compile(name, sources, build_directory, verbose):  # torch's parameter names
        seen.append((Path(build_directory) / "lock").exists())
        return name

    monkeypatch.setattr(cpp_extension, "_jit_compile", jit_compile)
    builds.guard_torch_extension_builds()
    build_directory = tmp_path / "kb_ext"
    build_directory.mkdir()
    (build_directory / "lock").write_text("")  # left by a build that was killed
    assert cpp_extension._jit_compile("kb_ext", [], str(build_directory), False) == "kb_ext"
    assert seen == [False]


def test_the_guard_installs_when_a_submission_imports_torch_extensions() -> None:
    code = (
        "import sys; from pytest_kernelboard.worker import builds\n"
        "builds.guard_torch_extension_builds_on_import()\n"
        "assert 'torch.utils.cpp_extension' not in sys.modules\n"
        "from torch.utils.cpp_extension import load_inline\n"
        "import torch.utils.cpp_extension as c\n"
        "assert getattr(c._jit_compile, '_kb_guarded', False)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_cutlass_headers_are_found_in_the_installed_package(tmp_path: Path, monkeypatch) -> None:
    assert builds.cutlass_include_dirs() == []  # not installed here
    package = tmp_path / "cutlass_library"
    (package / "source" / "include" / "cute").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert builds.cutlass_include_dirs() == [str(package / "source" / "include")]


def test_a_cu_build_is_bound_as_the_kernel_and_reused(tmp_path: Path, monkeypatch) -> None:
    """The GPU path's plumbing (the nvcc build itself runs in the gpu tests): the entry point
    gets the input tuple's elements as arguments, and a second load reuses the cached build."""
    stage = tmp_path / "stage"
    stage.mkdir()
    (stage / "submission.cu").write_text("torch::Tensor custom_kernel(...);\n")
    spec = {
        "submission": "submission.cu",
        "sources": ["submission.cu"],
        "include_dirs": [],
        "defines": {"BLOCK": "256"},
        "compile_flags": [],
    }
    built, imported = [], []

    class Extension:
        @staticmethod
        def custom_kernel(a, b, c):
            return ("called", a, b, c)

    def build(folder, stage_dir, spec_, entry, arch, name):
        built.append((arch, name))
        return Extension

    def import_extension(name, folder):
        imported.append(name)
        return Extension

    monkeypatch.setattr(builds, "_build_extension", build)
    monkeypatch.setattr(builds, "_import_extension", import_extension)
    monkeypatch.setattr(builds, "device_arch", lambda: "9.0a")
    first = builds.load_cuda_submission(stage, spec, "custom_kernel", True, tmp_path / "cache")
    assert first((1, 2, 3)) == ("called", 1, 2, 3)
    second = builds.load_cuda_submission(stage, spec, "custom_kernel", True, tmp_path / "cache")
    assert second([4, 5, 6]) == ("called", 4, 5, 6)
    assert len(built) == 1 and built[0][0] == "9.0a" and imported == [built[0][1]]
    (stage / "submission.cu").write_text("torch::Tensor custom_kernel(int);\n")  # new source
    builds.load_cuda_submission(stage, spec, "custom_kernel", True, tmp_path / "cache")
    assert len(built) == 2


def test_the_build_spec_carries_task_yml_config(tmp_path: Path) -> None:
    from types import SimpleNamespace

    task = SimpleNamespace(
        submission_name="submission.cu",
        config={"sources": ["submission.cu", "extra.cu"], "defines": {"N": 4, "FAST": None}},
    )
    build_spec.write_build_spec(tmp_path, task)
    spec = build_spec.read_build_spec(tmp_path)
    assert spec["sources"] == ["submission.cu", "extra.cu"]
    assert spec["defines"] == {"N": "4", "FAST": ""}
    assert build_spec.read_build_spec(tmp_path / "nothing") is None
    includes, flags = builds._flags(spec, tmp_path)
    assert flags == ["-DN=4", "-DFAST"] and includes[0] == str(tmp_path)
    assert builds.gencode("9.0a") == "-gencode=arch=compute_90a,code=sm_90a"


def test_compiler_output_is_shown_with_the_participants_file_names(tmp_path: Path) -> None:
    src = tmp_path / "src"
    spec = {"submission": "submission.cu"}
    output = f'{src}/submission.cu(6): error: identifier "helper" is undefined\n' + "x\n" * 200
    message = builds._compiler_message(spec, "9.0a", output, src)
    assert message.startswith("submission.cu does not compile (nvcc for sm_90a):\n")
    assert 'submission.cu(6): error: identifier "helper" is undefined' in message
    assert str(src) not in message
    assert message.endswith(f"({201 - builds.MESSAGE_LINES} more lines)")
