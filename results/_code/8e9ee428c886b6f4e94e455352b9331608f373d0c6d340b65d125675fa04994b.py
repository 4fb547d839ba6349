"""Correct vectoradd in CUDA C++ through torch.utils.cpp_extension.load_inline."""

from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_fp16.h>

__global__ void vectoradd_kernel(const __half* a, const __half* b, __half* c, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __hadd(a[i], b[i]);
}

torch::Tensor vectoradd(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    TORCH_CHECK(a.is_cuda() && a.is_contiguous() && b.is_contiguous() && c.is_contiguous());
    int64_t n = a.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 0) {
        vectoradd_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            reinterpret_cast<const __half*>(a.data_ptr<at::Half>()),
            reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
            reinterpret_cast<__half*>(c.data_ptr<at::Half>()), n);
    }
    return c;
}
"""

CPP_SOURCE = "torch::Tensor vectoradd(torch::Tensor a, torch::Tensor b, torch::Tensor c);"

_module = load_inline(
    name="kb_vectoradd_inline_v1",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["vectoradd"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    return _module.vectoradd(a, b, c)
