"""Profile mode: one profiled call per benchmark case, its summary in the results, the report
beside them. On CPU the torch profiler runs; on a GPU with Nsight Compute, ncu does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.judge import devices
from pytest_kernelboard.judge.profiling import (
    CPU_OPS,
    KERNELS,
    CaseProfiler,
    ProfileError,
    find_ncu,
    ncu_kernels,
    report_dir_for,
    trace_kernels,
)
from pytest_kernelboard.results.records import validate_run

FIXTURES = Path(__file__).parent / "fixtures"
ALICE = "submissions/addone/alice/submission.py"


@pytest.fixture
def repo(pytester: pytest.Pytester) -> Path:
    shutil.copytree(FIXTURES / "core", pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def profiled_case(repo: Path) -> dict:
    doc = json.loads((repo / "out.json").read_text())
    validate_run(doc)
    assert doc["mode"] == "profile"
    (evaluation,) = doc["evaluations"]
    (case,) = [c for c in evaluation["cases"] if c["kind"] == "benchmark"]
    assert case["status"] == "passed", case["message"]
    return case


def test_profile_mode_on_cpu_uses_the_torch_profiler(pytester, repo, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the CPU path, even on a GPU machine
    result = pytester.runpytest_subprocess(
        "--kb-mode", "profile", "--kb-results", "out.json", ALICE
    )
    result.assert_outcomes(passed=3)
    profile = profiled_case(repo)["profile"]
    assert profile["tool"] == "torch.profiler"
    assert profile["what"] == CPU_OPS
    names = [entry["name"] for entry in profile["top"]]
    assert "aten::add" in names and "aten::copy_" in names, names
    assert profile["duration_us_total"] > 0
    report = repo / "out.profiles" / profile["report"]
    assert json.loads(report.read_text())["traceEvents"], "the full trace is saved beside"
    result.stdout.fnmatch_lines(["*benchmark[[]size=4096-*torch.profiler*aten::*", "profiles: *"])


def test_a_profiled_case_that_fails_its_check_is_not_profiled(pytester, repo):
    (repo / "submissions/addone/bob").mkdir()
    (repo / "submissions/addone/bob/submission.py").write_text(
        "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x)\n"
    )
    result = pytester.runpytest_subprocess(
        "--kb-mode", "profile", "--kb-results", "out.json", "submissions/addone/bob"
    )
    result.assert_outcomes(failed=3)
    doc = json.loads((repo / "out.json").read_text())
    assert all("profile" not in c for c in doc["evaluations"][0]["cases"])


def test_report_folder_sits_beside_the_results(tmp_path):
    assert report_dir_for("runs/r1.json", tmp_path) == Path("runs/r1.profiles").resolve()
    assert report_dir_for(None, tmp_path) == tmp_path / "kernelboard-profiles"


def test_ncu_is_told_to_leave_the_clocks_alone_and_profile_only_the_call(tmp_path):
    launcher = CaseProfiler(tmp_path, "/opt/ncu").launcher(tmp_path / "r.ncu-rep")
    assert launcher.command[0] == "/opt/ncu"
    # Inside the sandbox ncu needs its install folder and a writable place for the report.
    assert (launcher.tool_dir, launcher.output_dir) == (Path("/opt"), tmp_path)
    joined = " ".join(launcher.command)
    assert "--clock-control none" in joined
    assert "--profile-from-start off" in joined
    assert "--target-processes all" in joined
    assert CaseProfiler(tmp_path, None).launcher(tmp_path / "r.json") is None


def test_report_names_are_safe_file_names(tmp_path):
    path = CaseProfiler(tmp_path, None).report_path("mm", "alice/sub mission.py", "n=1-seed=2")
    assert path.parent == tmp_path
    assert path.name == "mm-alice_sub_mission.py-n=1-seed=2.trace.json"


RAW = FIXTURES / "core" / "ncu_raw.csv"


def test_ncu_raw_page_becomes_kernels():
    # Nsight Compute's own raw page for the vectoradd example at N=16384 on an H200.
    (kernel,) = ncu_kernels(RAW.read_text())
    assert kernel["name"].startswith("void vectorized_elementwise_kernel<8, CUDAFunctor_add<Half>")
    assert kernel["duration_us"] == 360.832  # the file says 360.832000 "us"
    assert (kernel["grid_size"], kernel["block_size"]) == (262144, 128)  # "262,144"
    assert kernel["registers_per_thread"] == 34
    assert 0 < kernel["dram_pct"] <= 100 and 0 < kernel["sm_pct"] <= 100


def test_ncu_units_are_converted_to_microseconds():
    header = '"ID","Kernel Name","gpu__time_duration.sum","launch__grid_size"\n'
    for unit, value, expected in [("nsecond", "2,500", 2.5), ("usecond", "7.25", 7.25)]:
        text = header + f'"","","{unit}",""\n"0","k","{value}","132"\n'
        (kernel,) = ncu_kernels(text)
        assert kernel["duration_us"] == expected
        assert kernel["grid_size"] == 132


def test_ncu_output_without_a_table_has_no_kernels():
    assert ncu_kernels("==PROF== Disconnected\n") == []


def test_trace_prefers_device_kernels_and_aggregates_by_name():
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::add", "dur": 50},
            {"ph": "X", "cat": "kernel", "name": "add_kernel", "dur": 3.5},
            {"ph": "X", "cat": "kernel", "name": "add_kernel", "dur": 4.5},
            {"ph": "X", "cat": "kernel", "name": "copy_kernel", "dur": 1},
            {"ph": "i", "cat": "kernel", "name": "marker"},
        ]
    }
    kernels, what = trace_kernels(trace)
    assert what == KERNELS
    assert sorted((k["name"], k["calls"], k["duration_us"]) for k in kernels) == [
        ("add_kernel", 2, 8.0),
        ("copy_kernel", 1, 1.0),
    ]


def test_a_call_that_launches_no_kernel_is_said_so(tmp_path):
    profiler = CaseProfiler(tmp_path, "/opt/ncu")
    summary = profiler.summarize(
        tmp_path / "missing.ncu-rep", "==WARNING== No kernels were profiled.\n"
    )
    assert summary["calls_total"] == 0 and summary["note"] == "the call launched no kernel"
    with pytest.raises(ProfileError, match="ERR_NVGPUCTRPERM"):
        profiler.summarize(tmp_path / "missing.ncu-rep", "==ERROR== ERR_NVGPUCTRPERM\n")


@pytest.mark.gpu
@pytest.mark.skipif(not devices.has_cuda() or find_ncu() is None, reason="needs CUDA and ncu")
def test_profile_mode_on_a_gpu_runs_nsight_compute(pytester, repo):
    result = pytester.runpytest_subprocess(
        "--kb-mode", "profile", "--kb-results", "out.json", ALICE
    )
    result.assert_outcomes(passed=3)
    profile = profiled_case(repo)["profile"]
    assert profile["tool"] == "ncu" and profile["what"] == KERNELS
    assert profile["calls_total"] >= 1
    top = profile["top"][0]
    assert top["duration_us"] > 0 and top["grid_size"] >= 1
    assert (repo / "out.profiles" / profile["report"]).stat().st_size > 0
