"""The judge's own device cache after a case: handed back where it is large, kept where small."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("cached_mib", "emptied"), [(8, False), (512, True)])
def test_the_judge_empties_its_device_cache_after_a_case_only_when_it_holds_much(
    monkeypatch, cached_mib, emptied
):
    """After each case the judge gives its cached, unused device memory back, where it holds
    KEPT_CACHE_MAX or more: a batch's small correctness cases emptied and remade it each time
    (a device synchronisation and fresh allocations per case), giving no one room."""
    import torch

    from pytest_kernelboard.channel import scrubbing
    from pytest_kernelboard.judge.core import KEPT_CACHE_MAX, SubmissionJudge

    assert 8 << 20 < KEPT_CACHE_MAX <= 512 << 20
    held = {"reserved": (cached_mib << 20) + (1 << 30)}
    calls: list[str] = []

    def empty_cache() -> None:
        calls.append("empty_cache")
        held["reserved"] = 1 << 30

    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: held["reserved"])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda *a: 1 << 30)
    monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
    released: list[int] = []
    monkeypatch.setattr(scrubbing.QUEUE, "released", released.append)
    judge = object.__new__(SubmissionJudge)  # only what release_cached_memory reads
    judge.use_cuda, judge._worker = True, None
    judge.release_cached_memory(windows=True)
    assert calls == (["empty_cache"] if emptied else [])
    assert released == ([cached_mib << 20] if emptied else [])
