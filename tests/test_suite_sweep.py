"""benchmarks/suite_sweep.py end to end on a CPU, over two tiny suites written here.

A KernelBench-shaped suite (level1/ with a small Model and one whose forward pass draws a fresh
random state on every call, as level 3's 35_LSTM does upstream) is imported and judged with
ModelNew = Model in benchmark mode; a GPU MODE-shaped problems/ folder (the setx fixture's
two problems, plus a shipped submission that needs a package not installed, a reference on an
AMD-only dtype, a reference that imports AMD's aiter, and a problem whose cases need 8 GPUs) in
test mode. The rows of rows.jsonl and table.md are asserted; a second sweep over the same
folder judges nothing again. Last, the words judge/hardware.py finds for what a failing
leaderboard's code needs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_kernelboard.judge.hardware import Device, hardware_note

REPO = Path(__file__).resolve().parent.parent
SWEEP = REPO / "benchmarks" / "suite_sweep.py"
SETX = Path(__file__).parent / "fixtures" / "gpumode_problems"

KB_HEADER = "import torch\nimport torch.nn as nn\n\n\n"
KB_FOOTER = (
    "\n\nsize = 4096\n\n\ndef get_inputs():\n    return [torch.rand(size)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)
KERNELBENCH = {
    "1_Double.py": "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2.0\n",
    # Upstream-style broken: no two calls agree, whoever makes them.
    "2_RandomState.py": (
        "class Model(nn.Module):\n    def forward(self, x):\n"
        "        return x + torch.randn(x.shape, device=x.device)\n"
    ),
}

TASK_YML = """files:
  - {{"name": "submission.py", "source": "@SUBMISSION@"}}
  - {{"name": "reference.py", "source": "reference.py"}}
lang: "py"
{extra}description: |
  A problem of the sweep's test.
tests:
  - {{{case}"size": 8, "seed": 3}}
"""
REFERENCES = {
    # The reference's own arithmetic on an AMD-only dtype: torch has no CPU (or CUDA) kernel.
    "fnuz_py": (
        "import torch\n\n\ndef generate_input(size, seed):\n"
        "    gen = torch.Generator().manual_seed(seed)\n"
        "    return torch.randn(size, generator=gen).to(torch.float8_e4m3fnuz)\n\n\n"
        "def ref_kernel(data):\n    return data + data\n\n\n"
        "def check_implementation(data, output):\n"
        "    return bool((ref_kernel(data).float() == output).all()), ''\n"
    ),
    "aiter_py": "import torch\nimport aiter\n\n\ndef ref_kernel(data):\n    return data\n",
    "needs_pkg_py": (
        "import torch\n\n\ndef generate_input(size, seed):\n"
        "    return torch.arange(size, dtype=torch.float32)\n\n\n"
        "def ref_kernel(data):\n    return data * 2\n\n\n"
        "def check_implementation(data, output):\n"
        "    ok = torch.equal(output, data * 2)\n    return ok, '' if ok else 'mismatch'\n"
    ),
    "ranks8_py": (
        "import torch\n\n\ndef generate_input(world_size, rank, size, seed):\n"
        "    return torch.ones(size)\n\n\n"
        "def ref_kernel(data):\n    return data\n\n\n"
        "def check_implementation(data, output):\n    return True, ''\n"
    ),
}
SUBMISSIONS = {
    "fnuz_py": "def custom_kernel(data):\n    return data.float() * 2\n",
    "needs_pkg_py": "import helion_not_installed_here\n\n\ndef custom_kernel(data):\n    return data * 2\n",
    "ranks8_py": "def custom_kernel(data):\n    return data\n",
}
COMPETITION = """name: sweepset
description: the sweep's test problems
deadline: "2031-06-30"
problems:
  - {directory: sweepset/fnuz_py, name: sweep_fnuz, gpus: [MI300]}
  - {directory: sweepset/aiter_py, name: sweep_aiter, gpus: [MI355X]}
  - {directory: sweepset/needs_pkg_py, name: sweep_needs_pkg, gpus: [B200]}
  - {directory: sweepset/ranks8_py, name: sweep_ranks8, gpus: [MI300x8]}
