"""On a real GPU: a warm request runs one untimed call on a pristine copy of a kept input.

The judge times short calls with their host path warm (judge/measure.py, WARM_BELOW_US): just
before a timed call it asks the worker for a `warm` request, and only then sends the timed
call's input. The worker keeps a copy of an earlier input of the case, taken before that input's
own call ran, and each warm call gets a fresh copy of it: never the timed call's input, never a
copy the submission has written. Each new case also moves the worker to its fastest CPU.
"""

from __future__ import annotations

import os

import pytest

from pytest_kernelboard.judge import devices

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not devices.has_cuda(), reason="needs a CUDA device: it times a call"),
]


@pytest.fixture(autouse=True)
def restore_affinity():
    """The worker moves its calling thread, here pytest's: give it its CPUs back."""
    allowed = os.sched_getaffinity(0)
    yield allowed
    os.sched_setaffinity(0, allowed)


def test_warm_calls_run_on_fresh_copies_of_the_kept_pristine_input():
    import torch

    from pytest_kernelboard.worker.main import Worker

    worker = Worker(conn=None)
    seen: list[torch.Tensor] = []

    def kernel(data):
        seen.append(data)
        out = data * 2
        data.fill_(-1)  # writes its input: the kept copy must not see it
        return out

    worker.kernel = kernel
    first, second = (torch.full((256,), v, device="cuda") for v in (1.0, 2.0))
    assert worker.warm("case-a") == {"warmed": False}  # nothing kept yet: no call
    assert seen == []
    reply = worker.time_call(first.clone(), 64 << 20, case="case-a", keep=True)
    torch.testing.assert_close(reply["output"], first * 2)
    seen.clear()
    for _ in range(2):
        assert worker.warm("case-a") == {"warmed": True}
        (warm_input,) = seen
        torch.testing.assert_close(warm_input, torch.full_like(first, -1))  # it ran on it...
        seen.clear()
    # ... each time on a fresh copy of the first input as it was before its call.
    torch.testing.assert_close(worker.timer._warm_input, first)
    reply = worker.time_call(second.clone(), 64 << 20, case="case-a", keep=True)
    torch.testing.assert_close(reply["output"], second * 2)
    torch.testing.assert_close(worker.timer._warm_input, first)  # kept once per case
    assert worker.warm("case-b") == {"warmed": False}  # a new case keeps nothing of the last
    worker.time_call(second.clone(), 64 << 20, case="case-b", keep=False)
    assert worker.timer._warm_input is None


def test_each_case_times_on_the_cpu_its_probe_found_fastest(restore_affinity):
    import torch

    from pytest_kernelboard.worker.main import Worker

    allowed = restore_affinity
    worker = Worker(conn=None)
    worker.kernel = lambda data: data + 1
    reply = worker.time_call(torch.ones(16, device="cuda"), 64 << 20, case="case-a")
    if len(allowed) < 2:
        assert reply["cpu"] == -1
        return
    assert reply["cpu"] in allowed
    assert os.sched_getaffinity(0) == {reply["cpu"]}  # this thread stays there for the case


def test_a_call_that_synchronises_inside_is_charged_its_host_time():
    """Such a call cannot run behind the blocking kernel; timed behind a pre-roll instead, the
    launches it made under the spin went uncharged (docs/timing.md). It now starts on an idle
    GPU, and like a blocked call its host time beyond the launch allowance is its time."""
    import torch

    from pytest_kernelboard.judge.measure import CaseTimer
    from pytest_kernelboard.stats.preroll import LAUNCH_ALLOWANCE_US
    from pytest_kernelboard.worker.main import Worker

    worker = Worker(conn=None)

    def launches_then_checks(data):
        out = data
        for _ in range(40):  # host-bound: many tiny launches
            out = out + 1
        assert torch.isfinite(out).all().item()  # a host synchronisation
        return out

    worker.kernel = launches_then_checks
    data = torch.zeros(256, device="cuda")
    replies = [worker.time_call(data, 64 << 20, preroll_us=100.0) for _ in range(6)]
    assert not any(r["synced"] for r in replies[:2])  # the first two are held, then it switches
    assert worker.timer.blocking_off
    for reply in replies[3:]:
        assert reply["synced"] and not reply["blocked"]
        sample = CaseTimer.sample_us(reply, event_overhead_us=1.0)
        assert sample >= reply["call_us"] - LAUNCH_ALLOWANCE_US
        # No pre-roll ran: the call's host time holds its 40 launches, not a 100 µs spin.
        assert reply["device_us"] <= reply["call_us"] + 50, reply
        torch.testing.assert_close(reply["output"], data + 40)
