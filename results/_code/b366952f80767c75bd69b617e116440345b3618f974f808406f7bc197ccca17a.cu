// Correct vectoradd in CUDA C++: one thread per element, C = A + B in float16.
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_fp16.h>

__global__ void add_kernel(const __half* a, const __half* b, __half* c, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __hadd(a[i], b[i]);
}

torch::Tensor custom_kernel(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    TORCH_CHECK(a.is_cuda() && a.is_contiguous() && a.scalar_type() == torch::kHalf);
    int64_t n = a.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 0) {
        add_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
            reinterpret_cast<const __half*>(a.data_ptr<at::Half>()),
            reinterpret_cast<const __half*>(b.data_ptr<at::Half>()),
            reinterpret_cast<__half*>(c.data_ptr<at::Half>()), n);
    }
    return c;
}
