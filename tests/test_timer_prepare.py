"""A timed worker's blocking kernel is compiled, loaded and run once as the worker starts, and
the flush's reduction kernel loaded (worker/timing.py, Timer.prepare), so a batch's exclusive
turn does not wait for their first launches; where the compile fails, timing falls back as
before and says why."""

from __future__ import annotations

import pytest

from pytest_kernelboard.worker import blocking
from pytest_kernelboard.worker.timing import Timer


class Blocker:
    made = 0

    def __init__(self, torch):
        Blocker.made += 1


@pytest.fixture
def timer(monkeypatch):
    Blocker.made = 0
    monkeypatch.setattr(blocking, "StreamBlocker", Blocker)
    made = Timer.__new__(Timer)  # Timer(torch, True) needs CUDA; only the blocker's state here
    made.torch, made.blocking, made.blocker, made.blocking_off = object(), True, None, ""
    made.flush_kernel_loads = []
    made._load_flush_kernel = lambda: made.flush_kernel_loads.append(Blocker.made)
    return made


def test_prepare_makes_the_blocker_once_before_any_timed_call(monkeypatch, timer):
    compiled = []
    monkeypatch.setattr(blocking, "compile_ahead", lambda torch: compiled.append(torch))
    timer.prepare()
    assert compiled == [timer.torch] and Blocker.made == 1
    assert timer.flush_kernel_loads == [1]  # after the blocker, before any request
    assert timer._blocker() is timer.blocker  # the first timed call uses it as it is
    assert Blocker.made == 1


def test_a_failed_compile_leaves_the_blocker_to_the_first_timed_call(monkeypatch, timer):
    def fail(torch):
        raise RuntimeError("no Triton backend")

    monkeypatch.setattr(blocking, "compile_ahead", fail)
    timer.prepare()
    assert Blocker.made == 0 and timer.blocking and timer.flush_kernel_loads == []
    timer._blocker()
    assert Blocker.made == 1
