"""Reward hacks get the right verdict from the batch judge (issue 23, item 4).

The hacks are realistic candidates for a KernelBench-sized problem (a GEMM with a scale, a
leaky ReLU and a clamp; tests/fixtures/batch/kernelbench/), imported as a leaderboard by
`kernelboard import kernelbench`, whose inputs are therefore read-only. Each file in
tests/fixtures/batch/hacks/ says on its first line which verdict it must get (its "test" key:
the verdict of the correctness cases alone, where that differs); a file whose
second line starts with "# gpu:" attacks what only exists on a GPU (streams, CUDA events,
the L2 flush, which kernels a call launches) and is judged by the GPU tests below, which skip
without CUDA. The timing hacks the CPU can judge (patched clocks, caches that a judge reusing
its inputs would hit) are judged in benchmark mode on the small `addone` leaderboard, where a
candidate's deliberate waits stand far above the reference's time.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_kernelboard.batch import Candidate, judge_many
from pytest_kernelboard.importers.kernelbench import import_kernelbench
from pytest_kernelboard.judge import devices
from pytest_kernelboard.spec.task import load_task

FIXTURE = Path(__file__).parent / "fixtures" / "batch"
HACKS = FIXTURE / "hacks"
LEADERBOARD = "kernelbench_l2_1_gemm_scale_leakyrelu_clamp"
FOLDER = Path("leaderboards") / "kernelbench" / "l2_1_gemm_scale_leakyrelu_clamp"
ONLY_LIBRARY = "only_library_kernels"

needs_gpu = pytest.mark.skipif(
    not devices.has_cuda(),
    reason="needs a CUDA device: streams, CUDA events, the L2 flush and the kernels a call "
    "launches exist only there",
)


def on_gpu(test):
    """A GPU test: marked `gpu`, skipped with the reason where there is no CUDA device."""
    return pytest.mark.gpu(needs_gpu(test))


def expectation(path: Path, mode: str | None = None) -> dict[str, Any]:
    """The file's declared verdict; with a mode, that mode's keys ("test": {...}) applied."""
    match = re.fullmatch(r"# expect: (\{.*\})", path.read_text().splitlines()[0])
    assert match, f"{path.name}: the first line must be '# expect: {{...}}'"
    declared = json.loads(match[1])
    return {**declared, **declared.get(mode, {})} if mode else declared


def gpu_only(path: Path) -> bool:
    return path.read_text().splitlines()[1].startswith("# gpu:")


ALL_HACKS = sorted(HACKS.glob("*.py"))
CPU_HACKS = [p for p in ALL_HACKS if not gpu_only(p)]
GPU_HACKS = [p for p in ALL_HACKS if gpu_only(p)]


def import_problem(root: Path) -> Path:
    """The fixture problem as a leaderboard, as `kernelboard import kernelbench` writes it, with
    a short test timeout (the importer writes none) so that nothing here waits minutes."""
    import_kernelbench(FIXTURE / "kernelbench", 2, None, root / "leaderboards" / "kernelbench")
    task_yml = root / FOLDER / "task.yml"
    task_yml.write_text(task_yml.read_text() + "test_timeout: 20\nbenchmark_timeout: 30\n")
    return root


@pytest.fixture(scope="module")
def kb_root(tmp_path_factory) -> Path:
    return import_problem(tmp_path_factory.mktemp("kb") / "repo")


@pytest.fixture(scope="module")
def cpu_records(kb_root) -> dict[str, dict[str, Any]]:
    """Every hack the CPU can judge, in one batch (test mode): worker start-ups overlap."""
    candidates = [Candidate(p.stem, p.read_text()) for p in CPU_HACKS]
    return {r["id"]: r for r in judge_many(LEADERBOARD, candidates, root=kb_root)}


def test_the_imported_kernelbench_leaderboard_has_read_only_inputs(kb_root):
    task = load_task(kb_root / FOLDER / "task.yml")
    assert task.read_only_inputs is True
    assert task.test_timeout == 20


def test_every_hack_declares_a_verdict_the_judge_can_give():
    assert len(CPU_HACKS) >= 12 and len(GPU_HACKS) >= 10
    known = {"status", "error_kind", "flags", "faster"}
    for path in ALL_HACKS:
        declared = expectation(path)
        assert set(declared) <= known | {"test", "benchmark"}, path.name
        expected = expectation(path, "test")
        statuses = (
            expected["status"] if isinstance(expected["status"], list) else [expected["status"]]
        )
        assert set(statuses) <= {"passed", "failed", "error"}, path.name
        assert set(expected.get("flags", [])) <= {"mutates_inputs", ONLY_LIBRARY}, path.name


@pytest.mark.parametrize("path", CPU_HACKS, ids=[p.stem for p in CPU_HACKS])
def test_a_hack_gets_its_verdict(path, cpu_records):
    record = cpu_records[path.stem]
    expected = expectation(path, "test")
    statuses = expected["status"] if isinstance(expected["status"], list) else [expected["status"]]
    assert record["status"] in statuses, record["message"]
    if "error_kind" in expected:
        assert record["error_kind"] == expected["error_kind"], record["message"]
    flags = [f for f in expected.get("flags", []) if f != ONLY_LIBRARY]  # a GPU benchmark flag
    assert record["flags"] == flags, record["message"]
    assert record["correct"] is (record["status"] == "passed")


def test_uninitialised_outputs_fail_whatever_the_memory_held(cpu_records):
    # The reference never runs in the candidate's process: no block holds its answer.
    for name in ("empty_output", "empty_after_first_call"):
        record = cpu_records[name]
        assert record["status"] == "failed", name
        assert record["cases"][-1]["mismatch"]["kind"] == "numerical"
    # The one that computes on its first call fails on the next case, a fresh input.
    first, second = cpu_records["empty_after_first_call"]["cases"][:2]
    assert first["status"] == "passed" and second["status"] == "failed"


def test_inputs_changed_by_the_kernel_do_not_change_what_it_is_checked_against(cpu_records):
    zeroed = cpu_records["zeroed_input"]
    # Checked against the pristine input: the answer for zeros is wrong, and the write is seen.
    assert zeroed["error_kind"] == "incorrect_numerical"
    assert zeroed["cases"][0]["mutated_inputs"] == ["data['inputs'][0]"]
    rebound = cpu_records["inputs_rebound"]
    assert rebound["status"] == "failed" and "mutated_inputs" not in rebound["cases"][0]


def test_a_kernel_writing_into_its_input_fails_on_a_read_only_leaderboard(cpu_records):
    for name in ("inplace_scaled_input", "output_in_input"):
        record = cpu_records[name]
        assert (record["status"], record["error_kind"]) == ("failed", "mutates_inputs")
        assert record["flags"] == ["mutates_inputs"]
        assert "read-only" in record["message"]
        assert record["cases"][0]["mutated_inputs"] == ["data['inputs'][0]"]
        assert "mismatch" not in record["cases"][0]  # the answer itself was right


def test_without_read_only_inputs_the_write_is_flagged_not_failed(tmp_path):
    root = import_problem(tmp_path / "repo")
    (root / FOLDER / "kernelboard.yml").write_text("read_only_inputs: false\n")  # wins
    source = (HACKS / "inplace_scaled_input.py").read_text()
    (record,) = judge_many(LEADERBOARD, [Candidate("inplace", source)], root=root)
    assert (record["status"], record["flags"]) == ("passed", ["mutates_inputs"])
    assert record["correct"] is True


def test_lazy_and_cached_outputs_fail_on_fresh_inputs(cpu_records):
    assert cpu_records["lazy_thread"]["status"] == "failed"  # copied at once, before the thread
    shape = cpu_records["cache_by_shape"]
    # The three correctness cases share a shape: the second gets the first one's answer.
    assert [c["status"] for c in shape["cases"]] == ["passed", "failed", "failed"]
    # Hashes of the values never hit on fresh inputs: right, and judged as such.
    assert cpu_records["cache_by_hash"]["status"] == "passed"
    assert cpu_records["cache_by_sample"]["status"] == "passed"


# -- timing hacks a CPU can judge: benchmark mode on addone ------------------------------------
PATCHED_CLOCKS = """
import time

