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


def test_a_model_is_built_on_the_device_it_runs_on(monkeypatch):
    """Its weights are drawn by the device (seconds of CPU random numbers at KernelBench's
    sizes otherwise); the meta device stands in for a GPU here."""
    seen: list[torch.device] = []

    class Model(torch.nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(n, n)
            seen.append(self.linear.weight.device)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x)

    monkeypatch.setattr(kbu, "device", lambda: torch.device("meta"))
    kernel = kbu.model_kernel(Model)
    out = kernel({"inputs": [torch.empty(2, 8, device="meta")], "init_inputs": [8], "weights": 1})
    assert seen == [torch.device("meta")]
    assert out.device.type == "meta" and out.shape == (2, 8)


def test_two_models_built_under_one_seed_start_identical():
    """The reference's Model and a candidate's ModelNew = Model: the same weights, so the same
    output, wherever they are built."""

    class Model(torch.nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(n, n)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x)

    data = {"inputs": [torch.randn(3, 16)], "init_inputs": [16], "weights": 7}
    assert torch.equal(kbu.model_kernel(Model)(data), kbu.model_kernel(Model)(data))
    other_seed = dict(data, weights=8)
    assert not torch.equal(kbu.model_kernel(Model)(data), kbu.model_kernel(Model)(other_seed))
