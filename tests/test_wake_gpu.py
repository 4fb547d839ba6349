"""On a real GPU: a timed call after an idle gap wakes the GPU before its flush, untimed.

An idle GPU runs a memory-bound kernel slower for a while (docs/timing.md, "Measurement"), so
the worker spins the GPU for WAKE_US before a timed call that follows a gap and waits for the
spin to end before the flush: neither the call's device interval nor its host window may
contain it. Calls back to back (calibrate's) need no wake and get none.
"""

from __future__ import annotations

import pytest

from pytest_kernelboard.judge import devices

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device: it times a call"),
]


def test_a_timed_call_after_a_gap_wakes_the_gpu_first_and_outside_its_interval():
    import time

    import torch

    from pytest_kernelboard.worker.main import Worker
    from pytest_kernelboard.worker.timing import WAKE_AFTER_IDLE_S, WAKE_US

    worker = Worker(conn=None)
    rate = worker.timer.spin_cycles_per_us()  # its own spins happen once, before the record starts
    order: list[tuple[str, int]] = []
    sleep, flush = worker.timer._sleep, worker.timer._sum

    def recorded_sleep(cycles: int) -> None:
        order.append(("spin", cycles))
        sleep(cycles)

    def recorded_flush(*args, **kwargs):
        order.append(("flush", 0))
        return flush(*args, **kwargs)

    def kernel(data):
        order.append(("call", 0))
        return data + 1

    worker.timer._sleep, worker.timer._sum = recorded_sleep, recorded_flush
    worker.kernel = kernel
    data = torch.ones(1024, device="cuda")
    worker.time_call(data, 64 << 20)  # the blocking kernel's module loads on its first launch
    for _ in range(3):
        time.sleep(10 * WAKE_AFTER_IDLE_S)
        order.clear()
        reply = worker.time_call(data, 64 << 20)
        after_gap = [what for what, _ in order]
        spin_cycles = order[0][1]
        order.clear()
        worker.time_call(data, 64 << 20)  # at once: the GPU has not idled
        back_to_back = [what for what, _ in order]
        assert after_gap == ["spin", "flush", "call"]
        assert spin_cycles >= int(WAKE_US * rate)
        assert back_to_back == ["flush", "call"]
        assert reply["blocked"], reply["blocking_off"]
        # The 2 ms spin is in neither window: the call is one tiny kernel.
        assert reply["device_us"] < WAKE_US / 4, reply
        assert reply["wall_us"] < WAKE_US / 2, reply
        torch.testing.assert_close(reply["output"], data + 1)


def test_a_call_timed_in_turns_is_not_woken_nor_is_its_warm_call():
    """A case timed in turns asks for no wake (its calls are host-bound, and each turn follows
    the other worker's calls): after the same gap, neither the warm call nor the timed call
    spins the GPU first."""
    import time

    import torch

    from pytest_kernelboard.worker.main import Worker
    from pytest_kernelboard.worker.timing import WAKE_AFTER_IDLE_S

    worker = Worker(conn=None)
    worker.timer.spin_cycles_per_us()
    order: list[str] = []
    sleep = worker.timer._sleep

    def recorded_sleep(cycles: int) -> None:
        order.append("spin")
        sleep(cycles)

    def kernel(data):
        order.append("call")
        return data + 1

    worker.timer._sleep = recorded_sleep
    worker.kernel = kernel
    data = torch.ones(1024, device="cuda")
    worker.time_call(data, 64 << 20, case="c", keep=True, wake=False)  # keeps the warm input
    for _ in range(3):
        time.sleep(10 * WAKE_AFTER_IDLE_S)
        order.clear()
        assert worker.warm("c", wake=False)["warmed"]
        time.sleep(10 * WAKE_AFTER_IDLE_S)
        reply = worker.time_call(data, 64 << 20, case="c", keep=True, wake=False)
        assert order == ["call", "call"], order
        torch.testing.assert_close(reply["output"], data + 1)
    time.sleep(10 * WAKE_AFTER_IDLE_S)
    order.clear()
    worker.warm("c")  # a case timed alone: its warm call wakes the GPU first
    assert order == ["spin", "call"], order
