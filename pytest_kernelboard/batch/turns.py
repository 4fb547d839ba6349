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

A correctness call that hangs would hold every timed case up until its timeout (10 s of a
100-candidate mixed batch). So where every call still in flight has waited on its worker for
STALE_AFTER_S, the timed case sets them aside (supervisor/aside.py): their workers' process
trees are stopped (SIGSTOP), the device is seen idle (`quiet`: no kernel of theirs still runs,
judge/device_free.py), the turn is taken, and they go on when it ends, their stopped seconds
added to their timeouts. A stopped process launches nothing; a call whose kernels still run
once it is stopped is let go on and waited for, as before, and tried again RETRY_AFTER_S later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..supervisor import aside
from ..supervisor.pausing import go_on, stop
from ..supervisor.proctree import process_tree
from .gil_handoff import prompt_handoff

# A correctness call waiting this long on its worker may be set aside: far beyond the tenths of
# a second one takes, so calls that return on their own are waited for, as without this.
STALE_AFTER_S = 1.0
RETRY_AFTER_S = 1.0  # after a call's device was not seen idle
POLL_S = 0.05  # how often a waiting timed case looks for stale calls

RUNNING, STOPPING, ASIDE = "running", "stopping", "aside"


class _SharedTurn:
    """One shared turn's calls, as the worker client reports them (aside.Holder)."""

    def __init__(self, changed: threading.Condition) -> None:
        self._changed = changed
        self.root_pid: int | None = None
        self.waiting_since: float | None = None  # waits on its worker's reply since
        self.state = RUNNING
        self.stopped: list[int] = []  # its worker's processes, while stopped
        self.stopped_at: float | None = None
        self.stopped_total = 0.0  # seconds stopped before the current stop
        self.seen_idle = False  # its device was seen idle with this call's worker stopped
        self.retry_at = 0.0

    def begin(self, root_pid: int) -> None:
        with self._changed:
            self.root_pid = root_pid
            self.waiting_since = time.perf_counter()
            self.seen_idle = False  # each call's kernels are its own: seen afresh

    def end(self) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self.state == RUNNING)
            self.waiting_since = None

    def stopped_s(self) -> float:
        with self._changed:
            ongoing = time.perf_counter() - self.stopped_at if self.stopped_at is not None else 0
            return self.stopped_total + ongoing

    def stale(self, now: float) -> bool:
        since = self.waiting_since
        return since is not None and now - since >= STALE_AFTER_S and now >= self.retry_at

    def go_on(self, now: float) -> None:
        """Its worker continues; the stop is added to the seconds its timeout leaves out."""
        go_on(self.stopped)
        self.stopped = []
        if self.stopped_at is not None:
            self.stopped_total += now - self.stopped_at
        self.stopped_at = None
        self.state = RUNNING


class GpuTurns:
    """A readers-writer lock in which the writer (the timed work) goes first: once it waits, no
    new shared turn starts. One thread takes the exclusive turn; it may take it again inside
    (the reference is timed inside a candidate's timed case) and may take shared turns inside
    it (their correctness calls) without waiting for itself.

    quiet(since): the device has been seen idle since `since` (time.time()); where it is not
    given, no call is set aside."""

    def __init__(self, quiet: Callable[[float], bool] | None = None) -> None:
        self._changed = threading.Condition()
        self._shared: set[_SharedTurn] = set()  # shared turns in progress
        self._exclusive: threading.Thread | None = None  # who holds the exclusive turn
        self._depth = 0  # how many times it holds it
        self._waiting = False  # the exclusive turn is waited for
        self._quiet = quiet
        self.set_aside_count = 0  # calls set aside so far

    @contextmanager
    def shared(self) -> Iterator[None]:
        if self._exclusive is threading.current_thread():  # inside its own exclusive turn
            yield
            return
        turn = _SharedTurn(self._changed)
        with self._changed:
            self._changed.wait_for(lambda: self._exclusive is None and not self._waiting)
            self._shared.add(turn)
        try:
            with aside.holding(turn):
                yield
        finally:
            with self._changed:
                self._shared.discard(turn)
                self._changed.notify_all()

    def _running(self) -> list[_SharedTurn]:
        return [t for t in self._shared if t.state != ASIDE]

    def _set_aside_stale(self) -> None:
        """Where every call in flight is stale, stop their workers and, the device seen idle,
        set them aside. Called holding the lock; releases it meanwhile."""
        now = time.perf_counter()
        running = self._running()
        if self._quiet is None or not running or not all(t.stale(now) for t in running):
            return
        for turn in running:
            turn.state, turn.stopped_at = STOPPING, now  # its thread's end() waits from now on
        self._changed.release()
        try:
            for turn in running:
                turn.stopped = stop(process_tree(turn.root_pid)) if turn.root_pid else []
            since = time.time()  # every worker is stopped: what runs from now was queued
            idle = all(t.seen_idle for t in running) or self._quiet(since)
        except Exception:  # the look failed (NVML, /proc): as though the device were busy
            idle = False
        finally:
            self._changed.acquire()
        now = time.perf_counter()
        for turn in running:
            if idle:
                turn.state, turn.seen_idle = ASIDE, True
                self.set_aside_count += 1
            else:  # its kernels still run: waited for, as before
                turn.go_on(now)
                turn.retry_at = now + RETRY_AFTER_S
        self._changed.notify_all()

    def _let_go_on(self) -> None:
        now = time.perf_counter()
        for turn in self._shared:
            if turn.state == ASIDE:
                turn.go_on(now)

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
                try:
                    while self._exclusive is not None or self._running():
                        if self._exclusive is None:
                            self._set_aside_stale()
                        if self._exclusive is not None or self._running():
                            self._changed.wait(POLL_S)
                except BaseException:  # interrupted while waiting: nothing stays stopped
                    self._let_go_on()
                    self._waiting = False
                    self._changed.notify_all()
                    raise
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
                    self._let_go_on()
                    self._changed.notify_all()
