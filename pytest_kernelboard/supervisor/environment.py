"""What the worker process inherits: an allow-list, never the parent's secrets."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import pytest_kernelboard

# Names a kernel build or run legitimately needs.
_ALLOWED = re.compile(
    r"^(PATH|LANG|LANGUAGE|LC_[A-Z]+|TERM|TZ|USER|LOGNAME|SHELL"
    r"|CUDA_[A-Z_]+|NVIDIA_[A-Z_]+|LD_LIBRARY_PATH|CPATH|LIBRARY_PATH|CC|CXX|NVCC_[A-Z_]+"
    r"|TORCH_CUDA_ARCH_LIST|MAX_JOBS|NCCL_[A-Z_]+|NVSHMEM_[A-Z_]+|TORCH_SYMM_MEM_[A-Z_]+"
    r"|OMP_NUM_THREADS|MKL_NUM_THREADS)$"
)
# NVLink multicast (NVLS) stays off in every process the harness starts, whatever the parent
# says: programs using it have taken shared GPU hosts out of service.
NO_MULTICAST = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# Even an allowed name is dropped when it looks like a credential.
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PRIVATE|_KEY$|^KEY", re.I)


def package_root() -> Path:
    """The folder that holds the pytest_kernelboard package (importable by the worker)."""
    return Path(pytest_kernelboard.__file__).resolve().parent.parent


def worker_environment(parent: Mapping[str, str], home: Path, cache_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in parent.items() if _ALLOWED.match(k) and not _SECRET.search(k)}
    env.update(
        HOME=str(home),
        TMPDIR=str(home),
        PYTHONPATH=str(package_root()),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONFAULTHANDLER="1",  # a segfault prints the submission's Python stack
        # Compile caches outlive one worker so a kernel compiles once per machine.
        TRITON_CACHE_DIR=str(cache_dir / "triton"),
        TORCH_EXTENSIONS_DIR=str(cache_dir / "torch_extensions"),
        CUPY_CACHE_DIR=str(cache_dir / "cupy"),
        KERNELBOARD_BUILD_DIR=str(cache_dir / "builds"),  # lang: cu builds, by source hash
    )
    env.update(NO_MULTICAST)
    return env


# The compile caches are the only writable places a sandbox shares with the host.
CACHE_VARIABLES = (
    "TRITON_CACHE_DIR",
    "TORCH_EXTENSIONS_DIR",
    "CUPY_CACHE_DIR",
    "KERNELBOARD_BUILD_DIR",
)


def cache_dirs(env: Mapping[str, str]) -> list[Path]:
    """The compile caches a worker_environment names."""
    return [Path(env[name]) for name in CACHE_VARIABLES]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernelboard"
