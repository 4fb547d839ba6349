"""The KernelBench leaderboards' check: allclose at 1e-2, compared in views, never in copies."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from pytest_kernelboard.importers import kernelbench_utils as kbu  # noqa: E402


@pytest.mark.parametrize(
    "shape", [(), (7,), (40,), (3, 5), (2, 9, 4), (1, 1, 33)], ids=lambda s: f"{s}"
)
def test_the_slices_cover_every_element_once_as_views(shape, monkeypatch):
    monkeypatch.setattr(kbu, "CHECK_CHUNK", 8)
    tensor = torch.arange(int(torch.tensor(shape).prod()) if shape else 1).reshape(shape)
    pieces = list(kbu._slices(tensor))
    assert sum(p.numel() for p in pieces) == tensor.numel()
    assert all(
        p.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr() for p in pieces
    )
    assert all(p.numel() <= 8 for p in pieces) or tensor.numel() <= 8
    flat = torch.cat([p.reshape(-1) for p in pieces]) if pieces else torch.tensor([])
    assert torch.equal(flat, tensor.reshape(-1))


def test_a_transposed_output_is_checked_element_for_element(monkeypatch):
    """Attention returns a transposed output; the check reads it where it lies."""
    monkeypatch.setattr(kbu, "CHECK_CHUNK", 16)
    expected = torch.randn(4, 6, 5).transpose(0, 1)  # strided, as the reference returns it
    received = expected.contiguous()  # the same values, another layout
    assert kbu.check(expected, received) == (True, "")
    received[5, 3, 4] += 1.0
    received[0, 0, 0] += 1.0
    ok, message = kbu.check(expected, received)
    assert not ok and message.startswith("2 of 120 elements differ")
