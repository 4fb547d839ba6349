"""The judge's NVML snapshot of its GPU (judge/devices.py, gpu_state): the clocks that change
are read each time; the maximum clocks, fixed for a device, and the throttle reasons' bits,
fixed for the NVML module, once."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pytest_kernelboard.judge import devices


@pytest.fixture
def nvml(monkeypatch):
    queries: list[str] = []
    sm_now = iter([1980, 1755])

    fake = SimpleNamespace(
        NVML_CLOCK_SM=0,
        NVML_CLOCK_MEM=1,
        NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetClockInfo=lambda h, c: (
            queries.append("clock") or (next(sm_now) if c == 0 else 3201)
        ),
        nvmlDeviceGetMaxClockInfo=lambda h, c: queries.append("max") or (1980 if c == 0 else 3201),
        nvmlDeviceGetTemperature=lambda h, t: 40,
        nvmlDeviceGetMemoryBusWidth=lambda h: queries.append("bus") or 6144,
        nvmlDeviceGetPowerUsage=lambda h: 120_000,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: queries.append("reasons") or 4 | 8,
        nvmlClocksEventReasonSwPowerCap=4,
        nvmlClocksEventReasonHwSlowdown=8,
        nvmlClocksEventReasonGpuIdle=1,
        nvmlClocksEventReasonAll=0xFF,
        nvmlClocksEventReasonNone=0,
    )
    monkeypatch.setattr(devices, "_nvml", lambda: fake)
    monkeypatch.setattr(devices, "_nvml_handle", lambda index=0: "handle")
    monkeypatch.setattr(devices, "nvml_index", lambda cuda_index: 0)
    for cached in (devices._max_clocks, devices._throttle_bits, devices.peak_bandwidth_bytes_per_s):
        cached.cache_clear()
    yield queries
    for cached in (devices._max_clocks, devices._throttle_bits, devices.peak_bandwidth_bytes_per_s):
        cached.cache_clear()


def test_the_maximum_clocks_are_read_once_the_current_ones_each_time(nvml):
    first, second = devices.gpu_state(), devices.gpu_state()
    assert (first["sm_mhz"], second["sm_mhz"]) == (1980, 1755)
    assert first["max_sm_mhz"] == second["max_sm_mhz"] == 1980
    assert first["max_mem_mhz"] == 3201 and first["power_w"] == 120.0
    assert nvml.count("max") == 2  # SM and memory, once for both snapshots
    assert nvml.count("clock") == 4


def test_throttle_reasons_are_named_by_their_bits_found_once(nvml):
    # The reasons' bits come from scanning pynvml's 2,486 names: 0.7 ms, once, not per snapshot.
    first, second = devices.gpu_state(), devices.gpu_state()
    assert first["throttle_reasons"] == second["throttle_reasons"] == ["HwSlowdown", "SwPowerCap"]
    assert nvml.count("reasons") == 2  # the mask itself read each time
    assert devices._throttle_bits.cache_info().misses == 1


def test_peak_bandwidth_is_read_once_from_the_snapshots_maximum_memory_clock(nvml):
    """Every turn of a case timed in turns asks for it: bus width and the maximum memory clock
    are read once, the clock shared with gpu_state's snapshots."""
    devices.gpu_state()
    bandwidth = [devices.peak_bandwidth_bytes_per_s() for _ in range(3)]
    assert bandwidth == [2.0 * 3201e6 * 6144 / 8.0] * 3  # double data rate, bits to bytes
    assert nvml.count("bus") == 1 and nvml.count("max") == 2
