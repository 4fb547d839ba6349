"""Whose kernels a call launched: a candidate's own, or only library ones."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

from pytest_kernelboard.judge.kernels import (
    census_exceeds_timing,
    is_library_kernel,
    only_library_kernels,
    own_kernel_names,
    top_kernels,
)
from pytest_kernelboard.spec.cases import UNSEEN_CALL_INDEX, Case
from pytest_kernelboard.worker.census import KernelCensus, drop_sentinels

REPO = Path(__file__).resolve().parents[1]

LIBRARY = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(...)",
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(...)",
    "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1",
    "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNN",
    "void cublasLt::splitKreduce_kernel<32, 16, int, float>(...)",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<...>>(...)",
    "fmha_cutlassF_f32_aligned_64x64_rf_sm80(...)",
    "cutlass3x_sm90_tensorop_s64x128x16gemm_f32_f32_f32_f32_f32_128x128x32_1x2x1_0_tnn_align4",
    "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4",
    "triton_poi_fused_add_mul_0",
    "triton_red_fused_sum_1",
    "void cub::DeviceReduceKernel<...>(...)",
    # cuBLAS's own BLAS kernels: what torch's fp32 addmm runs at KernelBench's level-2 sizes on
    # the H100 (seen there: the census of a candidate that only calls torch)
    "void sgemm_largek_lds64<true, false, 5, 5, 4, 4, 4, 34>(float*, float const*, float const*, int)",
    "void scal_kernel<float, float, 1, true, 6, 5, 5, 3>(float*, float const*, int)",
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false>(...)",
    "void dot_kernel<float, 128, 0>(cublasDotParams<float>)",
]
OWN = [
    "add_kernel",  # a Triton kernel of the candidate's: its function's name
    "_Z10vec_add_f32PKfS0_Pfi",  # a load_inline kernel, mangled
    "fused_gemm_leaky_relu(float const*, float*, int)",
    "softmax_online_kernel",
    "void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<MyFusedGemm>>(...)",
    "void my_sgemm_tiled(float const*, float*, int)",  # named like cuBLAS's, but its own
    "matmul_sgemm_kernel",
]


@pytest.mark.parametrize("name", LIBRARY)
def test_library_kernels_are_recognised(name):
    assert is_library_kernel(name)


@pytest.mark.parametrize("name", OWN)
def test_a_candidates_own_kernels_are_not(name):
    assert not is_library_kernel(name)


def test_only_library_kernels_needs_every_kernel_to_be_a_librarys():
    assert only_library_kernels([(LIBRARY[0], 5.0), (LIBRARY[2], 40.0)])
    assert not only_library_kernels([(LIBRARY[0], 5.0), (OWN[0], 1.0)])
    assert not only_library_kernels([])  # launched nothing: the verdict says what that is


def test_top_kernels_sums_calls_by_name_longest_first():
    top = top_kernels([("a", 1.0), ("b", 5.0), ("a", 2.0), ("c", 0.5)], n=2)
    assert top == [
        {"name": "b", "calls": 1, "device_us": 5.0, "library": False},
        {"name": "a", "calls": 2, "device_us": 3.0, "library": False},
    ]


def test_own_kernels_come_from_the_source_and_a_decoy_is_seen_through():
    source = (
        "import triton\n@triton.jit\ndef fused_leaky(x_ptr, n):\n    pass\n\n"
        "@triton.autotune(configs=[], key=[])\n@triton.jit\ndef tuned(x):\n    pass\n"
        'cuda = """__global__ void add_kernel(const float* a) {}\n'
        'template <int N> __global__ void __launch_bounds__(256) tiled(float* x) {}"""\n'
    )
    own = own_kernel_names(source)
    assert {"fused_leaky", "add_kernel", "tiled"} <= own
    torch_only = [("void at::native::vectorized_elementwise_kernel<4>(...)", 3.0)]
    # Its Triton kernel is defined but the call launched only torch's: a decoy.
    assert only_library_kernels(torch_only, own)
    assert not only_library_kernels(torch_only + [("fused_leaky", 1.0)], own)


