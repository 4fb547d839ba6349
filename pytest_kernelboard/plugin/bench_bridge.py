"""Make pytest-benchmark report kernelboard's device-measured per-call times.

pytest-benchmark times a callable with a host timer. Kernelboard measures each call on the
device (CUDA events in a worker process), so the numbers already exist when the test item runs.
This module replays them through pytest-benchmark's public API, so its JSON, storage,
--benchmark-compare and --benchmark-compare-fail all see the device samples:

* `replay_timer` is a timer in pytest-benchmark's sense (a zero-argument callable returning
  seconds). Outside a replay it is the wall clock. During a replay it returns 0.0 before each
  round and that round's recorded sample after it, so every round measures exactly one sample.
* `mark()` is `pytest.mark.benchmark(timer=replay_timer)`: the benchmark marker's documented
  `timer` option, which the `benchmark` fixture honours over --benchmark-timer, so only our
  items are affected and ordinary benchmarks keep their own timer.
* `report_samples(benchmark, samples_us)` runs `benchmark.pedantic(..., rounds=len(samples),
  iterations=1, warmup_rounds=0)` with a target that hands the next sample to the timer.
* `install(config, environment)` registers the pytest-benchmark hooks that put the GPU
  environment into machine_info.

What the kernelboard plugin does:

    from pytest_kernelboard.judge import devices
    from pytest_kernelboard.plugin import bench_bridge

    def pytest_configure(config):
        bench_bridge.install(config, devices.environment)

    # each benchmark item requests the `benchmark` fixture and carries bench_bridge.mark()
    # (item.add_marker(bench_bridge.mark()) at creation or in pytest_collection_modifyitems);
    # after measuring and verifying a case, its test function calls:
    bench_bridge.report_samples(benchmark, samples_us, extra_info={...})

Limits inherited from pytest-benchmark: items requesting `benchmark` are skipped under
--benchmark-skip and not timed under --benchmark-disable or xdist (report_samples then records
nothing); a benchmark fixture can be used once per item. `--dist` given without `-n` (no xdist
workers) is not xdist: `settle_idle_xdist` says so before pytest-benchmark looks.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from ..errors import KernelboardError
from ..stats.stats import check_samples

__all__ = [
    "BridgeError",
    "install",
    "machine_info_fields",
    "mark",
    "replay_timer",
    "report_samples",
    "settle_idle_xdist",
]

PLUGIN_NAME = "kernelboard-bench-bridge"


class BridgeError(KernelboardError, RuntimeError):
    """The samples could not be replayed through the benchmark fixture as recorded."""


class _Replay:
    """State shared by replay_timer and the replay target (one replay at a time: pytest runs
    test items sequentially in a process)."""

    def __init__(self) -> None:
        self.active = False
        self.pending: list[float] = []  # samples in seconds, in reverse order (pop from the end)
        self.now = 0.0  # what the next timer read returns while active
        self.reads = 0
        self.rounds = 0

    def begin(self, samples_s: Sequence[float]) -> None:
        self.active = True
        self.pending = list(reversed(samples_s))
        self.now, self.reads, self.rounds = 0.0, 0, 0

    def step(self) -> None:
        # The replay target: the round "takes" the next sample. After the recorded samples
        # (e.g. pytest-benchmark's extra --benchmark-cprofile call) a round takes no time.
        self.now = self.pending.pop() if self.pending else 0.0
        self.rounds += 1

    def read(self) -> float:
        # Each round reads start (0.0) then end (the sample): end - start is the sample exactly,
        # with no float error from subtracting two large clock values.
        self.reads += 1
        value, self.now = self.now, 0.0
        return value

    def end(self) -> None:
        self.active = False
        self.pending = []


_REPLAY = _Replay()


def _nothing() -> None:
    pass


def replay_timer() -> float:
    """pytest-benchmark timer: wall clock normally, the recorded samples during a replay."""
    if _REPLAY.active:
        return _REPLAY.read()
    return time.perf_counter()


def mark(group: str | None = None) -> pytest.MarkDecorator:
    """The benchmark marker a kernelboard item must carry so its fixture uses replay_timer.

    group: pytest-benchmark's table/grouping label (e.g. the leaderboard name).
    """
    kwargs: dict[str, Any] = {"timer": replay_timer}
    if group is not None:
        kwargs["group"] = group
    return pytest.mark.benchmark(**kwargs)


def report_samples(
    benchmark: Any,
    samples_us: Sequence[float],
    extra_info: Mapping[str, Any] | None = None,
) -> None:
    """Record per-call device samples (microseconds) as the benchmark's rounds.

    pytest-benchmark stores seconds: each round's duration is sample_us * 1e-6. extra_info is
    merged into benchmark.extra_info (JSON-serialisable values only); "clock" defaults to
    "cuda_event". Does nothing but record extra_info when the fixture is disabled
    (--benchmark-disable). Raises BridgeError when the fixture did not time the rounds with
    replay_timer (the item lacks mark()) and ValueError on empty or invalid samples.
    """
    values = check_samples(samples_us)
    benchmark.extra_info.setdefault("clock", "cuda_event")
    if extra_info:
        benchmark.extra_info.update(extra_info)
    if _REPLAY.active:
        raise BridgeError("a replay is already in progress")
    if getattr(benchmark, "disabled", False):
        # A disabled fixture only calls the target once; using it keeps pytest-benchmark from
        # warning that the fixture was never used.
        benchmark.pedantic(_nothing)
        return
    _REPLAY.begin([x * 1e-6 for x in values])
    try:
        benchmark.pedantic(_REPLAY.step, rounds=len(values), iterations=1, warmup_rounds=0)
        rounds, reads = _REPLAY.rounds, _REPLAY.reads
    finally:
        _REPLAY.end()
    # Our own bookkeeping proves the fixture timed every round with replay_timer: two reads per
    # round. Anything else (the item lacks mark(), or a future pytest-benchmark times rounds
    # differently) would silently store host times, so refuse instead.
    if reads < 2 * len(values) or rounds < len(values):
        raise BridgeError(
            f"pytest-benchmark read the replay timer {reads} times for {len(values)} rounds; "
            "give the item bench_bridge.mark() so its benchmark fixture uses replay_timer"
        )


def machine_info_fields(environment: Mapping[str, Any]) -> dict[str, Any]:
    """The machine_info entries for an environment dict (devices.environment()'s keys).

    "gpu" holds what identifies the hardware and software stack; "gpu_clocks" the clocks,
    temperature and power at start, which change between runs (pytest-benchmark then warns that
    machine_info differs when comparing; the comparison itself still runs).
    """
    stable = (
        "device",
        "device_kind",
        "gpu_name",
        "gpu_count",
        "sm_count",
        "driver",
        "cuda",
        "torch",
        "triton",
        "l2_bytes",
        "peak_bandwidth_gbps",
        "visible_devices",
    )
    info: dict[str, Any] = {
        "gpu": {key: environment.get(key) for key in stable if key in environment}
    }
    if environment.get("clocks") is not None:
        info["gpu_clocks"] = environment["clocks"]
    return info


class _Hooks:
    """pytest-benchmark hook implementations, registered by install()."""

    def __init__(self, environment: Callable[[], Mapping[str, Any]]) -> None:
        self._environment = environment

    @pytest.hookimpl(optionalhook=True)
    def pytest_benchmark_update_machine_info(
        self, config: pytest.Config, machine_info: dict
    ) -> None:
        machine_info.update(machine_info_fields(self._environment()))


def settle_idle_xdist(config: pytest.Config) -> bool:
    """`--dist MODE` without `-n`/`--tx` (say in a project's addopts) distributes nothing:
    xdist runs the session serially. pytest-benchmark reads `--dist` alone, though, so it would
    disable every benchmark and warn that "xdist plugin is active". Record what xdist itself
    decided (`--dist no`), so the device samples are reported and nobody is warned about a
    plugin that is not in use. Call before pytest-benchmark's pytest_configure; returns whether
    it changed anything. A real `-n N` run (workers, or the controller with its --tx) is left
    as it is: there pytest-benchmark is right to stand aside."""
    if hasattr(config, "workerinput") or os.environ.get("PYTEST_XDIST_WORKER"):
        return False
    if config.getoption("dist", "no") in ("no", None) or config.getoption("tx", None):
        return False
    config.option.dist = "no"
    return True


def install(config: pytest.Config, environment: Callable[[], Mapping[str, Any]]) -> bool:
    """Register the machine_info hook; call from the plugin's pytest_configure.

    environment: returns the environment dict (devices.environment); called when
    pytest-benchmark builds machine_info (at configure time when comparing, at session end when
    saving). Returns False, registering nothing, when pytest-benchmark is not active
    (-p no:benchmark). Idempotent.
    """
    if not config.pluginmanager.hasplugin("benchmark"):
        return False
    if config.pluginmanager.get_plugin(PLUGIN_NAME) is None:
        config.pluginmanager.register(_Hooks(environment), PLUGIN_NAME)
    return True
