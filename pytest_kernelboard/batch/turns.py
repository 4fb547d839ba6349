"""Whose turn it is on one judge's GPU: correctness work of several candidates side by side,
or one candidate's timed case alone.

Correctness calls only need the right answer, so the candidates imported ahead make theirs
beside each other (shared turns), and a kernel census, which needs its kernels' names, takes one
too. A timed case, the reference's timing and a census whose durations count (batch/judge.py,
`_census`) need the device to themselves (the exclusive turn): it waits for the correctness calls in flight
to return and lets no new one start until it ends. The judge's own work on the device (making
inputs, checking outputs) happens inside the same turns, so it never overlaps a timed call
either. While the exclusive turn is held, the judge's other threads hand the GIL back to the
timing thread promptly (gil_handoff.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .gil_handoff import prompt_handoff


class GpuTurns:
    """A readers-writer lock in which the writer (the timed work) goes first: once it waits, no
    new shared turn starts. One thread takes the exclusive turn; it may take it again inside
    (the reference is timed inside a candidate's timed case) and may take shared turns inside
    it (their correctness calls) without waiting for itself."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._shared = 0  # shared turns in progress
        self._exclusive: threading.Thread | None = None  # who holds the exclusive turn
        self._depth = 0  # how many times it holds it
        self._waiting = False  # the exclusive turn is waited for

    @contextmanager
    def shared(self) -> Iterator[None]:
        if self._exclusive is threading.current_thread():  # inside its own exclusive turn
            yield
            return
        with self._changed:
            self._changed.wait_for(lambda: self._exclusive is None and not self._waiting)
            self._shared += 1
        try:
            yield
        finally:
            with self._changed:
                self._shared -= 1
                self._changed.notify_all()

    @contextmanager
    def exclusive(self, meanwhile: Callable[[], None] | None = None) -> Iterator[None]:
        """meanwhile: work that must end before the turn begins, done once it is asked for (no
        new shared turn starts from then) while the shared turns in flight end."""
        me = threading.current_thread()
        with self._changed:
            asking = self._exclusive is not me
            if asking:
                self._waiting = True
        try:
            if meanwhile is not None:
                meanwhile()
        except BaseException:
            if asking:
                with self._changed:
                    self._waiting = False
                    self._changed.notify_all()
            raise
        with self._changed:
            if asking:
                self._changed.wait_for(lambda: self._exclusive is None and not self._shared)
                self._waiting = False
                self._exclusive = me
            self._depth += 1
        try:
            with prompt_handoff():
                yield
        finally:
            with self._changed:
                self._depth -= 1
                if not self._depth:
                    self._exclusive = None
                    self._changed.notify_all()