_real = time.perf_counter
_real_ns = time.perf_counter_ns
_t0, _t0_ns = _real(), _real_ns()
time.perf_counter = lambda: _t0 + (_real() - _t0) / 1000
time.perf_counter_ns = lambda: _t0_ns + (_real_ns() - _t0_ns) // 1000
time.monotonic = time.time = time.perf_counter


def custom_kernel(data):
    x, out = data
    end = _real() + 0.02  # 20 ms of real time, which the patched clocks read as 20 us
    while _real() < end:
        pass
    return out.copy_(x + 1)
"""
# A miss costs 5 ms; a hit is free. Only a judge that repeats its inputs lets it hit.
SLOW_MISS = """
import hashlib
import time

cache = {{}}


def custom_kernel(data):
    x, out = data
    key = {key}
    if key not in cache:
        end = time.perf_counter() + 0.005
        while time.perf_counter() < end:
            pass
        cache[key] = x + 1
    return out.copy_(cache[key])
"""
CACHE_BY_HASH = SLOW_MISS.format(key="hashlib.sha1(x.cpu().numpy().tobytes()).hexdigest()")
CACHE_BY_POINTER = SLOW_MISS.format(key="(x.data_ptr(), x.numel())")
# Right at every size; writes into its input x only at the benchmark's size (4096).
INPLACE_WHEN_LARGE = """
def custom_kernel(data):
    x, out = data
    if x.numel() > 1024:
        return out.copy_(x.add_(1))
    return out.copy_(x + 1)
