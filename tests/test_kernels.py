"""Whose kernels a call launched: a candidate's own, or only library ones."""

from __future__ import annotations

import pytest

from pytest_kernelboard.judge.kernels import (
    census_exceeds_timing,
    is_library_kernel,
    only_library_kernels,
    own_kernel_names,
    top_kernels,
)

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
]
OWN = [
    "add_kernel",  # a Triton kernel of the candidate's: its function's name
    "_Z10vec_add_f32PKfS0_Pfi",  # a load_inline kernel, mangled
    "fused_gemm_leaky_relu(float const*, float*, int)",
    "softmax_online_kernel",
    "void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<MyFusedGemm>>(...)",
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
