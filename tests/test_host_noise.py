"""A host-bound, noisy leaderboard end to end: every timing stops on its own rule, quickly.

The fixture leaderboard `hostnoise` (tests/fixtures/hostnoise) runs on the CPU; its reference
and its submission both spend a random 0-2 ms on the host in every call, so no timing can pin
its median to the default +/-0.5% within its 10 s budget. Each must stop on `noise_bound` once
its spread is known, for the submission and for the reference timed in the same run.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from pytest_kernelboard.results.records import validate_run
from pytest_kernelboard.stats.stopping import NOISE_BOUND, budget_for_case

FIXTURE = Path(__file__).parent / "fixtures" / "hostnoise"
ALICE = "submissions/hostnoise/alice/submission.py"
WITHIN_S = 3.0  # each timing, warm-up included


@pytest.fixture
def hostnoise_repo(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    shutil.copytree(FIXTURE, pytester.path, dirs_exist_ok=True)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    return pytester.path


def test_every_timing_of_a_host_bound_board_stops_on_its_noise(pytester, hostnoise_repo):
    # The budget is the full 10 s per timing: what stops a case is its noise, not its budget.
    assert budget_for_case(180, 2) == 10.0
    started = time.perf_counter()
    result = pytester.runpytest_subprocess(
        "--kb-mode", "benchmark", "--kb-results", "out.json", ALICE
    )
    wall_s = time.perf_counter() - started
    result.assert_outcomes(passed=3)
    doc = json.loads((hostnoise_repo / "out.json").read_text())
    validate_run(doc)
    authors = [e["submission"]["author"] for e in doc["evaluations"]]
    assert authors == ["alice", "reference"]  # the reference was timed in this run too
    timings = [
        (e["submission"]["author"], c["id"], c["timing"])
        for e in doc["evaluations"]
        for c in e["cases"]
        if c["kind"] == "benchmark"
    ]
    assert len(timings) == 4
    for author, case, timing in timings:
        where = f"{author} {case}: {timing['stop_reason']} after {timing['elapsed_s']} s"
        assert timing["stop_reason"] == NOISE_BOUND, where
        assert timing["elapsed_s"] <= WITHIN_S, where
        assert timing["n"] >= 50, where  # the projection's minimum
        # Why it stopped: reaching +/-0.5% would have taken longer than the budget.
        assert timing["precision_projected_s"] > 10.0, where
        lo, hi = timing["rank_ci95_us"]
        assert (hi - lo) / 2 > 0.005 * timing["rank_us"], where
    spent = ", ".join(f"{t['elapsed_s']:.2f} s ({t['n']} calls)" for _, _, t in timings)
    print(f"hostnoise, benchmark mode, reference timed in the run: {wall_s:.1f} s wall; {spent}")
