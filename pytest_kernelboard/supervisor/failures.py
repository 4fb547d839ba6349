"""Why a request to a worker produced no reply, as the judge tells it: the worker raised, died,
or ran out of time; a dead worker's exit status and the last lines of its output."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from ..channel import protocol
from ..channel.protocol import ErrorKind

LOG_TAIL_CHARS = 2000


class WorkerFailure(Exception):
    """A request did not produce a reply: the worker raised, died, or ran out of time.

    `status` is the case status it maps to: error, crashed or timeout. `kind` is what the
    worker's error reply said went wrong (protocol.ErrorKind), None where the judge itself
    gave the verdict (a death, a deadline, a broken protocol); `exception` the class name of
    what raised in the worker, where something did; `module` what a failed import named.
    """

    def __init__(
        self,
        status: str,
        message: str,
        kind: ErrorKind | None = None,
        exception: str | None = None,
        module: str | None = None,
    ):
        self.status = status
        self.kind = kind
        self.exception = exception
        self.module = module
        self.timeout_s: float | None = None  # a request's deadline that passed
        super().__init__(message)

    @classmethod
    def timed_out(cls, timeout_s: float) -> WorkerFailure:
        """A request that got no reply by its deadline (the evaluation names which limit)."""
        failure = cls("timeout", f"timed out after {timeout_s:g} s")
        failure.timeout_s = timeout_s
        return failure


class ImportStalled(WorkerFailure):
    """An import that made no progress for the stall window (supervisor/stall.py): a hang, told
    apart from a build that runs out of its budget."""


def failure_of(reply: dict[str, Any], message: str) -> WorkerFailure:
    """The WorkerFailure of a validated error reply. The worker only ever reports "error":
    crashed and timeout are the judge's verdicts; the reply's kind says what the error was."""
    kind = protocol.error_kind(reply)
    return WorkerFailure("error", message, kind, reply.get("exception"), reply.get("module"))


def died(returncode: int | None, sandboxed: bool, note: str) -> WorkerFailure:
    """A dead worker's failure: the signal that killed it or its exit code, then `note` (the
    last lines of its output)."""
    if returncode is not None and sandboxed and returncode > 128:
        returncode = 128 - returncode  # bwrap reports a signal death as 128 + signal
    if returncode is not None and returncode < 0:
        what = f"the worker was killed by {_signal_name(returncode)}"
    else:
        what = f"the worker exited with code {returncode}"
    return WorkerFailure("crashed", what + note)


def output_tail(log_path: Path) -> str:
    """A worker log's last lines; only its tail is read, however much the worker wrote."""
    try:
        with open(log_path, "rb") as log:
            log.seek(max(log.seek(0, os.SEEK_END) - 4 * LOG_TAIL_CHARS, 0))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return text[-LOG_TAIL_CHARS:].strip()


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"
