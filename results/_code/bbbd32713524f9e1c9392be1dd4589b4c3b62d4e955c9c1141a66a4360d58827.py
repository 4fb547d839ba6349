"""Correct vectoradd written in JAX: tensors cross from torch to JAX and back through DLPack.

JAX reads A and B in place (no copy), its jitted add runs on the tensors' device, and the
result is written into the pre-allocated C. On a GPU this needs JAX's CUDA plugin
(`pip install 'jax[cuda12]'` or `'jax[cuda13]'`); on a CPU, plain `jax`.
"""

import jax
import jax.numpy as jnp
import torch
from task import input_t, output_t

add = jax.jit(jnp.add)


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    if a.is_cuda and jax.default_backend() != "gpu":
        # JAX's CUDA backend is a separate package; without it JAX cannot read CUDA tensors.
        raise ModuleNotFoundError(
            "No module named 'jax_cuda_plugin': this JAX runs on "
            f"{jax.default_backend()!r} only (pip install 'jax[cuda12]' or 'jax[cuda13]')"
        )
    result = add(jax.dlpack.from_dlpack(a), jax.dlpack.from_dlpack(b))
    c.copy_(torch.from_dlpack(result))
    return c
