"""Rankings derived from records: eligibility (one rule), best per author, order, ties."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from pytest_kernelboard import rankings
from pytest_kernelboard.results.store import iter_records
from pytest_kernelboard.spec.discovery import load_catalog

FIXTURE = Path(__file__).parent / "fixtures" / "site"


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(FIXTURE)


@pytest.fixture(scope="module")
def records():
    return [
        (p.relative_to(FIXTURE).as_posix(), json.loads(p.read_text()))
        for p in iter_records(FIXTURE)
    ]


def make_run(
    author="ann", score=10.0, ci=(9.5, 10.5), device="H100", created="2025-05-01T00:00:00Z", **kw
):
    run = {
        "run_id": kw.get("run_id", f"{author:0<8}".encode().hex()[:32].ljust(32, "0")),
        "created_at": created,
        "mode": kw.get("mode", "leaderboard"),
        "environment": {"device": device},
        "evaluations": [
            {
                "leaderboard": {"name": kw.get("board", "vecadd")},
                "submission": {"author": author, "is_reference": kw.get("reference", False)},
                "summary": {
                    "status": kw.get("status", "passed"),
                    "score_us": score,
                    "score_ci95_us": list(ci) if ci else None,
                },
            }
        ],
    }
    return run


def test_fixture_ranking_on_h100(catalog, records):
    ranking = rankings.rank_entries(records, catalog.get("vecadd"), "H100")
    assert [e.author for e in ranking] == ["alice", "bob", "carol", "dave", "erin"]
    assert [e.rank for e in ranking] == [1, 2, 3, 4, 5]
    assert [e.medal for e in ranking] == ["gold", "silver", "bronze", None, None]
    assert [e.tied_with_above for e in ranking] == [False, True, False, False, False]
    assert ranking[0].score_us == 10.0  # alice's better, later run counts
    assert ranking[1].gap_us == pytest.approx(0.1)
    assert ranking[1].gap_pct == pytest.approx(1.0)
    assert ranking[0].candidate.payload.endswith(".json")  # the record's path


def test_fixture_ranking_per_device(catalog, records):
    assert [e.author for e in rankings.rank_entries(records, catalog.get("vecadd"), "A100")] == [
        "carol",
        "alice",
        "bob",
    ]
    assert rankings.rank_entries(records, catalog.get("identity"), "CPU") == []  # test mode only


def test_runs_after_the_deadline_are_not_ranked(catalog, records):
    ranking = rankings.rank_entries(records, catalog.get("softmax"), "H100")
    assert [e.author for e in ranking] == ["bob", "alice"]  # carol's 40 us came after 2025-06-01


@pytest.mark.parametrize(
    "change, ranked",
    [
        ({}, True),
        ({"mode": "test"}, False),
        ({"mode": "benchmark"}, False),
        ({"status": "failed"}, False),
        ({"score": None}, False),
        ({"device": "L4"}, False),  # not listed by the leaderboard
        ({"device": "CPU"}, False),  # CPU counts only when listed
        ({"reference": True}, False),
        ({"board": "softmax"}, False),  # another leaderboard's evaluation
        ({"created": "2025-06-20T12:00:00Z"}, True),  # at the deadline
        ({"created": "2025-06-20T12:00:01Z"}, False),  # after it
        ({"created": "2025-06-20T14:00:00+02:00"}, True),  # offsets count
    ],
)
def test_is_ranked(catalog, change, ranked):
    run = make_run(**change)
    assert rankings.is_ranked(run, run["evaluations"][0], catalog.get("vecadd")) is ranked


def test_cpu_counts_when_listed(catalog):
    run = make_run(device="CPU", board="identity")
    assert rankings.is_ranked(run, run["evaluations"][0], catalog.get("identity"))


def test_no_deadline_means_always_open(catalog):
    task = dataclasses.replace(catalog.get("vecadd"), deadline=None)
    run = make_run(created="2099-01-01T00:00:00Z")
    assert rankings.is_ranked(run, run["evaluations"][0], task)


def test_best_per_author_and_equal_scores(catalog):
    task = catalog.get("vecadd")
    runs = [
        make_run("ann", 12.0, run_id="a" * 32),
        make_run("ann", 11.0, run_id="b" * 32, created="2025-05-02T00:00:00Z"),
        make_run("ben", 11.0, run_id="c" * 32, created="2025-05-01T12:00:00Z"),
    ]
    ranking = rankings.rank_entries(runs, task, "H100")
    # equal scores: the earlier run ranks first
    assert [(e.author, e.score_us) for e in ranking] == [("ben", 11.0), ("ann", 11.0)]
    assert ranking[1].gap_us == 0.0


def test_ties_need_overlapping_intervals(catalog):
    task = catalog.get("vecadd")
    runs = [
        make_run("a", 10.0, (9.9, 10.1), run_id="1" * 32),
        make_run("b", 10.2, (10.1, 10.3), run_id="2" * 32),  # touches: tied
        make_run("c", 10.5, (10.4, 10.6), run_id="3" * 32),  # apart: not tied
        make_run("d", 10.6, None, run_id="4" * 32),  # no interval: never tied
    ]
    ranking = rankings.rank_entries(runs, task, "H100")
    assert [e.tied_with_above for e in ranking] == [False, True, False, False]


def test_intervals_overlap():
    assert rankings.intervals_overlap((1, 2), (2, 3))
    assert not rankings.intervals_overlap((1, 2), (2.1, 3))
    assert not rankings.intervals_overlap(None, (1, 2))


def test_would_rank(catalog, records):
    task = catalog.get("vecadd")
    ranking = rankings.rank_entries(records, task, "H100")
    new = make_run("zed", 12.0, (11.9, 12.1))
    projection = rankings.would_rank(new, 0, ranking)
    assert projection.rank == 3 and projection.total == 6
    assert projection.gap_to_first_us == pytest.approx(2.0)
    assert projection.gap_to_first_pct == pytest.approx(20.0)
    assert projection.previous_rank is None and projection.improves_own_best

    faster = make_run("carol", 9.0, (8.9, 9.1))
    projection = rankings.would_rank(faster, 0, ranking)
    assert (projection.rank, projection.previous_rank, projection.total) == (1, 3, 5)
    assert projection.gap_to_first_us == 0.0

    slower = make_run("alice", 30.0, (29, 31))
    projection = rankings.would_rank(slower, 0, ranking)
    assert not projection.improves_own_best and projection.rank == 1

    close = make_run("yan", 10.05, (9.95, 10.15))
    assert set(rankings.would_rank(close, 0, ranking).tied_with) == {"alice", "bob"}


def test_rank_does_not_mutate_input(catalog, records):
    before = copy.deepcopy(records)
    rankings.rank_entries(records, catalog.get("vecadd"), "H100")
    assert records == before
