"""The judge's seeding: the same draws from the same seed, and no stack traces kept for seeds of
device kinds this host lacks (torch queues those with traceback.format_stack at every seed)."""

from __future__ import annotations

import sys
import traceback

import torch

from pytest_kernelboard.judge import seeding
from pytest_kernelboard.judge.seeding import seed_everything


def test_the_same_seed_draws_the_same_numbers():
    seed_everything(7)
    first = torch.randn(16)
    seed_everything(7)
    assert torch.equal(first, torch.randn(16))
    seed_everything(8)
    assert not torch.equal(first, torch.randn(16))


def test_no_stack_is_kept_for_a_device_kind_the_host_lacks(monkeypatch):
    callers: list[str] = []
    real_format_stack = traceback.format_stack

    def recording(*args, **kwargs):
        callers.append(sys._getframe(1).f_globals.get("__name__", ""))
        return real_format_stack(*args, **kwargs)

    monkeypatch.setattr(traceback, "format_stack", recording)
    seed_everything(3)
    torch.manual_seed(3)  # a leaderboard's own set_seed, after the judge's
    absent = seeding._without_absent_device_seeds()
    assert "xpu" in absent or torch.xpu.is_available()
    assert not [c for c in callers if c.split(".")[:2] in (["torch", k] for k in absent)], callers


def test_a_device_kind_the_host_has_keeps_its_seeding(monkeypatch):
    def own_seeding(seed: int) -> None:
        pass

    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "manual_seed_all", own_seeding)
    absent = seeding._without_absent_device_seeds.__wrapped__()
    assert "xpu" not in absent and torch.xpu.manual_seed_all is own_seeding
