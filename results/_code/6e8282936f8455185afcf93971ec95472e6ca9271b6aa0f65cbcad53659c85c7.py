"""Correct grayscale in CUDA C++ through torch.utils.cpp_extension.load_inline."""

from task import input_t, output_t
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void grayscale_kernel(const float* rgb, float* out, int64_t n_pixels) {
    int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (p < n_pixels) {
        const float* px = rgb + 3 * p;
        out[p] = 0.2989f * px[0] + 0.5870f * px[1] + 0.1140f * px[2];
    }
}

torch::Tensor grayscale(torch::Tensor rgb) {
    TORCH_CHECK(rgb.is_cuda() && rgb.is_contiguous() && rgb.size(2) == 3);
    auto out = torch::empty({rgb.size(0), rgb.size(1)}, rgb.options());
    int64_t n = rgb.size(0) * rgb.size(1);
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 0) {
        grayscale_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
            rgb.data_ptr<float>(), out.data_ptr<float>(), n);
    }
    return out;
}
"""

CPP_SOURCE = "torch::Tensor grayscale(torch::Tensor rgb);"

_module = load_inline(
    name="kb_grayscale_inline_v1",
    cpp_sources=CPP_SOURCE,
    cuda_sources=CUDA_SOURCE,
    functions=["grayscale"],
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


def custom_kernel(data: input_t) -> output_t:
    return _module.grayscale(data)
