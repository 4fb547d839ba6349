"""A timed case's inputs, made before its timing starts rather than between its timed calls.

The timing loop makes each call's fresh input between two timed calls, on the GPU's critical
path: on an H100, 1.6 ms of a host-bound case's 7.7 ms per call (benchmarks/probes/
timed_calls.py). A batch makes them ahead instead, beside other candidates' work, as many as
the case's last timing used and MAX_BYTES holds; the loop takes them by call index and makes
the rest itself. Each is the input that index's seed makes, so the calls are the same either
way. It pays where a case makes many calls of a small input: a host-bound case stops on noise
after about 50.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..stats.floors import tensor_bytes

MAX_BYTES = 64 << 20  # what one candidate's inputs made ahead may hold, at most
MAX_CALLS = 64  # a case that stops on noise takes about 50 calls, warm-up included
# Fewer calls than this are made in the loop: made ahead, beside other candidates' correctness
# calls, an input took about ten times as long (an H100: 22 against 1.9 ms for KernelBench L2
# 12's, whose seven calls spend 13 ms on them), and the candidates prepared ahead wait for it.
MIN_CALLS = 10


class InputsAhead:
    """One judge's inputs made ahead, by case name and call index."""

    def __init__(self) -> None:
        self._made: dict[str, dict[int, Any]] = {}

    def make(self, name: str, calls: int, each_bytes: int, generate: Callable[[int], Any]) -> int:
        """The inputs of calls 1 .. `calls` (call 0 is the correctness check's), fewer where
        MAX_CALLS or MAX_BYTES stop them (`each_bytes`: one input's, as its check's was), none
        where fewer than MIN_CALLS would be made; how many were made."""
        made: dict[int, Any] = {}
        held = 0
        fits = MAX_BYTES // max(each_bytes, 1)
        if min(calls, fits) < MIN_CALLS:
            self._made.pop(name, None)
            return 0
        for index in range(1, min(calls, MAX_CALLS, fits) + 1):
            pristine = generate(index)
            held += tensor_bytes(pristine)
            if held > MAX_BYTES:
                break
            made[index] = pristine
        self._made[name] = made
        return len(made)

    def take(self, name: str, index: int) -> Any | None:
        """Call `index`'s input, made ahead (given up here: the loop lets go of each input
        once its call is checked); None where it was not."""
        return self._made.get(name, {}).pop(index, None)

    def drop(self, name: str) -> None:
        """The case is timed: what its timing did not use is let go."""
        self._made.pop(name, None)
