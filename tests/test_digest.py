"""An output's digest: it changes when any of its bytes change, or when its tensors move."""

from __future__ import annotations

import pytest

from pytest_kernelboard.worker import digest

torch = pytest.importorskip("torch")


def test_the_digest_sees_one_changed_element_anywhere_in_the_structure():
    a, b = torch.arange(10, dtype=torch.float32), torch.ones(3)
    output = (a, {"b": b, "more": [a[2:5]]})
    before = digest.of(output)
    assert digest.of(output) == before and len(before) == 2 * 3  # two sums per tensor
    b[1] = 2.0
    assert digest.of(output) != before


def test_the_digest_follows_the_tensors_order():
    a, b = torch.zeros(4), torch.ones(4)
    assert digest.of((a, b)) != digest.of((b, a))
