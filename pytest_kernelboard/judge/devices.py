"""Which device this machine evaluates on, named the way leaderboards name it, and its state."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
from typing import Any

# Leaderboard device names, matched against the driver's product name.
KNOWN_GPUS = ("B200", "H200", "H100", "H20", "A100", "A10G", "L40S", "L4", "T4", "V100", "MI300")
CPU = "CPU"


def leaderboard_device_name(product_name: str | None) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100'; None (no GPU) -> 'CPU'."""
    if not product_name:
        return CPU
    for name in KNOWN_GPUS:
        if re.search(rf"(?<![A-Z0-9]){re.escape(name)}(?![0-9])", product_name.upper()):
            return name
    # An unknown card keeps its own product name, without the vendor prefix.
    return re.sub(r"^(NVIDIA|Tesla|AMD)\s+", "", product_name.strip())


_COUNTED = re.compile(r"^(?P<name>.+?)x(?P<count>[1-9][0-9]*)$")


def device_label(gpus: int = 1, name: str | None = None) -> str:
    """The device a run is ranked on: 'H200' on one GPU, 'H200x2' for a run over two GPUs.

    GPU MODE names its multi-GPU devices the same way ('MI300x8'), so a multi-GPU
    leaderboard lists e.g. `gpus: [H200x2]`. CPU runs stay 'CPU' whatever their rank count.
    """
    name = name or device_name()
    return name if gpus <= 1 or name == CPU else f"{name}x{gpus}"


def split_device_label(label: str) -> tuple[str, int]:
    """'H200x2' -> ('H200', 2); 'H100' -> ('H100', 1)."""
    match = _COUNTED.match(label)
    if match is None:
        return label, 1
    return match["name"], int(match["count"])


def host_device_labels(name: str, gpus: int) -> list[str]:
    """Every device a host with `gpus` GPUs of kind `name` can evaluate: 'H200', 'H200x2', ...,
    'H200x<gpus>'. A runner announces all of them, so a job asking for H200x2 may land on an
    8-GPU host but never on a 1-GPU one."""
    return [device_label(count, name) for count in range(1, max(gpus, 1) + 1)]


