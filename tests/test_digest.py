"""An output's digest: it changes when any of its bytes change, or when its tensors move."""

from __future__ import annotations

import pytest

from pytest_kernelboard.supervisor import digest

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


def test_a_strided_output_is_digested_where_it_lies():
    """A transposed output (as attention returns) is read in place, not copied: a change to
    any of its elements shows, and bytes of its storage outside its span do not."""
    storage = torch.arange(2 * 3 * 4 + 8, dtype=torch.float32)
    output = storage[4:28].view(2, 3, 4).transpose(0, 2)  # strides (1, 4, 12), offset 4
    before = digest.of(output)
    storage[0] = -1.0  # before the output's first element
    storage[-1] = -1.0  # past its last
    assert digest.of(output) == before
    output[3, 1, 0] = 1000.0
    assert digest.of(output) != before


def test_odd_sized_outputs_are_digested_too():
    output = torch.arange(7, dtype=torch.uint8)  # 7 bytes: not whole int32 words
    before = digest.of(output)
    output[6] = 200
    assert digest.of(output) != before
