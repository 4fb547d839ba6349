"""Where a batch candidate's time goes: each record's `phases`, and the batch's account."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import jsonschema
import pytest

from pytest_kernelboard.batch import Candidate, judge_many, record_schema
from pytest_kernelboard.batch.phases import (
    CHECK_PARTS,
    ORDER,
    REFERENCE_PARTS,
    SERIAL,
    PhaseClock,
    account_lines,
    batch_account,
    working_for,
)
from pytest_kernelboard.batch.phases import current as current_clock

GOOD = "def custom_kernel(data):\n    x, out = data\n    out.copy_(x + 1)\n    return out\n"
SYNTAX = "def custom_kernel(data)\n    return 1\n"


@pytest.fixture(scope="module")
def benchmark_batch(tmp_path_factory) -> list[dict]:
    """Three candidates judged in benchmark mode: two correct, one that does not import."""
    root = tmp_path_factory.mktemp("phases") / "repo"
    shutil.copytree(Path(__file__).parent / "fixtures" / "core", root)
    candidates = [
        Candidate("first.py", GOOD),
        Candidate("syntax.py", SYNTAX),
        Candidate("second.py", "# another\n" + GOOD),
    ]
    return list(judge_many("addone", candidates, mode="benchmark", root=root, gpus=[]))


def test_every_record_says_where_its_time_went(benchmark_batch):
    schema = record_schema()
    for record in benchmark_batch:
        jsonschema.validate(record, schema)
        phases = record["phases"]
        assert list(phases) == [p for p in ORDER if p in phases]  # in the documented order
        assert all(seconds >= 0 for seconds in phases.values())
        assert phases["import"] > 0
        # What lies on the critical path fits in the candidate's own wall time.
        assert sum(phases.get(p, 0.0) for p in SERIAL) <= phases["wall"] + 1e-3
    first, syntax, second = benchmark_batch
    for timed in (first, second):
        assert timed["status"] == "passed"
        phases = timed["phases"]
        # Made in its turn, or ahead of it beside the other candidates' (batch/turns.py).
        assert phases.get("correctness", 0) + phases.get("correctness_ahead", 0) > 0
        assert phases.get("benchmark_check", 0) + phases.get("benchmark_check_ahead", 0) > 0
        assert phases["timing"] > 0 and phases["timing_worker"] > 0
        assert phases["timing"] <= phases["wall"]
        if "benchmark_check_ahead" in phases:  # not in its turn: no parts there
            continue
        # The timed case's check is told apart: its input, the worker's call, the verdict.
        check = {p: phases.get(p, 0.0) for p in CHECK_PARTS}
        assert check["benchmark_check_call"] > 0 and check["benchmark_check_verify"] > 0
        assert 0 < check["benchmark_check_worker"] <= check["benchmark_check_call"]
        parts = ("generate", "call", "verify")
        assert sum(check[f"benchmark_check_{p}"] for p in parts) <= phases["benchmark_check"]
    # No judge had made the first candidate's inputs yet: nothing of it was made ahead.
    assert not any(p.endswith("_ahead") for p in first["phases"])
    # The first timed candidate waited for the reference's timing; the next one reuses it.
    assert first["phases"]["reference"] > 0
    assert "reference" not in second["phases"]
    # Its workers' start, import and timing loop are told apart, within the wait.
    parts = {p: first["phases"].get(p, 0.0) for p in REFERENCE_PARTS}
    assert parts["reference_worker_start"] > 0 and parts["reference_import"] > 0
    assert parts["reference_timing"] > 0
    assert sum(parts.values()) <= first["phases"]["reference"] + 1e-3
    assert not any(p in second["phases"] for p in REFERENCE_PARTS)
    # The calibration is the timed case's, not its check's; on a CPU there is none.
    assert "calibrate" not in first["phases"]
    # A candidate that does not import is never timed.
    assert syntax["status"] == "error" and "timing" not in syntax["phases"]


def test_a_timed_case_tells_its_calibration_from_its_check():
    clock = PhaseClock()
    clock.timed_case({"elapsed_s": 2.0}, total_s=5.0, reference_s=1.0, calibrate_s=0.5)
    phases = clock.to_json()
    assert phases["timing"] == 2.0 and phases["calibrate"] == 0.5
    assert phases["benchmark_check"] == pytest.approx(1.5)


def test_the_batch_account_averages_the_phases_and_sums_the_serial_ones():
    account = batch_account(
        [{"correctness": 1.0, "timing": 2.0, "import": 4.0}, {"correctness": 3.0}]
    )
    assert account["candidates"] == 2
    assert account["mean_s"] == {"import": 2.0, "correctness": 2.0, "timing": 1.0}
    assert account["serial_s"] == 3.0  # the import runs beside others' judging
    lines = "\n".join(account_lines(account, wall_s=8.0))
    assert "correctness" in lines and "serial sum" in lines and "4.000" in lines  # 8 s / 2
    assert batch_account([]) == {"candidates": 0, "mean_s": {}, "serial_s": 0.0}


def test_a_clock_is_the_threads_only_while_it_works_for_its_candidate():
    clock = PhaseClock()
    assert current_clock() is None
    with working_for(clock):
        assert current_clock() is clock
        with working_for(None):
            assert current_clock() is None
        assert current_clock() is clock
    assert current_clock() is None
    clock.timed_case({"elapsed_s": 2.0, "wall_s": {"generate": 0.5, "other": 1}}, 3.5, 1.0)
    phases = clock.to_json()
    assert phases["timing"] == 2.0 and phases["timing_generate"] == 0.5
    assert phases["benchmark_check"] == 0.5  # 3.5 s less the loop and the reference's wait
    assert "timing_other" not in phases


def test_pausing_the_other_workers_walks_their_trees_and_stops_them_all(monkeypatch):
    """Before each timed case the batch stops every other candidate's worker, finding each
    from its own tree: no reading of every process on the host (25 ms of the critical path on
    a GPU host) where the kernel lists each process's children."""
    import subprocess
    import sys

    from pytest_kernelboard.supervisor import pausing, proctree
    from pytest_kernelboard.supervisor.proctree import process_state, read_snapshot

    readings = []

    def counted():
        readings.append(1)
        return read_snapshot()

    monkeypatch.setattr(proctree, "read_snapshot", counted)
    # Processes that read as workers: their command lines name the worker's module.
    sleeper = [
        sys.executable,
        "-c",
        "import time; time.sleep(60)",
        "pytest_kernelboard.worker.main",
    ]
    workers = [subprocess.Popen(sleeper) for _ in range(3)]
    try:
        # A process just started may not show its new command line yet (Popen returns once
        # exec has begun): wait until each reads as a worker, as a judge's workers do long
        # before any case of theirs is timed.
        deadline = time.monotonic() + 10
        for worker in workers:
            cmdline = Path(f"/proc/{worker.pid}/cmdline")
            while b"pytest_kernelboard.worker.main" not in cmdline.read_bytes():
                assert time.monotonic() < deadline, "a worker never showed its command line"
                time.sleep(0.005)
        with pausing.paused([w.pid for w in workers]) as stopped:
            assert sorted(stopped) == sorted(w.pid for w in workers)
            assert all(process_state(w.pid) in ("T", "t") for w in workers)
        assert readings == []
        assert all(process_state(w.pid) not in ("T", "t") for w in workers)  # going on again
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
