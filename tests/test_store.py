"""`kernelboard results add`: validation, layout, append-only filing, clear rejections."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.results import store

FIXTURE = Path(__file__).parent / "fixtures" / "site"
SAMPLE = FIXTURE / "results" / "softmax" / "H100"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with the fixture leaderboards and an empty results store."""
    shutil.copytree(FIXTURE / "leaderboards", tmp_path / "leaderboards")
    return tmp_path


def sample_run() -> dict:
    path = sorted(SAMPLE.glob("*-bob-*.json"))[0]
    doc = json.loads(path.read_text())
    doc.pop("evaluation_index", None)
    doc.pop("provenance", None)
    doc["run_id"] = "0" * 31 + "1"
    return doc


def two_evaluation_run() -> dict:
    run = sample_run()
    second = copy.deepcopy(run["evaluations"][0])
    second["submission"]["author"] = "zoe"
    second["submission"]["sha256"] = hashlib.sha256(b"zoe").hexdigest()
    run["evaluations"].append(second)
    return run


def snapshot(root: Path) -> dict[str, bytes]:
    base = root / "results"
    if not base.exists():
        return {}
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def add(root: Path, doc_or_text, *extra: str, name: str = "run.json") -> int:
    from pytest_kernelboard.results.store import cmd_add, register

    path = root / name
    path.write_text(doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text))
    import argparse

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["results", "add", str(path), "--root", str(root), *extra])
    return cmd_add(args)


def test_files_one_record_per_evaluation(repo: Path, capsys):
    run = two_evaluation_run()
    assert add(repo, run, "--pr", "7", "--repository", "o/n", "--commit", "abc") == 0
    files = sorted((repo / "results" / "softmax" / "H100").glob("*.json"))
    assert [f.name for f in files] == [
        f"20250510T120000Z-bob-{run['run_id']}-0.json",
        f"20250510T120000Z-zoe-{run['run_id']}-1.json",
    ]
    for index, path in enumerate(files):
        doc = json.loads(path.read_text())
        assert len(doc["evaluations"]) == 1
        assert doc["evaluation_index"] == index
        assert doc["provenance"] == {"pull_request": 7, "repository": "o/n", "commit": "abc"}
    assert "filed results/softmax/H100/" in capsys.readouterr().out


def test_stores_code_by_hash_when_the_file_matches(repo: Path):
    code = b"def custom_kernel(data):\n    return data.softmax(-1)\n"
    target = repo / "submissions" / "softmax" / "bob" / "submission.py"
    target.parent.mkdir(parents=True)
    target.write_bytes(code)
    run = sample_run()
    run["evaluations"][0]["submission"]["sha256"] = hashlib.sha256(code).hexdigest()
    filed = store.add_run(repo, run)
    assert filed[0].code is not None
    assert (repo / filed[0].code).read_bytes() == code
    assert store.code_index(repo)[hashlib.sha256(code).hexdigest()] == repo / filed[0].code


def test_record_names_never_collide():
    run = sample_run()
    other = copy.deepcopy(run)
    other["run_id"] = "f" * 32  # a second PR, same second, same author
    assert store.record_relpath(run, 0) != store.record_relpath(other, 0)
    assert store.record_relpath(run, 0).parts[:3] == ("results", "softmax", "H100")


def test_device_names_are_made_file_safe():
    assert store.slug("RTX 4090") == "RTX-4090"
    assert store.slug("../etc") == "etc"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("environment"), "'environment' is a required property"),
        (lambda d: d["evaluations"][0]["cases"][1]["timing"].update(mean_us=-3.0), "mean_us"),
        (lambda d: d["evaluations"][0]["summary"].update(score_us=-1.0), "score_us"),
        (lambda d: d["evaluations"][0]["cases"][0].update(duration_s=-0.5), "duration_s"),
        (
            lambda d: d["evaluations"][0]["leaderboard"].update(name="nope"),
            "unknown leaderboard 'nope'",
        ),
        (
            lambda d: d["environment"].update(device="A100"),
            "device 'A100' is not listed by leaderboard 'softmax'",
        ),
        (lambda d: d["environment"].update(device="CPU"), "device 'CPU' is not listed"),
        (lambda d: d.update(evaluations=[]), "no evaluations"),
    ],
)
def test_rejects_bad_runs_without_touching_the_store(repo: Path, capsys, mutate, message):
    assert add(repo, sample_run(), name="first.json") == 0
    before = snapshot(repo)
    doc = two_evaluation_run()
    doc["run_id"] = "a" * 32
    mutate(doc)
    assert add(repo, doc) == 1
    err = capsys.readouterr().err
    assert message in err
    assert "rejected" in err and "nothing was filed" in err
    assert snapshot(repo) == before


