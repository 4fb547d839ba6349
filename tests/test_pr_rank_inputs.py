"""The PR path never drops a rank silently: what the rank line needs and cannot read is an
error naming the file, and the comment says so where the rank would be."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_pr_comment import make_gate, make_run

from pytest_kernelboard.cli import main
from pytest_kernelboard.errors import KernelboardError
from pytest_kernelboard.pr import comment, pipeline
from pytest_kernelboard.pr.comment import DeviceOutcome
from pytest_kernelboard.spec.discovery import reload_catalog

FIXTURE = Path(__file__).parent / "fixtures" / "pr" / "repo"


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    reload_catalog(root)  # the catalog is cached per root: this one is fresh
    return root


def test_readable_inputs_come_back(repo):
    tasks, records = pipeline.rank_inputs(repo, "tiny")
    assert "tiny" in tasks and records == []


def test_an_unreadable_record_is_named(repo):
    folder = repo / "results" / "tiny" / "CPU"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("{ not json")
    with pytest.raises(pipeline.RankInputError, match=r"results/tiny/CPU/broken\.json") as caught:
        pipeline.rank_inputs(repo, "tiny")
    assert isinstance(caught.value, KernelboardError)


def test_a_leaderboard_that_does_not_load_is_named(repo):
    task_yml = repo / "leaderboards" / "tiny" / "task.yml"
    task_yml.write_text("files: [\n")
    reload_catalog(repo)
    with pytest.raises(
        pipeline.RankInputError, match=r"leaderboard 'tiny' does not load: .*task\.yml"
    ):
        pipeline.rank_inputs(repo, "tiny")
    pipeline.rank_inputs(repo, "closed")  # another leaderboard's break is not this PR's


def test_the_comment_says_why_its_rank_is_missing():
    outcome = DeviceOutcome("CPU", make_run())
    body = comment.render_comment(
        make_gate(), [outcome], rank_problem="unreadable result records: results/x.json: bad"
    )
    assert "**Rank:** unavailable (unreadable result records: results/x.json: bad)" in body
    assert "**Score** (last of the benchmark cases):" in body  # the results are still there


def test_pr_comment_shows_an_unreadable_record_in_place_of_the_rank(repo, tmp_path, capsys):
    folder = repo / "results" / "tiny" / "CPU"
    folder.mkdir(parents=True)
    (folder / "broken.json").write_text("[")
    gate_path = tmp_path / "gate.json"
    gate_path.write_text(json.dumps(make_gate().to_json()))
    verified = tmp_path / "verified"
    pipeline.save_outcomes([DeviceOutcome("CPU", make_run())], verified)
    out = tmp_path / "comment.md"
    args = ["pr", "comment", "--root", str(repo), "--gate", str(gate_path)]
    code = main([*args, "--verified", str(verified), "--out", str(out)])
    assert code == 0
    body = out.read_text()
    assert "**Rank:** unavailable (unreadable result records: " in body
    assert "broken.json" in body
    assert "no ranks in the comment" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("index", "problem"),
    [
        ("{ nope", r"outcomes\.json is not JSON"),
        ('{"device": "CPU"}', r"outcomes\.json must be a list of device outcomes"),
        ('[{"run": null}]', r"outcomes\.json: entry 0 has no 'device' name"),
    ],
)
def test_a_broken_outcomes_index_is_named(tmp_path, capsys, index, problem):
    (tmp_path / "outcomes.json").write_text(index)
    with pytest.raises(pipeline.PipelineError, match=problem):
        pipeline.load_outcomes(tmp_path)
    gate_path = tmp_path / "gate.json"
    gate_path.write_text(json.dumps(make_gate().to_json()))
    code = main(["pr", "comment", "--gate", str(gate_path), "--verified", str(tmp_path)])
    assert code == 1 and "outcomes.json" in capsys.readouterr().err  # no traceback
