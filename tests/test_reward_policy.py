"""The example clients' pure parts: the kernel in a completion, a record's reward."""

from __future__ import annotations

import math

import pytest
from service_helpers import load_example

reward_module = load_example("kernelboard_reward")


def passed(speedup: float | None = None, flags: tuple[str, ...] = ()) -> dict:
    return {"status": "passed", "correct": True, "speedup": speedup, "flags": list(flags)}


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("no code here", None),
        ("```python\nx = 1\n```", ("x = 1\n", "py")),
        ("```\nx = 1\n```", ("x = 1\n", "py")),
        ("first\n```py\na\n```\nthen\n```python\nb\n```", ("b\n", "py")),
        ("```cuda\n__global__ void k() {}\n```", ("__global__ void k() {}\n", "cu")),
        ("```python\nk\n```\n```bash\npip install x\n```", ("k\n", "py")),  # not a kernel
        ("```python\n\n```", None),
    ],
)
def test_the_kernel_is_the_last_python_or_cuda_block(completion: str, expected: object) -> None:
    assert reward_module.extract_source(completion) == expected


def test_the_reward_policy() -> None:
    r = reward_module.reward
    assert r(None) == 0.0
    assert r({"status": "failed", "correct": False, "speedup": None, "flags": []}) == 0.0
    assert r({"status": "error", "correct": False, "speedup": None, "flags": []}) == 0.0
    assert r(passed()) == 1.0  # correct, untimed
    assert r(passed(1.0)) == 1.0
    assert r(passed(2.0)) == pytest.approx(1.5)  # half a point per doubling
    assert r(passed(100.0)) == pytest.approx(1.0 + 0.5 * math.log2(8.0))  # capped at 8x
    assert r(passed(0.01)) == pytest.approx(0.1)  # slow but correct beats wrong
    assert r(passed(2.0, ("mutates_inputs",))) == pytest.approx(1.0)
    # A speedup too good to trust earns no bonus, and a penalty.
    assert r(passed(50.0, ("excessive_speedup",))) == pytest.approx(0.75)
    assert r(passed(1.0, ("mutates_inputs", "only_library_kernels", "new_flag"))) == 0.0


def test_a_policy_is_a_value_a_trainer_can_change() -> None:
    strict = reward_module.RewardPolicy(speedup_weight=1.0, penalties={"mutates_inputs": 1.0})
    assert reward_module.reward(passed(4.0), strict) == pytest.approx(3.0)
    assert reward_module.reward(passed(1.0, ("mutates_inputs",)), strict) == 0.0