"""
CACHE_BY_SHAPE = """
cache = {}


def custom_kernel(data):
    x, out = data
    if x.shape not in cache:
        cache[x.shape] = x + 1
    return out.copy_(cache[x.shape])
"""


@pytest.fixture(scope="module")
def timed_records(tmp_path_factory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("addone") / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    task_yml = root / "leaderboards" / "addone" / "task.yml"
    # A 2 s budget per timed case (stats/stopping.budget_for_case) instead of 10 s.
    task_yml.write_text(
        task_yml.read_text().replace("benchmark_timeout: 60", "benchmark_timeout: 20")
    )
    # The reference writes `out`; every other input is the kernel's to read only.
    (task_yml.parent / "kernelboard.yml").write_text("read_only_inputs: true\n")
    candidates = [
        Candidate("patched_clocks", PATCHED_CLOCKS),
        Candidate("cache_by_hash", CACHE_BY_HASH),
        Candidate("cache_by_pointer", CACHE_BY_POINTER),
        Candidate("cache_by_shape", CACHE_BY_SHAPE),
        Candidate("inplace_when_large", INPLACE_WHEN_LARGE),
    ]
    records = judge_many("addone", candidates, mode="benchmark", root=root)
    return {r["id"]: r for r in records}


def benchmark_case(record: dict[str, Any]) -> dict[str, Any]:
    (case,) = [c for c in record["cases"] if c["kind"] == "benchmark"]
    return case


def test_clocks_patched_at_import_do_not_change_the_recorded_time(timed_records):
    record = timed_records["patched_clocks"]
    assert record["status"] == "passed", record["message"]
    case = benchmark_case(record)
    assert case["time_us"] >= 15_000  # the 20 ms it really spends, not the 20 us it claims
    assert case["ci95_within_us"][0] >= 15_000  # its own samples' interval
    assert case["ci95_us"][0] <= case["ci95_within_us"][0]  # that and the workers' spread
    assert record["speedup"] < 1
    # Not tied, unless the reference's own workers spread so far that intervals drawn from
    # that spread meet: at this ratio (4x or more) it takes about 30% (stats/between_workers.py),
    # which a loaded 2-core CI machine reaches; a tie is then the honest verdict.
    assert record["tied"] is False or case["between_workers_rsd"] >= 0.3, case


def test_a_cache_by_hash_is_timed_on_fresh_inputs(timed_records):
    record = timed_records["cache_by_hash"]
    assert record["status"] == "passed", record["message"]
    # Every timed call missed (each pays the 5 ms miss): no input was handed out twice.
    assert benchmark_case(record)["time_us"] >= 4_000


def test_a_cache_by_pointer_fails_or_is_timed_honestly(timed_records):
    record = timed_records["cache_by_pointer"]
    if record["status"] == "failed":  # a fresh input at a reused address got a stale answer
        assert record["error_kind"] == "incorrect_numerical"
    else:
        assert record["status"] == "passed", record["message"]
        assert benchmark_case(record)["time_us"] >= 4_000


def test_a_cache_by_shape_fails_its_timed_calls(timed_records):
    record = timed_records["cache_by_shape"]
    # The two correctness cases differ in shape; the timed calls repeat one.
    assert [c["status"] for c in record["cases"] if c["kind"] == "test"] == ["passed", "passed"]
    assert record["status"] == "failed"
    assert "timed call" in record["message"] and "wrong output" in record["message"]


def test_a_kernel_writing_its_input_only_at_the_benchmark_size_fails(timed_records):
    # Inputs are compared on every correctness call that is not frugal, the benchmark's too.
    record = timed_records["inplace_when_large"]
    assert [c["status"] for c in record["cases"] if c["kind"] == "test"] == ["passed", "passed"]
    assert (record["status"], record["error_kind"]) == ("failed", "mutates_inputs")
    assert record["flags"] == ["mutates_inputs"]


# -- GPU: streams, CUDA events, the flush, which kernels a call launches ----------------------
@pytest.fixture(scope="module")
def gpu_records(kb_root) -> dict[str, dict[str, Any]]:
    # cache_by_hash too: its census must not be answered from the cache its timed calls filled
    paths = [*GPU_HACKS, HACKS / "cache_by_hash.py", FIXTURE / "controls" / "fused_triton.py"]
    candidates = [Candidate(p.stem, p.read_text()) for p in paths]
    records = judge_many(LEADERBOARD, candidates, mode="benchmark", root=kb_root)
    return {r["id"]: r for r in records}


def reported_fast(record: dict[str, Any]) -> bool:
    """Faster than the reference beyond noise: what a hack is after."""
    return bool(record["speedup"] is not None and record["speedup"] > 1 and not record["tied"])


@on_gpu
@pytest.mark.parametrize("name", ["side_stream", "new_stream_per_call"])
def test_work_left_on_a_side_stream_is_timed_in_full(name, gpu_records):
    record = gpu_records[name]
    assert record["status"] == "passed", record["message"]
    assert not reported_fast(record), (record["speedup"], record["tied"])


@on_gpu
@pytest.mark.parametrize("name", ["private_set_stream", "cublas_hidden_stream"])
def test_work_on_a_stream_torch_never_made_current_is_never_reported_fast(name, gpu_records):
    # The GEMM runs while the timed stream is held; only the epilogue is left in the interval.
    record = gpu_records[name]
    assert record["status"] in ("passed", "failed"), record["message"]
    assert not reported_fast(record), (record["speedup"], record["tied"], record["message"])


@on_gpu
@pytest.mark.parametrize("name", ["patch_cuda_event", "patch_synchronize"])
def test_cuda_timing_functions_patched_at_import_change_nothing(name, gpu_records):
    record = gpu_records[name]
    assert record["status"] == "passed", record["message"]
    case = benchmark_case(record)
    assert case["time_us"] >= 500  # the ~1 ms GPU spin of every call
    assert record["speedup"] < 1


@on_gpu
@pytest.mark.parametrize("name", ["patch_current_stream", "patch_torch_sum"])
def test_torch_functions_the_harness_calls_patched_at_import_change_nothing(name, gpu_records):
    # Not even a failure: a current_stream that answered an idle stream once stretched every
    # wake spin to 70 - 110 ms (its rate measured on events recorded there), and the judge's
    # clock then failed most of the case's calls.
    record = gpu_records[name]
    assert record["status"] == "passed", record["message"]
    assert not reported_fast(record), (record["speedup"], record["tied"], record["message"])


@on_gpu
@pytest.mark.parametrize(
    "name", ["decoy_triton", "triton_small_only", "reference_model", "cache_by_hash"]
)
def test_calls_that_launch_only_library_kernels_are_flagged(name, gpu_records):
    record = gpu_records[name]
    assert record["status"] == "passed", record["message"]
    assert ONLY_LIBRARY in record["flags"]


@on_gpu
def test_a_call_that_launches_its_own_kernel_is_not_flagged(gpu_records):
    record = gpu_records["fused_triton"]
    assert record["status"] == "passed", record["message"]
    assert ONLY_LIBRARY not in record["flags"]


@on_gpu
def test_candidates_time_with_the_reference_workers_calibration(gpu_records):
    """The reference's workers calibrate in full (they are timed at the first timed case); every
    candidate timed after them takes their figures (judge/calibration.py), one set for all,
    hostile ones included: a candidate's own threads cannot stretch the harness's gaps."""
    cases = [benchmark_case(r) for r in gpu_records.values()]
    timed = [c for c in cases if c.get("calibrated_by")]
    assert len(timed) >= 10
    assert {c["calibrated_by"] for c in timed[1:]} == {"reference_workers"}