def test_a_kernel_longer_than_the_whole_timed_call_ran_outside_it():
    timing = {"rank_us": 2.0}
    hidden = [("sm90_xmma_gemm_f32", 40.0), ("epilogue", 1.5)]
    assert "ran outside the timed stream" in census_exceeds_timing(hidden, timing)
    # Overlapping kernels on fenced streams are each within the interval: nothing to say.
    assert census_exceeds_timing([("a", 9.0), ("b", 9.0)], {"rank_us": 10.0}) is None
    assert census_exceeds_timing(None, timing) is None


ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


# -- the worker's census under a profiler that loses its first records --------------------------


class _LossyProfiler:
    """torch's profiler as CUPTI leaves it: session k (from 0) loses its first k kernel
    records, as when the timestamp callback is registered again for every session."""

    sessions = 0

    def __init__(self, launches: list[str], **options: object) -> None:
        self.launches = launches
        self.options = options

    def __enter__(self) -> _LossyProfiler:
        self.launches.clear()
        return self

    def __exit__(self, *_: object) -> None:
        type(self).sessions += 1

    @property
    def function_events(self) -> list:
        lost = type(self).sessions - 1
        return [
            types.SimpleNamespace(name=name, device_time=1.0, device_type="cuda")
            for name in self.launches[lost:]
        ] + [types.SimpleNamespace(name="aten::add", device_time=0.0, device_type="cpu")]


def _torch_with_lossy_profiler() -> tuple[types.SimpleNamespace, list[str]]:
    launches: list[str] = []
    _LossyProfiler.sessions = 0
    torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(
            _sleep=lambda cycles: launches.append("at::cuda::spin_kernel(long)"),
            synchronize=lambda: None,
        ),
        autograd=types.SimpleNamespace(
            DeviceType=types.SimpleNamespace(CUDA="cuda"),
            profiler=types.SimpleNamespace(
                profile=lambda **options: _LossyProfiler(launches, **options)
            ),
        ),
        zeros=lambda *a, **k: launches.append("at::native::fill_kernel"),
    )
    return torch, launches


def test_a_census_keeps_the_calls_kernels_when_the_profiler_loses_its_first_records():
    """A `return a + b` launches one kernel: after an earlier census and a trace, the census
    must still see it (without sentinels, the lost head record would be that kernel)."""
    torch, launches = _torch_with_lossy_profiler()
    census = KernelCensus(torch)
    census.run(lambda: None)  # an earlier census of the worker's
    census.sessions += 1  # a profiled trace in between, as Op.PROFILE counts it
    for _ in range(3):
        output, kernels = census.run(lambda: launches.append(ADD) or "sum")
        assert output == "sum"
        assert kernels == [(ADD, 1.0)]
        assert only_library_kernels(kernels)


def test_a_profiling_session_imports_no_compiler():
    """torch.profiler.profile's start asks `hasattr(torch, "_inductor")`, which imports
    Inductor, Dynamo, SymPy and Triton: 1.4 to 1.8 s of every fresh worker's CPU on an H100
    host. The session a worker opens (census, trace) imports none of them."""
    code = (
        "import sys, torch\n"
        "from pytest_kernelboard.worker.census import session\n"
        "with session(torch.autograd.profiler.profile, cuda=False) as profiler:\n"
        "    torch.zeros(4) + 1\n"
        "assert any('add' in e.name for e in profiler.function_events)\n"
        "print([m for m in ('torch._inductor', 'torch._dynamo', 'sympy', 'triton')"
        " if m in sys.modules])\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip().splitlines()[-1] == "[]"


def test_sentinels_are_dropped_by_count_and_copies_are_not_kernels():
    launched = [
        ("at::cuda::spin_kernel(long)", 1.0),
        ("Memcpy HtoD", 2.0),
        ("mine", 3.0),
        ("at::cuda::spin_kernel(long)", 4.0),  # the call's own: only `sentinels` go
    ]
    assert drop_sentinels(launched, 1) == [("mine", 3.0), ("at::cuda::spin_kernel(long)", 4.0)]
    assert drop_sentinels(launched, 5) == [("mine", 3.0)]


def test_the_census_input_is_one_no_check_or_timed_call_is_given():
    # A candidate caching by input hash answers a repeated input without launching anything.
    case = Case(kind="benchmark", index=0, spec={"size": 8, "seed": 7})
    given = {case.call_seed(i) for i in range(20_000)}
    assert case.call_seed(UNSEEN_CALL_INDEX) not in given
    assert case.arguments(UNSEEN_CALL_INDEX)["seed"] == case.call_seed(UNSEEN_CALL_INDEX)