def test_rejects_nan(repo: Path, capsys):
    doc = sample_run()
    doc["evaluations"][0]["cases"][1]["timing"]["mean_us"] = float("nan")
    text = json.dumps(doc)  # the standard library writes NaN, which is not JSON
    assert '"mean_us": NaN' in text
    assert add(repo, text) == 1
    assert "not a finite number" in capsys.readouterr().err
    assert snapshot(repo) == {}


def test_rejects_malformed_files(repo: Path, capsys):
    assert add(repo, "{not json") == 1
    assert "cannot read a results document" in capsys.readouterr().err
    assert add(repo, json.dumps({"schema": "kernelboard.run/1"})) == 1
    assert "required property" in capsys.readouterr().err
    assert snapshot(repo) == {}


def test_rejects_a_duplicate_run(repo: Path, capsys):
    run = two_evaluation_run()
    assert add(repo, run) == 0
    before = snapshot(repo)
    assert add(repo, run) == 1
    err = capsys.readouterr().err
    assert "duplicate" in err and "already filed as results/softmax/H100/" in err
    assert snapshot(repo) == before


def test_rejects_the_same_submission_again_under_a_new_run_id(repo: Path, capsys):
    run = sample_run()
    assert add(repo, run) == 0
    before = snapshot(repo)
    again = copy.deepcopy(run)
    again["run_id"] = "b" * 32
    assert add(repo, again) == 1
    assert "duplicate" in capsys.readouterr().err
    assert snapshot(repo) == before


def test_never_overwrites_an_existing_file(repo: Path):
    run = sample_run()
    target = repo / store.record_relpath(run, 0)
    target.parent.mkdir(parents=True)
    target.write_text("someone else's record")
    with pytest.raises(store.StoreError, match="already"):
        store.add_run(repo, run)
    assert target.read_text() == "someone else's record"


def test_check_only_writes_nothing(repo: Path, capsys):
    assert add(repo, sample_run(), "--check") == 0
    assert "would file results/softmax/H100/" in capsys.readouterr().out
    assert snapshot(repo) == {}


def test_iter_records_skips_code(repo: Path):
    store.add_run(repo, two_evaluation_run())
    names = [p.name for p in store.iter_records(repo)]
    assert len(names) == 2 and all(n.endswith(".json") for n in names)


def test_fixture_store_is_what_results_add_produces():
    """Every committed fixture record passes validation and sits where add would put it."""
    from pytest_kernelboard.results.records import read_run
    from pytest_kernelboard.spec.discovery import load_catalog

    catalog = load_catalog(FIXTURE)
    paths = list(store.iter_records(FIXTURE))
    assert len(paths) == 17
    for path in paths:
        doc = read_run(path)
        store.check_run(doc, catalog)
        index = doc["evaluation_index"]
        doc["evaluations"] = [None] * index + doc["evaluations"]
        assert (FIXTURE / store.record_relpath(doc, index)) == path


def test_a_run_for_a_leaderboard_that_no_longer_loads_is_refused_with_its_error(repo: Path, capsys):
    # softmax's folder breaks (a second folder claims its name); the others still load
    task = next((repo / "leaderboards").rglob("softmax/task.yml"))
    twin = repo / "leaderboards" / "elsewhere" / "softmax"
    shutil.copytree(task.parent, twin)
    assert add(repo, sample_run()) == 1
    err = capsys.readouterr().err
    assert "leaderboard 'softmax' does not load" in err and "already used by" in err
    assert snapshot(repo) == {}


def test_two_authors_with_the_same_code_in_one_run_are_two_entries(repo: Path):
    run = sample_run()
    twin = copy.deepcopy(run["evaluations"][0])
    twin["submission"]["author"] = "carol"
    run["evaluations"].append(twin)
    filed = store.add_run(repo, run)
    assert len(filed) == 2
    # The same author's same code twice in one run is still one evaluation too many.
    again = sample_run()
    again["run_id"] = "c" * 32
    again["evaluations"][0]["submission"]["author"] = "dan"
    again["evaluations"].append(copy.deepcopy(again["evaluations"][0]))
    with pytest.raises(store.StoreError, match="repeats an earlier evaluation"):
        store.add_run(repo, again)
