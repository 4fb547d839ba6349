"""Correct prefixsum with cuda.compute (NVIDIA's CCCL, `pip install -e ".[cuda-compute]"`): CUB's
device-wide inclusive scan, called from Python on torch's memory and torch's current stream.

cuda.compute takes any array with __cuda_array_interface__ (a torch CUDA tensor has one) and
any stream with __cuda_stream__ (torch.cuda.Stream has one). The scan is JIT-compiled for this
GPU (NVRTC and nvJitLink, in this process) when the module is imported, so the build runs under
the build budget and no case pays for it. Its temporary storage comes from torch's allocator.
"""

import cuda.compute
import torch
from task import input_t, output_t


def _build_scan():
    """The scan object for float32 arrays; the arrays it runs on are passed at each call."""
    probe = torch.empty(1, dtype=torch.float32, device="cuda")  # first: no GPU, no build
    return cuda.compute.make_inclusive_scan(d_in=probe, d_out=probe, op=cuda.compute.OpKind.PLUS)


_scan = _build_scan()


def custom_kernel(data: input_t) -> output_t:
    out = torch.empty_like(data)
    n = data.numel()
    stream = torch.cuda.current_stream(data.device)

    def scan(temp: torch.Tensor | None) -> int:
        return _scan(
            temp_storage=temp,
            d_in=data,
            d_out=out,
            op=cuda.compute.OpKind.PLUS,
            init_value=None,
            num_items=n,
            stream=stream,
        )

    temp_bytes = scan(None)  # the first call only sizes the temporary storage
    scan(torch.empty(max(temp_bytes, 1), dtype=torch.uint8, device=data.device))
    return out
