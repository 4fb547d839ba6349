"""leaderboards/utils.py's comparisons: a large output compared a block at a time says what one
comparison of the whole says, and waits for the device once, not once per block."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

UTILS = Path(__file__).resolve().parents[1] / "leaderboards" / "utils.py"


@pytest.fixture
def utils():
    spec = importlib.util.spec_from_file_location("leaderboard_utils_under_test", UTILS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def wrong_output(shape: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """An expected output and a received one wrong in several blocks: off by far, NaN where a
    number is due, a number where NaN is due (which must match only NaN), the wrong infinity."""
    gen = torch.Generator().manual_seed(3)
    expected = torch.randn(shape, generator=gen)
    received = expected.clone()
    flat_e, flat_r = expected.view(-1), received.view(-1)
    n = flat_e.numel()
    flat_r[n - 7] += 1.0  # the last block first: positions still come in row-major order
    flat_r[n // 2] = float("nan")
    flat_e[n // 3] = float("nan")
    flat_e[17], flat_r[17] = float("inf"), float("-inf")
    flat_r[5] += 0.5
    flat_e[9] = flat_r[9] = float("nan")  # NaN meets NaN: fine
    return received, expected


@pytest.mark.parametrize("shape", [(3000, 1100), (3, 700, 1500), (2_500_000,)])
def test_blocks_say_what_one_comparison_of_the_whole_says(utils, monkeypatch, shape):
    received, expected = wrong_output(shape)
    assert expected.numel() > 2 * utils.BLOCK_ELEMENTS  # several blocks
    in_blocks = utils.verbose_allclose(received, expected, rtol=1e-3, atol=1e-3, max_print=3)
    exact_in_blocks = utils.verbose_allequal(received, expected, max_print=3)
    monkeypatch.setattr(utils, "BLOCK_ELEMENTS", expected.numel())
    whole = utils.verbose_allclose(received, expected, rtol=1e-3, atol=1e-3, max_print=3)
    assert in_blocks == whole
    assert utils.verbose_allequal(received, expected, max_print=3) == exact_in_blocks
    assert whole[0] == f"5 of {expected.numel()} elements differ (rtol=0.001, atol=0.001)"
    assert whole[1].startswith(f"at {utils._index(5, shape)}:")  # row-major: flat 5 first
    assert whole[-2:] == [
        "largest absolute difference: 1",
        "1 received values are NaN where the expected value is not",
    ]


def test_a_right_output_in_many_blocks_waits_for_the_counts_once(utils, monkeypatch):
    expected = torch.randn(4 * utils.BLOCK_ELEMENTS + 3)
    received = expected.clone()
    reads = []
    item, tolist = torch.Tensor.item, torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "item", lambda t: reads.append("item") or item(t))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda t: reads.append("tolist") or tolist(t))
    assert utils.verbose_allclose(received, expected) == []
    assert utils.verbose_allequal(received, expected) == []
    assert reads == ["tolist", "tolist"]  # one read of every block's count, per comparison


@pytest.mark.parametrize("atol_shape", [(2, 1), (3,)])
def test_a_tolerance_that_does_not_broadcast_to_the_output_is_named(utils, atol_shape):
    """A per-element tolerance must broadcast to the output's shape: one that broadcasts to a
    larger shape, or not at all, is the check's own mistake, said as such (the judge then runs
    the case for nobody, docs/timing.md), not an IndexError from inside the comparison."""
    expected = torch.zeros(5)
    received = expected.clone()
    received[-1] = 0.5
    with pytest.raises(
        ValueError, match=r"atol of shape \(.*\) does not broadcast to the output's shape \(5,\)"
    ):
        utils.verbose_allclose(received, expected, atol=torch.full(atol_shape, 0.1))


def test_a_per_element_tolerance_is_sliced_with_its_blocks(utils):
    expected = torch.zeros(3 * utils.BLOCK_ELEMENTS)
    received = expected.clone()
    received[0] = received[-1] = 0.5
    atol = torch.full_like(expected, 0.1)
    atol[-1] = 1.0  # the last element's own tolerance holds its difference; the first's does not
    messages = utils.verbose_allclose(received, expected, atol=atol)
    assert messages[0].startswith(f"1 of {expected.numel()} elements differ")
    assert messages[1].startswith("at (0,):")
