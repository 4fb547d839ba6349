import dataclasses
import types

import pytest

from pytest_kernelboard.stats.floors import (
    aliased_bytes,
    bandwidth_floor_us,
    clock_drop_flag,
    device_bytes,
    io_bytes,
    plausibility_flags,
    tensor_bytes,
)

torch = pytest.importorskip("torch")


@dataclasses.dataclass
class Batch:
    x: object
    meta: dict


def test_tensor_bytes_walks_nested_containers():
    a = torch.zeros(100, dtype=torch.float32)  # 400 B
    b = torch.zeros(10, 10, dtype=torch.float16)  # 200 B
    c = torch.zeros(8, dtype=torch.int64)  # 64 B
    assert tensor_bytes(a) == 400
    nested = (a, [b, {"c": c, "n": 3, "s": "text"}])
    assert tensor_bytes(nested) == 664
    assert tensor_bytes(Batch(x=a, meta={"b": b})) == 600
    assert tensor_bytes(types.SimpleNamespace(first=c, more=(None, 1.5))) == 64
    assert tensor_bytes([]) == 0 and tensor_bytes(None) == 0


def test_tensor_bytes_counts_shared_storage_once():
    a = torch.zeros(100)
    assert tensor_bytes((a, a)) == 400
    assert tensor_bytes((a, a[:10], a.view(10, 10))) == 400
    assert tensor_bytes((a[:50], a[25:75])) == 300  # overlapping views: bytes 0..300
    assert tensor_bytes((a[:10], a[90:])) == 80  # disjoint views of one storage
    assert tensor_bytes(a.view(10, 10).t()) == 400  # permuted view is still dense


def test_device_bytes_counts_only_the_tensors_on_that_kind_of_device():
    a = torch.zeros(100)
    data = (a, [a[:10], {"b": torch.zeros(8, dtype=torch.int64)}])
    assert device_bytes(data, "cpu") == tensor_bytes(data) == 464
    assert device_bytes(data) == 0  # 'cuda' by default: what judge/memory.py weighs


def test_tensor_bytes_broadcast_and_strided_views():
    row = torch.zeros(1, 16)
    assert tensor_bytes(row.expand(1000, 16)) == 64  # stride 0: the memory is one row
    a = torch.zeros(100)
    assert tensor_bytes(a[::2]) == 200  # 50 elements read, the gaps are not


def test_tensor_bytes_survives_cycles():
    box: list = [torch.zeros(4)]
    box.append(box)
    assert tensor_bytes(box) == 16


def test_io_bytes_preallocated_output_is_not_also_an_input():
    a, b, out = torch.zeros(256), torch.zeros(256), torch.zeros(256)  # 1 KiB each
    data = (a, b, out)  # GPU MODE style: the output buffer travels inside the input
    assert io_bytes(data, out) == (2048, 1024)
    assert io_bytes((a, b), out) == (2048, 1024)
    # Output a view of the input: only the rest of the input counts as read.
    assert io_bytes(a, a[:64]) == (768, 256)


def test_io_bytes_of_copies_uses_the_reported_aliasing():
    # The judge sees copies: its output no longer shares memory with its input, so the
    # worker reports how much of the output was inside the input it called with.
    a, b, out = torch.zeros(256), torch.zeros(256), torch.zeros(256)
    worker_data = (a, b, out)
    reported = aliased_bytes(worker_data, out)
    assert reported == 1024
    judge_data, judge_out = (a.clone(), b.clone(), out.clone()), out.clone()
    assert io_bytes(judge_data, judge_out) == (3072, 1024)  # wrongly charges a read of out
    assert io_bytes(judge_data, judge_out, reported) == (2048, 1024)
    # A lie cannot take off more than the output's own bytes.
    assert io_bytes(judge_data, judge_out, 10**9) == (2048, 1024)
    assert aliased_bytes((a, b), torch.zeros(256)) == 0
    assert aliased_bytes(a, a[:64]) == 256


