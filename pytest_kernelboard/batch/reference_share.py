"""The reference's timing shared by several GPUs' judges: the messages between the parent
(fanout.py) and each GPU's judge process (gpu_judge.py), which workers of the reference a judge
times, and a judge's side of the exchange."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from typing import Any

from ..evaluation.paired import default_pairs
from ..results.reference_runs import ReferenceUnavailable

# Every speedup of a batch hangs on the reference's one timing per case: it is timed in this
# many fresh workers and the median one kept (a worker's host-bound time moves by about ±20%);
# their spread widens each candidate's interval (stats/between_workers.py). Five give the
# spread four degrees of freedom (t = 2.78; three would give two, t = 4.30).
REFERENCE_WORKERS = 5
MIN_REFERENCE_WORKERS = 3  # fewer leave their spread one degree of freedom (t = 12.7)
# A case whose calls most of those workers found host-bound is timed in this many in all. A
# host-bound time moves by 5 - 20% from one worker to the next, and five workers' spread, with
# four degrees of freedom, reads under half its true size one batch in ten (P(chi2_4 < 1) =
# 0.09), narrowing every candidate's interval by as much: on an H200 two copies of the
# reference's own code read 1.53x faster, not tied, against five workers that spread 7.1%.
# Nine give eight degrees of freedom (P(chi2_8 < 2) = 0.02; t = 2.31 instead of 2.78), for four
# more worker starts, and only where calls are host-bound, so short.
HOST_BOUND_REFERENCE_WORKERS = 9


def host_bound_total(total: int) -> int:
    """The reference's workers on a host-bound case: HOST_BOUND_REFERENCE_WORKERS, or `total`
    where its candidates are timed in turns with a worker of the reference's, whose turns then
    give every speedup (evaluation/paired.py): the batch's timing only says the case is
    host-bound."""
    return total if default_pairs() else max(total, HOST_BOUND_REFERENCE_WORKERS)


CANDIDATE, RECORD, REFERENCE, REFERENCE_SHARE, PHASE = (
    "candidate",
    "record",
    "reference",
    "reference_share",
    "phase",
)


def reference_workers_arg(text: str) -> int:
    """--reference-workers R, as `kernelboard judge` and the suite sweep read it: a whole number
    of at least MIN_REFERENCE_WORKERS."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < MIN_REFERENCE_WORKERS:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of at least {MIN_REFERENCE_WORKERS}, got {text!r}"
        )
    return count


def shared_workers(judge: int, judges: int, total: int = REFERENCE_WORKERS) -> list[int]:
    """Which of the reference's `total` workers judge `judge` of `judges` times: counted from
    the last judge (the last judge times 0, judges, ...; the one before it 1, 1 + judges, ...),
    so the first judges, which the parent deals the first candidates to, time the fewest: a
    one-candidate batch on four GPUs (a sweep's long problem) times its candidate beside one
    of the reference's workers, not two; none for a judge that `total` or more judges follow."""
    return list(range(judges - 1 - judge, total, judges))


class ReferenceShare:
    """A GPU judge's side of the shared reference: which of its workers this judge times, and
    the combined timings the parent sends back."""

    def __init__(
        self,
        judge: int,
        judges: int,
        send: Callable[[dict[str, Any]], None],
        total: int = REFERENCE_WORKERS,
    ):
        self.workers = shared_workers(judge, judges, total)
        self.total = total  # the reference's workers in all, every judge's
        # Its workers on a host-bound case (HOST_BOUND_REFERENCE_WORKERS; `workers` first),
        # where its candidates are not timed in turns with the reference (host_bound_total).
        self.host_bound_total = host_bound_total(total)
        self.host_bound_workers = shared_workers(judge, judges, self.host_bound_total)
        self._send = send
        self._combined: dict[str, dict[str, Any]] = {}
        self._failed: str | None = None  # every case not yet combined fails with this
        self._condition = threading.Condition()

    def publish(
        self, key: str, label: str, timings: list[dict[str, Any]], error: str | None = None
    ) -> None:
        """This judge's workers' timing records of a case (or why they failed), to the parent:
        its `workers`' or, for a host-bound case, as many of its `host_bound_workers`'."""
        found = {"error": error} if error else {"timings": timings}
        workers = self.host_bound_workers[: len(timings)] if timings else self.workers
        self._send(
            {"type": REFERENCE_SHARE, "case": key, "label": label, "workers": workers} | found
        )

    def report(self, phase: str, **account: Any) -> None:
        self._send({"type": PHASE, "phase": phase, **account})

    def deliver(self, message: dict[str, Any]) -> None:
        """A reference message from the parent (the stdin reader routes them here)."""
        with self._condition:
            if message.get("case") is None:
                self._failed = self._failed or message.get("error") or "no reference timing"
            else:
                self._combined[message["case"]] = message
            self._condition.notify_all()

    def combined(self, key: str) -> dict[str, Any]:
        """The case's reference timing as the parent combined it; waits until it comes."""
        with self._condition:
            self._condition.wait_for(lambda: key in self._combined or self._failed is not None)
            message = self._combined.get(key) or {"error": self._failed}
        if message.get("error"):
            raise ReferenceUnavailable(message["error"])
        return message["timing"]
