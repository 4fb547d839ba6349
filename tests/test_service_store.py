"""The reward service's state folder: what a kill leaves behind reads back whole, never twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_kernelboard.batch.candidates import Candidate
from pytest_kernelboard.service.jobs import JobRequest
from pytest_kernelboard.service.store import (
    JOB_FILE,
    RECORDS_FILE,
    JobStore,
    StateError,
    encode_record,
)


def request(*ids: str) -> JobRequest:
    return JobRequest("addone", "test", tuple(Candidate(i, f"# {i}") for i in ids))


def test_jobs_and_records_read_back_in_order(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    first = store.create(request("a", "b"))
    second = store.create(request("c"))
    store.append(first, encode_record({"id": "a", "correct": True}))
    store.append(second, encode_record({"id": "c", "correct": False}))
    store.close()

    again = JobStore(tmp_path)
    loaded = again.load()
    assert [job.id for job in loaded] == [first.id, second.id]
    assert [(job.records, job.total) for job in loaded] == [(1, 2), (1, 1)]
    assert loaded[1].finished_at is not None and loaded[0].finished_at is None
    assert [json.loads(line) for line in again.record_lines(loaded[0], 1)] == [
        {"id": "a", "correct": True}
    ]
    third = again.create(request("d"))
    assert third.seq == 2  # numbering goes on after the jobs read back


def test_a_torn_last_record_is_cut_off_and_judged_again(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.create(request("a", "b"))
    store.append(job, encode_record({"id": "a"}))
    records = tmp_path / "jobs" / job.id / RECORDS_FILE
    with open(records, "ab") as out:
        out.write(b'{"id":"b","corr')  # killed in the middle of the second line
    store.close()

    again = JobStore(tmp_path)
    (loaded,) = again.load()
    assert loaded.records == 1
    assert records.read_bytes() == b'{"id":"a"}\n'


def test_a_job_killed_before_it_was_accepted_is_dropped(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    half = tmp_path / "jobs" / "half"
    half.mkdir(parents=True)
    (half / "job.json.partial").write_text("{")
    assert store.load() == []
    assert not half.exists()


def test_records_that_do_not_match_their_candidates_are_refused(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.create(request("a", "b"))
    store.append(job, encode_record({"id": "b"}))
    store.close()
    with pytest.raises(StateError, match=rf"{RECORDS_FILE}:1: record for 'b' where candidate 'a'"):
        JobStore(tmp_path).load()


def test_a_job_file_that_is_not_a_job_names_the_file(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.create(request("a"))
    (tmp_path / "jobs" / job.id / JOB_FILE).write_text('{"seq": 0, "submitted": "x"}')
    with pytest.raises(StateError, match=rf"{job.id}/{JOB_FILE}: not a job"):
        store.load()


def test_one_state_folder_serves_one_server(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    with pytest.raises(StateError, match="another kernelboard serve"):
        JobStore(tmp_path)
    store.close()
    JobStore(tmp_path).close()


def test_a_failed_job_stays_failed(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    job = store.create(request("a", "b"))
    store.fail(job, "the judge stopped: no GPU")
    store.close()
    (loaded,) = JobStore(tmp_path).load()
    assert loaded.failed == "the judge stopped: no GPU" and loaded.finished_at is not None


def test_records_must_be_strict_json() -> None:
    with pytest.raises(ValueError):
        encode_record({"id": "a", "speedup": float("nan")})
