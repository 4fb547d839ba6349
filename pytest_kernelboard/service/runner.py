"""The queue of jobs and the thread that feeds them to the judge.

One judge call at a time owns the judges (every GPU of the host, or of the Ray cluster): it takes
the oldest queued job and every other queued job for the same leaderboard and mode, so many
clients' small jobs share the GPUs as one batch. The judge streams records in the order given;
each is written to the state folder before anyone hears of it. The queue holds at most
`max_queued` candidates not yet judged: a job that would pass the limit is refused with the
seconds after which it likely fits (QueueFull, HTTP 429).
"""

from __future__ import annotations

import asyncio
import collections
import math
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from ..batch.candidates import Candidate
from ..errors import KernelboardError
from .jobs import JobRequest
from .judges import Judge
from .store import JobStore, StoredJob, encode_record

RATE_WINDOW_S = 300.0  # the judging rate reported and used for Retry-After
SWEEP_EVERY_S = 60.0


class QueueFull(KernelboardError, RuntimeError):
    """The job does not fit in the queue now; retry after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class JudgeBroke(KernelboardError, RuntimeError):
    """The judge answered something other than one record per candidate, in order."""


@dataclass
class JobView:
    """What GET /v1/jobs/<id> answers, the records as encoded JSON lines."""

    job: StoredJob
    state: str
    done: int
    records: list[bytes]

    def header(self) -> dict[str, Any]:
        header = {
            "job": self.job.id,
            "leaderboard": self.job.request.leaderboard,
            "mode": self.job.request.mode,
            "state": self.state,
            "done": self.done,
            "total": self.job.total,
        }
        if self.job.failed is not None:
            header["error"] = self.job.failed
        return header


class JobRunner:
    def __init__(
        self,
        store: JobStore,
        judge: Judge,
        *,
        max_queued: int = 4096,
        keep_done_s: float = 7 * 24 * 3600.0,
    ) -> None:
        self.store = store
        self.judge = judge
        self.max_queued = max_queued
        self.keep_done_s = keep_done_s
        self._jobs: dict[str, StoredJob] = {}
        self._queue: list[StoredJob] = []  # waiting, oldest first
        self._running: list[StoredJob] = []
        self._reserved = 0  # candidates of jobs being filed
        self._finished: dict[str, asyncio.Event] = {}  # per unfinished job
        self._work = asyncio.Event()
        self._stopping = threading.Event()
        self._recorded_at: collections.deque[float] = collections.deque(maxlen=100_000)
        self._started = time.monotonic()
        self._tasks: list[asyncio.Task[None]] = []
        self._batch_done: asyncio.Future[None] | None = None

    # -- life cycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Read the state folder back and resume every unfinished job, oldest first."""
        for job in await asyncio.to_thread(self.store.load):
            self._jobs[job.id] = job
            if not _finished(job):
                self._finished[job.id] = asyncio.Event()
                self._queue.append(job)
            else:
                _forget_sources(job)
        if self._queue:
            self._work.set()
        self._tasks = [
            asyncio.create_task(self._serve(), name="kernelboard-judge"),
            asyncio.create_task(self._sweep(), name="kernelboard-sweep"),
        ]

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop after the record being judged (at most `grace_s`); what is on disk resumes on the
        next start."""
        self._stopping.set()
        if self._batch_done is not None and not self._batch_done.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._batch_done), grace_s)
            except TimeoutError:
                print(
                    f"kernelboard serve: the judge did not stop within {grace_s:g} s; its "
                    "unfinished candidates resume on the next start",
                    file=sys.stderr,
                )
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- what the routes call ----------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Candidates accepted and not yet judged."""
        waiting = self._queue + self._running
        return sum(job.total - job.records for job in waiting if job.failed is None)

    async def submit(self, request: JobRequest) -> StoredJob:
        """File the job and queue it; QueueFull when it does not fit now."""
        n = len(request.candidates)
        excess = self.pending + self._reserved + n - self.max_queued
        if excess > 0:
            wait = self._seconds_for(excess)
            raise QueueFull(
                f"the queue holds {self.pending + self._reserved} of {self.max_queued} "
                f"candidates; {n} more do not fit (retry in about {wait} s)",
                retry_after=wait,
            )
        self._reserved += n
        try:
            job = await asyncio.to_thread(self.store.create, request)
        finally:
            self._reserved -= n
        self._jobs[job.id] = job
        self._finished[job.id] = asyncio.Event()
        self._queue.append(job)
        self._work.set()
        return job

    def get(self, job_id: str) -> StoredJob | None:
        return self._jobs.get(job_id)

    async def view(self, job: StoredJob, wait_s: float = 0.0) -> JobView:
        """The job now, or once it is finished if that comes within `wait_s`."""
        event = self._finished.get(job.id)
        if wait_s > 0 and event is not None:
            try:
                await asyncio.wait_for(event.wait(), wait_s)
            except TimeoutError:
                pass
        # One snapshot, read in this order: the judge's thread only ever raises `records`, and
        # sets `failed` after its last record, so a state never claims records it does not show.
        failed = job.failed is not None
        done = job.records
        if failed:
            state = "failed"
        elif done == job.total:
            state = "done"
        else:
            state = "running" if job in self._running else "queued"
        lines = await asyncio.to_thread(self.store.record_lines, job, done)
        return JobView(job=job, state=state, done=done, records=lines)

    def health(self) -> dict[str, Any]:
        window = min(RATE_WINDOW_S, max(time.monotonic() - self._started, 1.0))
        recent = self._recent(window)
        return {
            "judge": self.judge.description,
            **self.judge.capacity(),
            "queue": {
                "jobs": len(self._queue) + len(self._running),
                "candidates": self.pending,
                "limit": self.max_queued,
            },
            "running": [job.id for job in self._running],
            "rate_per_minute": round(recent * 60.0 / window, 3),
            "uptime_s": round(time.monotonic() - self._started, 1),
        }

    # -- the judge ---------------------------------------------------------------------------

    async def _serve(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping.is_set():
            await self._work.wait()
            batch = self._take_batch()
            if not batch:
                self._work.clear()
                continue
            self._running = batch
            self._batch_done = loop.create_future()
            thread = threading.Thread(
                target=self._judge_batch,
                args=(batch, loop, self._batch_done),
                name="kernelboard-judge",
                daemon=True,  # a stop that outlasts its grace must not hang the process
            )
            thread.start()
            await asyncio.shield(self._batch_done)
            self._running = []
            # Every job of the batch is finished now (done or failed), unless the server is
            # stopping: those resume from the state folder on the next start.
            for job in batch:
                if _finished(job):
                    self._announce_finished(job)
            self._batch_done = None

    def _take_batch(self) -> list[StoredJob]:
        if not self._queue:
            return []
        head = self._queue[0]
        key = (head.request.leaderboard, head.request.mode)
        batch = [job for job in self._queue if (job.request.leaderboard, job.request.mode) == key]
        self._queue = [job for job in self._queue if job not in batch]
        return batch

    def _judge_batch(
        self, batch: list[StoredJob], loop: asyncio.AbstractEventLoop, done: asyncio.Future[None]
    ) -> None:
        """In the judge's thread: judge every remaining candidate of the batch, file each record."""
        slots = [(job, i) for job in batch for i in range(job.records, job.total)]
        candidates = [job.request.candidates[i] for job, i in slots]
        leaderboard, mode = batch[0].request.leaderboard, batch[0].request.mode
        judged = 0
        stream = None
        try:
            stream = self.judge(leaderboard, candidates, mode)
            for record in stream:
                if judged >= len(slots):
                    raise JudgeBroke(
                        f"the judge returned more records than {len(slots)} candidates"
                    )
                job, _ = slots[judged]
                expected = candidates[judged].id
                if not isinstance(record, dict) or record.get("id") != expected:
                    got = record.get("id") if isinstance(record, dict) else type(record).__name__
                    raise JudgeBroke(
                        f"the judge returned a record for {got!r} where {expected!r} belongs"
                    )
                try:
                    line = encode_record(record)
                except ValueError as exc:
                    raise JudgeBroke(
                        f"the record for {expected!r} is not strict JSON ({exc})"
                    ) from None
                self.store.append(job, line)
                judged += 1
                if job.records == job.total:  # its waiters need not wait for the batch
                    loop.call_soon_threadsafe(self._announce_finished, job)
                loop.call_soon_threadsafe(self._recorded_at.append, time.monotonic())
                if self._stopping.is_set():
                    return
            if judged < len(slots):
                raise JudgeBroke(f"the judge returned {judged} records for {len(slots)} candidates")
        except Exception as exc:  # noqa: BLE001 (every job of the batch must learn why)
            if self._stopping.is_set():
                return
            if not isinstance(exc, KernelboardError):
                traceback.print_exc(file=sys.stderr)
            message = (
                str(exc) if isinstance(exc, KernelboardError) else f"{type(exc).__name__}: {exc}"
            )
            for job in batch:
                if not _finished(job):
                    self.store.fail(job, f"the judge stopped: {message}")
                    loop.call_soon_threadsafe(self._announce_finished, job)
        finally:
            if stream is not None and hasattr(stream, "close"):
                try:
                    stream.close()
                except Exception:  # noqa: BLE001 (closing must not hide what happened)
                    traceback.print_exc(file=sys.stderr)
            loop.call_soon_threadsafe(_settle, done)

    def _announce_finished(self, job: StoredJob) -> None:
        _forget_sources(job)
        event = self._finished.pop(job.id, None)
        if event is not None:
            event.set()

    # -- bookkeeping -------------------------------------------------------------------------

    def _recent(self, window: float) -> int:
        cutoff = time.monotonic() - window
        return sum(1 for stamp in self._recorded_at if stamp >= cutoff)

    def _seconds_for(self, candidates: int) -> int:
        """About how long the judges take for `candidates` more records, at the recent rate."""
        window = min(RATE_WINDOW_S, max(time.monotonic() - self._started, 1.0))
        per_second = self._recent(window) / window
        if per_second <= 0:
            return 30
        return max(1, min(3600, math.ceil(candidates / per_second)))

    async def _sweep(self) -> None:
        """Forget finished jobs older than keep_done_s, on disk and in memory."""
        while True:
            await asyncio.sleep(SWEEP_EVERY_S)
            cutoff = time.time() - self.keep_done_s
            for job in list(self._jobs.values()):
                if job.finished_at is not None and job.finished_at < cutoff:
                    del self._jobs[job.id]
                    await asyncio.to_thread(self.store.delete, job)


def _finished(job: StoredJob) -> bool:
    return job.failed is not None or job.records == job.total


def _forget_sources(job: StoredJob) -> None:
    """A finished job keeps its ids only: its sources are on disk and no longer needed."""
    job.request = JobRequest(
        leaderboard=job.request.leaderboard,
        mode=job.request.mode,
        candidates=tuple(
            Candidate(id=c.id, source="", lang=c.lang) for c in job.request.candidates
        ),
    )


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