def test_bandwidth_floor():
    # 2 GB read + 1 GB written at 3 TB/s = 1 ms
    assert bandwidth_floor_us(2 * 10**9, 10**9, 3e12) == pytest.approx(1000.0)
    # Writes that fit in L2 are not charged: only 1 of the 3 MB is.
    assert bandwidth_floor_us(0, 3 * 10**6, 1e12, l2_bytes=2 * 10**6) == pytest.approx(1.0)
    assert bandwidth_floor_us(10**6, 10**6, 1e12, l2_bytes=10**9) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        bandwidth_floor_us(1, 1, 0.0)


def test_floor_rejection():
    flags = plausibility_flags([4.0, 4.2, 4.1], None, floor_us=10.0)
    assert len(flags) == 1
    assert flags[0].startswith("faster than the memory bandwidth allows (4.1 us < floor 10 us)")


def test_floor_slack_tolerates_near_peak():
    assert plausibility_flags([9.5, 9.6, 9.4], None, floor_us=10.0) == []  # within 90% of floor
    assert plausibility_flags([9.5, 9.6, 9.4], None, floor_us=10.0, slack=1.0) != []
    assert plausibility_flags([1.0], None, floor_us=None) == []


def test_wall_time_rejection():
    device = [10.0, 10.0, 50.0, 10.0]
    wall = [20.0, 20.0, 20.0, 20.0]
    flags = plausibility_flags(device, wall, floor_us=None)
    assert len(flags) == 1
    assert flags[0].startswith("device time exceeds the wall time that contains it")
    assert "1 of 4 calls" in flags[0] and "50 us > wall 20 us" in flags[0]


def test_wall_time_tolerance():
    # Event and host clocks differ by a microsecond or so; that is not a violation.
    assert plausibility_flags([21.0, 10.0], [20.0, 20.0], floor_us=None) == []
    assert plausibility_flags([23.0], [20.0], floor_us=None, wall_tolerance_us=0.5) != []
    with pytest.raises(ValueError):
        plausibility_flags([1.0, 2.0], [3.0], floor_us=None)


def test_nonpositive_samples_are_flagged():
    assert plausibility_flags([0.0, 5.0], None, None) == [
        "non-positive device time in 1 of 2 calls"
    ]


STATE = {"sm_mhz": 1980, "mem_mhz": 2619, "temperature_c": 45, "throttle_reasons": []}


def test_clock_drop_flag():
    assert clock_drop_flag(STATE, dict(STATE, sm_mhz=1900)) is None  # -4%
    msg = clock_drop_flag(STATE, dict(STATE, sm_mhz=1500))
    assert msg == "SM clock fell from 1980 MHz to 1500 MHz"


def test_clock_drop_flag_throttle_reasons():
    after = dict(STATE, throttle_reasons=["SwThermalSlowdown", "GpuIdle"])
    assert clock_drop_flag(STATE, after) == "throttling started: SwThermalSlowdown"
    both = dict(STATE, sm_mhz=1000, throttle_reasons=["SwPowerCap", "HwSlowdown"])
    assert clock_drop_flag(STATE, both) == (
        "SM clock fell from 1980 MHz to 1000 MHz; throttling started: HwSlowdown, SwPowerCap"
    )
    # A reason already present before is not news; idle and app-clock reasons are not throttles.
    already = dict(STATE, throttle_reasons=["SwPowerCap"])
    assert clock_drop_flag(already, already) is None
    assert (
        clock_drop_flag(STATE, dict(STATE, throttle_reasons=["ApplicationsClocksSetting"])) is None
    )


def test_clock_drop_flag_missing_data():
    assert clock_drop_flag(None, STATE) is None
    assert clock_drop_flag(STATE, {}) is None
    assert clock_drop_flag({"sm_mhz": None}, {"sm_mhz": 100}) is None
