"""The state folder: every accepted job and each of its records, on disk as they happen.

    STATE/lock                      held (flock) by the one server that uses the folder
    STATE/jobs/<id>/job.json        the request and its place in the queue; written once, atomically
    STATE/jobs/<id>/records.jsonl   one record per line, in the order given; each line fsync'd
    STATE/jobs/<id>/failed.json     why the judge gave up on the job (the job is then finished)

A job is answered 202 only once its job.json is on disk, and a record is announced only once its
line is. A server killed mid-write leaves at most a torn last line (no newline), which loading
cuts off; the job then resumes at its first candidate without a record, so no record is lost
and none is written twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import KernelboardError
from ..utc import format_utc, now_utc
from .jobs import BadJob, JobRequest, parse_job

JOBS_DIR = "jobs"
JOB_FILE = "job.json"
RECORDS_FILE = "records.jsonl"
FAILED_FILE = "failed.json"
LOCK_FILE = "lock"


class StateError(KernelboardError, RuntimeError):
    """The state folder cannot be used or read back; the message names the file."""


@dataclass(eq=False)  # a job is itself: compared by identity, never by its fields
class StoredJob:
    """A job as the folder holds it: the request, how many records are on disk, its fate."""

    id: str
    seq: int
    submitted: str
    request: JobRequest
    records: int = 0
    failed: str | None = None
    finished_at: float | None = None  # when its last record (or failure) was written

    @property
    def total(self) -> int:
        return len(self.request.candidates)


def encode_record(record: dict[str, Any]) -> bytes:
    """One record as one line; strict JSON (no NaN), so every client can read it back."""
    return json.dumps(record, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


class JobStore:
    """Jobs and records in one state folder, used by one server at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.jobs_dir = folder / JOBS_DIR
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._lock = open(folder / LOCK_FILE, "a+b")  # noqa: SIM115 (held for the server's life)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise StateError(
                f"{folder}: another kernelboard serve uses this state folder; stop it or pass "
                "another --state"
            ) from None
        self._next_seq = 0
        self._seq_lock = threading.Lock()

    def close(self) -> None:
        self._lock.close()

    def create(self, request: JobRequest) -> StoredJob:
        """File a new job; on return it survives a kill."""
        with self._seq_lock:  # jobs are filed from several threads at once
            seq = self._next_seq
            self._next_seq += 1
        job = StoredJob(
            id=uuid.uuid4().hex, seq=seq, submitted=format_utc(now_utc()), request=request
        )
        folder = self.jobs_dir / job.id
        folder.mkdir()
        (folder / RECORDS_FILE).touch()
        document = {"seq": job.seq, "submitted": job.submitted, **request.to_json()}
        _write_atomically(folder / JOB_FILE, json.dumps(document).encode())
        _fsync_dir(self.jobs_dir)
        return job

    def append(self, job: StoredJob, line: bytes) -> None:
        """Add the job's next record (a line from encode_record), durably."""
        with open(self.jobs_dir / job.id / RECORDS_FILE, "ab") as out:
            out.write(line + b"\n")
            out.flush()
            os.fsync(out.fileno())
        job.records += 1
        if job.records == job.total:
            job.finished_at = time.time()

    def fail(self, job: StoredJob, message: str) -> None:
        """Mark the job finished without all its records: the judge could not go on."""
        _write_atomically(
            self.jobs_dir / job.id / FAILED_FILE, json.dumps({"error": message}).encode()
        )
        job.failed = message
        job.finished_at = time.time()

    def record_lines(self, job: StoredJob, count: int) -> list[bytes]:
        """The job's first `count` records, each an encoded JSON object."""
        if count <= 0:
            return []
        with open(self.jobs_dir / job.id / RECORDS_FILE, "rb") as records:
            lines = []
            for line in records:
                lines.append(line.rstrip(b"\n"))
                if len(lines) == count:
                    break
        return lines

    def delete(self, job: StoredJob) -> None:
        _remove_folder(self.jobs_dir / job.id)

    def load(self) -> list[StoredJob]:
        """Every job in the folder, in the order they were accepted, their records counted.

        A folder without job.json is a job that was never accepted (killed before its 202):
        it is removed. A torn last record is cut off."""
        jobs = []
        for folder in sorted(self.jobs_dir.iterdir()):
            if not (folder / JOB_FILE).is_file():
                _remove_folder(folder)
                continue
            jobs.append(self._load_job(folder))
        jobs.sort(key=lambda job: job.seq)
        self._next_seq = jobs[-1].seq + 1 if jobs else 0
        return jobs

    def _load_job(self, folder: Path) -> StoredJob:
        path = folder / JOB_FILE
        try:
            document = json.loads(path.read_bytes())
            seq, submitted = document.pop("seq"), document.pop("submitted")
            request = parse_job(document, max_candidates=len(document.get("candidates") or []))
        except (ValueError, KeyError, TypeError, BadJob) as exc:
            raise StateError(f"{path}: not a job this server wrote ({exc})") from None
        job = StoredJob(id=folder.name, seq=seq, submitted=submitted, request=request)
        job.records = _check_records(folder / RECORDS_FILE, request)
        failed = folder / FAILED_FILE
        if failed.is_file():
            job.failed = json.loads(failed.read_bytes()).get("error", "the judge failed")
        if job.failed is not None or job.records == job.total:
            job.finished_at = (
                (failed if job.failed is not None else folder / RECORDS_FILE).stat().st_mtime
            )
        return job


def _check_records(path: Path, request: JobRequest) -> int:
    """How many whole records the file holds, each for the candidate in its place; a torn last
    line (the server was killed while writing it) is cut off."""
    data = path.read_bytes() if path.exists() else b""
    whole = data.rfind(b"\n") + 1
    if whole < len(data):
        with open(path, "r+b") as records:
            records.truncate(whole)
            os.fsync(records.fileno())
    lines = data[:whole].splitlines()
    if len(lines) > len(request.candidates):
        raise StateError(f"{path}: {len(lines)} records for {len(request.candidates)} candidates")
    for number, (line, candidate) in enumerate(zip(lines, request.candidates, strict=False), 1):
        try:
            record_id = json.loads(line).get("id")
        except (ValueError, AttributeError):
            raise StateError(f"{path}:{number}: not a JSON record") from None
        if record_id != candidate.id:
            raise StateError(
                f"{path}:{number}: record for {record_id!r} where candidate {candidate.id!r} "
                "belongs"
            )
    return len(lines)


def _remove_folder(folder: Path) -> None:
    for item in folder.iterdir():
        item.unlink()
    folder.rmdir()


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(partial, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    handle = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
