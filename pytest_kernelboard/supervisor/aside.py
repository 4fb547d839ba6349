"""A call whose reply is long in coming, set aside while another candidate is timed.

The batch judge's correctness calls share the device, and a timed case waits for those in
flight to return (batch/turns.py). One that hangs would hold every timed case up until its own
timeout. So the judge's thread says when it is waiting on its worker's reply, and the batch
judge may set that call aside: stop its worker (SIGSTOP) while the case is timed, then let it go
on. A stopped worker's seconds are not its own: they do not count against its call's timeout.

This module is the seam between the two: the thread's current Holder (the batch's shared turn
sets it), which the worker client (client.py) tells when it begins and ends waiting, and asks
how long its worker has been stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol


class Holder(Protocol):
    def begin(self, root_pid: int) -> None:
        """The thread now waits on the reply of the worker under root_pid: it may be set aside."""

    def end(self) -> None:
        """The thread stops waiting: returns once its worker is no longer set aside, and from
        then on it is not set aside until it begins again. Called before the judge's thread does
        anything else: reads the reply, kills the worker, raises."""

    def stopped_s(self) -> float:
        """Seconds its worker has been stopped since the call began (up to now, while it is)."""


class _NeverAside:
    """The Holder of a thread whose calls are never set aside (the default)."""

    def begin(self, root_pid: int) -> None:
        pass

    def end(self) -> None:
        pass

    def stopped_s(self) -> float:
        return 0.0


NEVER: Holder = _NeverAside()
_current = threading.local()


@contextmanager
def holding(holder: Holder) -> Iterator[None]:
    """The worker calls this thread makes meanwhile may be set aside through `holder`."""
    outer = getattr(_current, "holder", None)
    _current.holder = holder
    try:
        yield
    finally:
        _current.holder = outer


def current() -> Holder | None:
    """This thread's Holder, or None where no call of its may be set aside."""
    return getattr(_current, "holder", None)
