"""Runs timed by different timing methods are never ranked against each other: rankings
groups them (`by_method`), and the pull-request comment ranks a new run among filed runs of its
own method (the site's side is in tests/test_site_trust.py)."""

from __future__ import annotations

from test_pr_comment import TASK, make_gate, make_run

from pytest_kernelboard import rankings
from pytest_kernelboard.pr import comment


def with_method(run: dict, method: int | None) -> dict:
    if method is not None:
        run["harness"] = {"version": "0.1.0", "timing_method": method}
    return run


def test_candidates_carry_their_method_and_group_newest_first():
    runs = [
        with_method(make_run("bob", 5.0, run_id="2"), 3),
        with_method(make_run("carol", 20.0, run_id="3"), 4),
        with_method(make_run("dave", 1.0, run_id="4"), None),
        with_method(make_run("erin", 30.0, run_id="5"), 4),
    ]
    found = rankings.candidates(runs, TASK, "CPU")
    assert [c.timing_method for c in found] == [3, 4, None, 4]
    groups = rankings.by_method(found)
    assert list(groups) == [4, 3, None]
    assert [c.author for c in groups[4]] == ["carol", "erin"]
    assert rankings.timing_method({"harness": {"timing_method": True}}) is None
    assert rankings.timing_method({}) is None


def test_the_pr_comment_ranks_a_run_among_its_own_method_only():
    records = [
        ("r1", with_method(make_run("bob", 5.0, run_id="2"), 3)),  # faster, but older method
        ("r2", with_method(make_run("carol", 20.0, run_id="3"), 4)),
        ("r3", make_run("dave", 1.0, run_id="4")),  # no method recorded
    ]
    new = with_method(make_run("alice", 10.0), 4)
    body = comment.render_comment(
        make_gate(), [comment.DeviceOutcome("CPU", new)], tasks={"tiny": TASK}, records=records
    )
    assert "**Rank it would take:** 1 of 2" in body
    assert "2 filed entries timed by another timing method not compared" in body
    # all of one method (or none recorded): ranked together, as before
    same = [(key, with_method(run, 4)) for key, run in records]
    body = comment.render_comment(
        make_gate(), [comment.DeviceOutcome("CPU", new)], tasks={"tiny": TASK}, records=same
    )
    assert "**Rank it would take:** 3 of 4" in body and "not compared" not in body