@functools.cache
def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@functools.cache
def device_name() -> str:
    if not has_cuda():
        return CPU
    import torch

    return leaderboard_device_name(torch.cuda.get_device_name(0))


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _host_cpu() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def _nvml():
    """The initialised pynvml module, or None where NVML is absent."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _nvml_handle(index: int = 0):
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        return nvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


@functools.cache
def nvml_index(cuda_index: int) -> int:
    """NVML's number for this process's cuda:<i>. NVML numbers the host's GPUs and ignores
    CUDA_VISIBLE_DEVICES, which under `pytest -n` or `kernelboard judge --gpus` starts with the
    judge's own GPU; the UUID names the same GPU in both. Falls back to the CUDA index where
    either cannot say."""
    try:
        import torch

        nvml = _nvml()
        uuid = str(torch.cuda.get_device_properties(cuda_index).uuid)
        if not uuid.startswith(("GPU-", "MIG-")):
            uuid = f"GPU-{uuid}"
        return int(nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByUUID(uuid)))
    except Exception:
        return cuda_index


def nvml_device(cuda_index: int = 0) -> tuple[Any, Any] | None:
    """(the initialised pynvml module, the handle of this process's cuda:<i>), or None where
    NVML cannot name it."""
    handle = _nvml_handle(nvml_index(cuda_index))
    return None if handle is None else (_nvml(), handle)


def gpu_state(cuda_index: int = 0) -> dict[str, Any] | None:
    """Clocks, temperature, power and throttle reasons now of this process's cuda:<i> (None
    without NVML)."""
    index = nvml_index(cuda_index)
    nvml, handle = _nvml(), _nvml_handle(index)
    if handle is None:
        return None
    state: dict[str, Any] = {}
    max_sm, max_mem = _max_clocks(index)  # fixed for the device: read once, not per snapshot
    readers = {
        "sm_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
        "mem_mhz": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM),
        "max_sm_mhz": lambda: max_sm,
        "max_mem_mhz": lambda: max_mem,
        "temperature_c": lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU),
        "power_w": lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "throttle_reasons": lambda: _throttle_names(
            nvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
        ),
    }
    for key, read in readers.items():
        try:
            state[key] = read()
        except Exception:
            state[key] = None
    return state


@functools.cache
def _max_clocks(index: int) -> tuple[int | None, int | None]:
    """The GPU's maximum SM and memory clocks (NVML's device `index`): fixed for the device,
    read once. Each query took 1.4 ms on an H200, twice in each of a timed case's two
    snapshots, forty times a case timed in turns."""
    nvml, handle = _nvml(), _nvml_handle(index)
    clocks = []
    for clock in ("NVML_CLOCK_SM", "NVML_CLOCK_MEM"):
        try:
            clocks.append(nvml.nvmlDeviceGetMaxClockInfo(handle, getattr(nvml, clock)))
        except Exception:
            clocks.append(None)
    return clocks[0], clocks[1]


def _throttle_names(mask: int) -> list[str]:
    return sorted({name for name, bit in _throttle_bits() if mask & bit == bit})


@functools.cache
def _throttle_bits() -> tuple[tuple[str, int], ...]:
    """NVML's clock event reasons by name and bit, found once: scanning the module's names
    took 0.6 ms of each snapshot (benchmarks/probes/nvml_cost.py)."""
    nvml = _nvml()
    bits = []
    for attr in dir(nvml):
        if attr.startswith("nvmlClocksEventReason") and attr not in (
            "nvmlClocksEventReasonAll",
            "nvmlClocksEventReasonNone",
        ):
            bit = getattr(nvml, attr)
            if isinstance(bit, int) and bit:
                bits.append((attr.removeprefix("nvmlClocksEventReason"), bit))
    return tuple(bits)


@functools.cache
def peak_bandwidth_bytes_per_s(cuda_index: int = 0) -> float | None:
    """Theoretical DRAM bandwidth of this process's cuda:<i>, from NVML's bus width and max
    memory clock (double data rate, _max_clocks). Read once: the two NVML queries took about
    1.5 ms on an H200, and every turn of a case timed in turns asks."""
    index = nvml_index(cuda_index)
    nvml, handle = _nvml(), _nvml_handle(index)
    if handle is None:
        return None
    try:
        bus_bits = nvml.nvmlDeviceGetMemoryBusWidth(handle)
    except Exception:
        return None
    mem_mhz = _max_clocks(index)[1]
    return None if mem_mhz is None else 2.0 * mem_mhz * 1e6 * bus_bits / 8.0


def environment() -> dict[str, Any]:
    """What a result needs to be reproduced: device, driver, versions, host, and the numerics
    settings (TF32 flags, cuDNN/cuBLAS/CUDA versions) as the process has them now."""
    from .numerics import numerics_environment

    return {**_machine_environment(), "numerics": numerics_environment()}


@functools.cache
def _machine_environment() -> dict[str, Any]:
    env: dict[str, Any] = {
        "device": device_name(),
        "device_kind": "cuda" if has_cuda() else "cpu",
        "gpu_name": None,
        "gpu_count": 0,
        "driver": None,
        "cuda": None,
        "torch": _version("torch"),
        "triton": _version("triton"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host_cpu": _host_cpu(),
        "l2_bytes": None,
        "peak_bandwidth_gbps": None,
        "clocks": None,
    }
    if has_cuda():
        import torch

        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu_name=props.name,
            gpu_count=torch.cuda.device_count(),
            cuda=torch.version.cuda,
            l2_bytes=int(getattr(props, "L2_cache_size", 0)) or None,
            sm_count=props.multi_processor_count,
        )
        nvml = _nvml()
        if nvml is not None:
            try:
                env["driver"] = nvml.nvmlSystemGetDriverVersion()
            except Exception:
                pass
        bandwidth = peak_bandwidth_bytes_per_s()
        env["peak_bandwidth_gbps"] = bandwidth / 1e9 if bandwidth else None
        env["clocks"] = gpu_state()
    env["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return env
