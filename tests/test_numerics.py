"""The results' environment records the numerics a verdict depended on, as the process has them."""

from __future__ import annotations

import torch

from pytest_kernelboard.judge import devices


def test_environment_records_the_tf32_flags_as_set_not_overridden():
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (matmul.allow_tf32, cudnn.allow_tf32, torch.are_deterministic_algorithms_enabled())
    try:
        for flag in (True, False):
            matmul.allow_tf32 = flag
            cudnn.allow_tf32 = not flag
            torch.use_deterministic_algorithms(flag, warn_only=True)
            numerics = devices.environment()["numerics"]
            assert numerics["matmul_allow_tf32"] is flag
            assert numerics["cudnn_allow_tf32"] is (not flag)
            assert numerics["deterministic_algorithms"] is flag
            # recording reads the flags; it never changes them
            assert (matmul.allow_tf32, cudnn.allow_tf32) == (flag, not flag)
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = saved[0], saved[1]
        torch.use_deterministic_algorithms(saved[2])
    assert numerics["cudnn_version"] == torch.backends.cudnn.version()
    assert numerics["cuda_runtime"] == torch.version.cuda
    assert set(numerics) >= {"float32_matmul_precision", "cublas", "cudnn_deterministic"}
