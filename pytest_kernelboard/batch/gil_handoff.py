"""The timing thread gets the GIL back promptly while a batch judge times a case.

A batch judge is one Python process: while one thread times a case (the exclusive turn,
batch/turns.py), others prepare the candidates ahead of it (their workers' start, their
correctness replies read and checked). Each timed call's round trip takes the GIL several
times (send, the reply's arrival, reading it, checking the output), and a thread that asks for
it waits until the holder reaches Python's switch interval: 5 ms by default, longer than the
host-bound calls being timed. While an exclusive turn is held, the interval is SWITCH_US; it is
Python's own again once no turn is held. The calls' times are taken in the worker's process and
do not move with it; the round trips between them get shorter.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

VARIABLE = "KERNELBOARD_TIMING_SWITCH_US"
SWITCH_US = 200.0

_lock = threading.Lock()
_holders = 0
_python_interval: float | None = None


def switch_interval_s() -> float | None:
    """The switch interval while a case is timed, in seconds (KERNELBOARD_TIMING_SWITCH_US;
    0 keeps Python's own), or None for Python's own."""
    raw = os.environ.get(VARIABLE, "").strip()
    if not raw:
        return SWITCH_US / 1e6
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"{VARIABLE}={raw!r}: expected microseconds, e.g. 200 (0: Python's own)"
        ) from None
    if value < 0:
        raise ValueError(f"{VARIABLE}={raw!r}: expected a number of microseconds ≥ 0")
    return value / 1e6 if value else None


@contextmanager
def prompt_handoff() -> Iterator[None]:
    """Lower the switch interval while any caller is inside; restore it when the last leaves."""
    global _holders, _python_interval
    wanted = switch_interval_s()
    if wanted is None:
        yield
        return
    with _lock:
        if not _holders:
            _python_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(wanted, _python_interval))
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if not _holders and _python_interval is not None:
                sys.setswitchinterval(_python_interval)