"""


def sweep(*args: str) -> tuple[int, str, dict[str, dict], str]:
    """Run the sweep on this machine's CPU; its exit status, output, rows and table."""
    out = Path(args[args.index("--out") + 1])
    done = subprocess.run(
        [sys.executable, str(SWEEP), *args, "--gpus", "none"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    rows_file = out / "rows.jsonl"
    rows = {}
    if rows_file.exists():
        for line in rows_file.read_text().splitlines():
            row = json.loads(line)
            rows[row["problem"]] = row
    table = (out / "table.md").read_text() if (out / "table.md").exists() else ""
    return done.returncode, done.stdout + done.stderr, rows, table


def table_row(table: str, problem: str) -> list[str]:
    line = next(line for line in table.splitlines() if line.startswith(f"| {problem} |"))
    return [cell.strip() for cell in line.strip("|").split(" | ")]


@pytest.mark.runs_long
def test_a_kernelbench_shaped_suite_is_judged_and_tabled(tmp_path):
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    for name, body in KERNELBENCH.items():
        (level / name).write_text(KB_HEADER + body + KB_FOOTER)
    out = tmp_path / "out"
    code, output, rows, table = sweep(
        "kernelbench", str(tmp_path / "KernelBench"), "--levels", "1", "--out", str(out)
    )
    assert set(rows) == {"kernelbench_l1_1_double", "kernelbench_l1_2_randomstate"}, output
    row = rows["kernelbench_l1_1_double"]
    assert row["status"] == "passed", (row, output)
    assert row["candidate"] == "ModelNew = Model"
    assert row["speedup"] > 0 and isinstance(row["tied"], bool), row
    assert row["peak_gpu_bytes"] is None and row["wall_s"] > 0
    cells = table_row(table, "kernelbench_l1_1_double")
    assert cells[1] == "passed" and cells[2] in ("yes", "no") and cells[4] == "n/a", cells
    assert cells[3].startswith(f"{row['speedup']:.3f}×"), cells
    broken = rows["kernelbench_l1_2_randomstate"]
    assert broken["status"] == "failed", (broken, output)
    assert "differ" in broken["reason"] and "judge raised" not in broken["reason"], broken
    assert table_row(table, "kernelbench_l1_2_randomstate")[1] == "failed"
    # One progress line per problem, with counts and an ETA; the target line; the table.
    assert output.count("ETA") == 2 and "[2/2 " in output, output
    assert "Target (all but 0 pass and tie)" in table
    assert code == 1  # the broken problem misses a target that allows no miss

    # A second sweep over the same folder finds every row there and judges nothing.
    code, output, again, _ = sweep(
        "kernelbench",
        str(tmp_path / "KernelBench"),
        "--levels",
        "1",
        "--out",
        str(out),
        "--misses",
        "1",
    )
    assert "2 done" in output and "ETA" not in output, output
    assert again == rows
    broken_only = "Target (all but 1 pass and tie)"
    assert broken_only in (out / "table.md").read_text()


@pytest.mark.runs_long
def test_a_gpumode_shaped_problems_folder_says_why_each_problem_is_not_run(tmp_path):
    problems = tmp_path / "problems"
    shutil.copytree(SETX, problems)
    for folder, reference in REFERENCES.items():
        target = problems / "sweepset" / folder
        target.mkdir(parents=True)
        (target / "reference.py").write_text(reference)
        multi = folder == "ranks8_py"
        (target / "task.yml").write_text(
            TASK_YML.format(
                extra="multi_gpu: true\n" if multi else "",
                case='"world_size": 8, ' if multi else "",
            )
        )
        if folder in SUBMISSIONS:
            (target / "submission.py").write_text(SUBMISSIONS[folder])
    (problems / "sweepset.yaml").write_text(COMPETITION)
    out = tmp_path / "out"
    code, output, rows, table = sweep("gpumode", str(problems), "--mode", "test", "--out", str(out))
    assert set(rows) == {
        "scale_v1",
        "negate_v1",
        "sweep_fnuz",
        "sweep_aiter",
        "sweep_needs_pkg",
        "sweep_ranks8",
    }, output
    for name in ("scale_v1", "negate_v1"):  # shipped submissions that run here
        assert rows[name]["status"] == "passed", (rows[name], output)
        assert rows[name]["candidate"] == "shipped submission.py"
    needs_pkg = rows["sweep_needs_pkg"]
    assert needs_pkg["status"] == "passed", (needs_pkg, output)
    assert needs_pkg["candidate"] == (
        "reference as custom_kernel (submission.py imports helion_not_installed_here, "
        "not installed)"
    )
    fnuz = rows["sweep_fnuz"]
    assert fnuz["status"] == "not_run", (fnuz, output)
    assert fnuz["reason"].startswith("AMD-only: uses float8_e4m3fnuz"), fnuz
    # The judge's own message says so (pytest users see the same), with what raised.
    assert (
        "reference cannot run"
        in json.loads((out / "records" / "sweep_fnuz.json").read_text())["cases"][0]["message"]
    )
    aiter = rows["sweep_aiter"]
    assert aiter["status"] == "not_run" and aiter["reason"].startswith("AMD-only: uses aiter")
    ranks8 = rows["sweep_ranks8"]
    assert ranks8["status"] == "not_run" and "needs 8 GPUs" in ranks8["reason"], ranks8
    assert table_row(table, "sweep_ranks8")[1] == "not_run"
    assert "fails for a cause listed upstream): met." in table
    assert code == 0, output


H100 = Device("NVIDIA", "NVIDIA H100 80GB HBM3", "sm_90")
B200 = Device("NVIDIA", "NVIDIA B200", "sm_100")
MI300 = Device("AMD", "AMD Instinct MI300X", "gfx942")


@pytest.mark.parametrize(
    ("texts", "declared", "device", "expected"),
    [
        (
            ["NotImplementedError: \"add_stub\" not implemented for 'Float8_e4m3fnuz'"],
            (),
            H100,
            "AMD-only: uses float8_e4m3fnuz; this GPU is NVIDIA H100 80GB HBM3 (sm_90)",
        ),
        (["x.to(torch.float8_e4m3fnuz)"], ("MI300",), MI300, None),
        (
            ["ModuleNotFoundError: No module named 'aiter'"],
            (),
            Device(""),
            "AMD-only: uses aiter (AMD's ROCm kernels); this machine has no GPU",
        ),
        (
            ["CUBLAS_STATUS_NOT_SUPPORTED", "a = a.view(torch.float4_e2m1fn_x2)"],
            ("NVIDIA",),
            H100,
            "needs sm_100 (Blackwell): uses float4_e2m1fn_x2; "
            "this GPU is NVIDIA H100 80GB HBM3 (sm_90)",
        ),
        (["a = a.view(torch.float4_e2m1fn_x2)"], ("B200",), B200, None),
        (
            ["RuntimeError: no kernel image"],
            ("MI300x8",),
            H100,
            "AMD-only: ranks on MI300x8; this GPU is NVIDIA H100 80GB HBM3 (sm_90)",
        ),
        (
            ["RuntimeError: no kernel image"],
            ("B200_Nebius",),
            H100,
            "needs sm_100 (Blackwell): ranks on B200_Nebius; "
            "this GPU is NVIDIA H100 80GB HBM3 (sm_90)",
        ),
        (["RuntimeError: no kernel image"], ("H100", "MI300"), H100, None),
        (["RuntimeError: shapes do not match"], (), H100, None),
    ],
)
def test_the_hardware_a_failure_needs_is_named(texts, declared, device, expected):
    assert hardware_note(texts, declared, device) == expected


def test_blackwell_is_compute_capability_10_and_up():
    assert B200.blackwell and Device("NVIDIA", "RTX", "sm_120").blackwell
    assert not H100.blackwell and not MI300.blackwell and not Device("").blackwell


def test_a_problem_stopped_at_the_cap_is_a_timeout_whatever_hardware_it_names():
    """It was running when the cap stopped it: AMD code that runs on an NVIDIA GPU, slowly, is
    not explained by the AMD dtype it names; a failure of the same code is."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep
    from sweep_lane import Answer

    problem = suite_sweep.Problem(
        "amd-fp8-mm", "amd/fp8-mm", source_text="x.to(torch.float8_e4m3fnuz)"
    )
    stopped = Answer(error="still being judged after --cap 200 s", timed_out=True, wall_s=200)
    row = suite_sweep.row_for(problem, stopped, "benchmark", device=H100)
    assert row["status"] == "timeout" and "AMD" not in row["reason"], row
    failed = Answer(error="RuntimeError: cuBLAS NOT_SUPPORTED", wall_s=3)
    row = suite_sweep.row_for(problem, failed, "benchmark", device=H100)
    assert row["status"] == "not_run" and row["reason"].startswith("AMD-only"), row


def test_a_lane_that_dies_is_the_harness_error_whatever_hardware_the_problem_ranks_on():
    """A GPU MODE folder declared for MI300 whose lane died mid-job (its reference had run on
    the NVIDIA GPU) is an error to look into, not "AMD-only"."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep
    from sweep_lane import Answer, exit_words

    problem = suite_sweep.Problem("amd-mla-decode", "amd/mla-decode", declared=("MI300",))
    died = Answer(error=f"the lane's process died ({exit_words(-9)})", wall_s=263, died=True)
    row = suite_sweep.row_for(problem, died, "benchmark", device=H100)
    assert row["status"] == "error" and "AMD" not in row["reason"], row
    assert "out-of-memory" in row["reason"]
    assert exit_words(1) == "exit 1" and exit_words(-15) == "killed by SIGTERM"
    failed = Answer(error="RuntimeError: no kernel image is available", wall_s=3)
    row = suite_sweep.row_for(problem, failed, "benchmark", device=H100)
    assert row["status"] == "not_run" and row["reason"].startswith("AMD-only"), row


def test_a_problem_gets_as_long_as_its_own_task_yml_gives_it():
    """--cap catches a judge that hangs: a GPU MODE folder whose task.yml allows a longer run
    (a 1 s reference call in five workers on 18 cases) is not stopped short of it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep

    problem = suite_sweep.Problem("amd-mla-decode", "amd/mla-decode")
    assert problem.cap_s("benchmark", 300.0) == 300.0  # nothing known: --cap
    problem.timeouts = {"test": 120.0, "benchmark": 180.0}
    runs = 1 + suite_sweep.REFERENCE_WORKERS  # the candidate and each reference worker
    assert problem.cap_s("benchmark", 300.0) == 180.0 * runs
    assert problem.cap_s("test", 300.0) == 300.0  # one run of 120 s: --cap is longer
    assert problem.cap_s("test", 60.0) == 120.0
    # Each of the candidate's fresh workers gets as long as one reference worker.
    assert problem.cap_s("benchmark", 300.0, candidate_workers=3) == 180.0 * (runs + 2)


def test_a_passed_problem_without_a_speedup_says_why_the_reference_was_not_timed():
    """A row of a passed problem with no speedup names the case the reference could not be
    timed on and why, rather than a bare dash."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep
    from sweep_lane import Answer

    timed = {"kind": "benchmark", "id": "size=262144", "status": "passed", "speedup": None}
    record = {
        "status": "passed",
        "duration_s": 3.0,
        "tied": None,
        "speedup": None,
        "cases": [
            {**timed, "reference_error": "the worker ran out of time\nafter 180 s"},
            {**timed, "id": "size=524288", "speedup": 1.0},
        ],
    }
    problem = suite_sweep.Problem("prefixsum", "pmpp/prefixsum_py")
    row = suite_sweep.row_for(problem, Answer(record=record, wall_s=3), "benchmark", device=H100)
    assert row["status"] == "passed" and row["speedup"] is None
    assert row["reason"] == (
        "the reference could not be timed on size=262144: the worker ran out of time"
    )
    # A folder its own eval.py judges (Princeton's cross_entropy) has no reference to time.
    record["cases"] = [{**timed, "id": "vocab_size=32000"}]
    own = suite_sweep.Problem("princeton_cross_entropy", "princeton2026/cross_entropy_py")
    own.own_harness = "eval.py"
    row = suite_sweep.row_for(own, Answer(record=record, wall_s=3), "benchmark", device=H100)
    assert row["status"] == "passed" and row["reason"].startswith("judged by its own eval.py")


def test_a_terminated_sweep_writes_no_row_for_the_problems_in_flight(tmp_path):
    """SIGTERM kills the lanes; the problem a lane was judging is not written as an error of
    its own (the lane's death is the sweep's doing), so a sweep over the same --out judges it
    again."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep
    from sweep_lane import Answer, exit_words

    class Suite:
        def stop(self):
            pass

    sweep = suite_sweep.Sweep(Suite(), tmp_path, "benchmark", 300.0, None)

    class KilledLane:
        def judge(self, job, cap_s):
            sweep.terminate()
            return Answer(error=f"the lane's process died ({exit_words(-9)})", died=True)

    sweep.judge(KilledLane(), suite_sweep.Problem("trimul", "bioml/trimul"), None)
    assert not (tmp_path / "rows.jsonl").exists() and not sweep.rows


def test_a_gpumode_target_names_the_failures_that_are_upstream_and_misses_the_rest():
    """A shipped submission that fails for a cause listed upstream is named beside the
    verdict; an error (whoever's), a timeout or an unlisted failure misses the target."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep

    upstream = {"problem": "vectorsum", "status": "failed", "upstream": "its float32 atomics"}
    rows = [
        upstream,
        {"problem": "mine", "status": "error", "upstream": None},
        {"problem": "ok", "status": "passed"},
    ]
    line, met = suite_sweep.target_verdict("gpumode", rows, 3, 0)
    assert not met and "NOT met: mine; 1 fail upstream, each with its cause: vectorsum." in line
    line, met = suite_sweep.target_verdict("gpumode", [upstream, rows[2]], 2, 0)
    assert met and line.endswith("met; 1 fail upstream, each with its cause: vectorsum.")
    crashed = {**upstream, "status": "error"}  # listed upstream, but an error is not its cause
    line, met = suite_sweep.target_verdict("gpumode", [crashed, rows[2]], 2, 0)
    assert not met and "NOT met: vectorsum" in line


def test_a_problem_whose_every_case_needs_more_gpus_than_the_sweep_has_is_not_run_at_once(
    tmp_path,
):
    """GPU MODE's amd_distributed cases all ask for 8 GPUs: on a 4-GPU sweep their rows say so
    as the suite is imported, rather than after every other problem (where a --stop-after or a
    window's end left them without a row)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep

    class Suite:
        def stop(self):
            pass

    sweep = suite_sweep.Sweep(Suite(), tmp_path, "benchmark", 300.0, None)
    sweep.gpus = [0, 1, 2, 3]
    eight = suite_sweep.Problem("all2all", "amd_distributed/all2all", world_size=8, fewest_gpus=8)
    assert sweep.too_few_gpus(eight) == "needs 8 GPUs; this sweep has 4 (0,1,2,3)"
    mixed = suite_sweep.Problem("mixed", "x/mixed", world_size=8, fewest_gpus=2)
    assert sweep.too_few_gpus(mixed) == ""  # its 2-GPU cases run; the judge skips the rest
    sweep.gpus = None  # one CPU lane: the judge's CPU cap decides
    assert sweep.too_few_gpus(eight) == ""
    eight.not_run = "needs 8 GPUs; this sweep has 4 (0,1,2,3)"
    row = suite_sweep.row_for(eight, None, "benchmark", device=H100)
    assert row["status"] == "not_run" and row["reason"].startswith("needs 8 GPUs"), row


def test_a_peak_is_read_on_the_gpus_a_process_uses():
    """NVML numbers a host's GPUs whatever CUDA_VISIBLE_DEVICES says: the evaluator's cuda:0
    under CUDA_VISIBLE_DEVICES=2 is NVML's GPU 2."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from sweep_lane import nvml_numbers

    assert nvml_numbers([0], {"CUDA_VISIBLE_DEVICES": "2"}) == [2]
    assert nvml_numbers([0, 1], {"CUDA_VISIBLE_DEVICES": "3, 1"}) == [3, 1]
    assert nvml_numbers([0, 1], {}) == [0, 1]
    assert nvml_numbers([0], {"CUDA_VISIBLE_DEVICES": "GPU-5c1e"}) == [0]  # a UUID: as given


def test_a_spread_problem_is_judged_last_over_every_gpu_of_the_sweep(tmp_path, monkeypatch):
    """--spread: a problem too long for one GPU's window (GPU MODE's eigh) waits for the
    one-GPU lanes to finish, then goes to the lane that holds every GPU, its job saying to
    spread it (the lane judges it as a batch over every GPU it sees)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import suite_sweep
    from sweep_lane import Answer, CliLane

    judged: list[tuple[list[int] | None, dict]] = []

    class Recorded:
        def __init__(self, gpus):
            self.gpus = gpus

        def judge(self, job, cap_s):
            judged.append((self.gpus, job))
            return Answer(error="recorded")

        def close(self):
            pass

    eigh = suite_sweep.Problem("eigh", "linalg/eigh_py", candidate_id="submission.py")
    qr = suite_sweep.Problem("qr", "linalg/qr_py", candidate_id="submission.py")

    class Suite:
        def prepare(self, problems, root, ready):
            for problem in problems:
                ready(problem)

        def stop(self):
            pass

    sweep = suite_sweep.Sweep(Suite(), tmp_path, "benchmark", 300.0, [0, 1, 2, 3])
    monkeypatch.setattr(sweep, "lane", lambda gpus, name: Recorded(gpus))
    for problem in (eigh, qr):
        problem.spread = suite_sweep.matches(problem, ["EIGH*"])
    sweep.run([eigh, qr])
    (one_gpu, first), (every_gpu, last) = judged
    assert first["problem"] == "qr" and not first["spread"] and len(one_gpu) == 1
    assert last["problem"] == "eigh" and last["spread"] and every_gpu == [0, 1, 2, 3]
    assert [row["problem"] for row in sweep.rows] == ["qr", "eigh"]

    # `kernelboard judge` per problem (--cli): a spread job names every GPU of its lane.
    cli = CliLane(tmp_path, "benchmark", [0, 1, 2, 3], tmp_path / "cli.log")
    assert cli.visible({"spread": True}) == "0,1,2,3" and cli.visible({"spread": False}) == "0"
    cli.close()
