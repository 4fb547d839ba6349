"""The worker's peak of reserved device memory, which each measured call reports to the judge's
memory budget: read from the allocator's nested statistics, the number
torch.cuda.max_memory_reserved() gives."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from pytest_kernelboard.worker.main import peak_reserved_bytes


def test_the_peak_is_read_from_the_nested_statistics():
    nested = {
        "reserved_bytes": {
            "all": {"current": 2 << 20, "peak": 6 << 20, "allocated": 9 << 20},
            "large_pool": {"peak": 4 << 20},
        },
        "allocated_bytes": {"all": {"peak": 3 << 20}},
    }
    fake = SimpleNamespace(cuda=SimpleNamespace(memory_stats_as_nested_dict=lambda: nested))
    assert peak_reserved_bytes(fake) == 6 << 20
    empty = SimpleNamespace(cuda=SimpleNamespace(memory_stats_as_nested_dict=dict))
    assert peak_reserved_bytes(empty) == 0  # no allocator yet: what max_memory_reserved says


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_the_peak_matches_torchs_own_on_a_gpu():
    torch.cuda.reset_peak_memory_stats()
    held = torch.empty(48 << 20, dtype=torch.uint8, device="cuda")
    del held
    torch.cuda.empty_cache()
    assert peak_reserved_bytes(torch) == torch.cuda.max_memory_reserved() >= 48 << 20
