"""`kernelboard site build --local RUN.json`: a local run previewed on the site, marked local and
unranked, never among the ranking's rows, never filed under results/."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import re
from pathlib import Path

import pytest

from pytest_kernelboard import cli
from site_generator.build import build_site
from site_generator.local import LOCAL_MARK, LocalRunError

FIXTURE = Path(__file__).parent / "fixtures" / "site"
NOW = dt.datetime(2025, 6, 15, 12, 0, tzinfo=dt.UTC)
LOCAL_ID, CPU_ID = "e" * 32, "f" * 32


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def local_document(run_id: str, device: str | None = None) -> dict:
    """What `pytest ... --kb-results` writes: alice's first vecadd run (12 µs), made afresh by newbie."""
    (filed,) = (FIXTURE / "results" / "vecadd" / "H100").glob("*-alice-42c20ca8*.json")
    doc = json.loads(filed.read_text())
    for key in ("provenance", "evaluation_index"):
        doc.pop(key, None)
    doc["run_id"], doc["created_at"] = run_id, "2025-06-14T09:30:00Z"
    doc["evaluations"][0]["submission"]["author"] = "newbie"
    if device is not None:
        doc["environment"] = {"device": device, "device_kind": "cpu", "python": "3.11.9"}
    reference = copy.deepcopy(doc["evaluations"][0])
    reference["submission"].update(author="reference", is_reference=True)
    doc["evaluations"].append(reference)  # a run documents its reference too; not previewed
    return doc


@pytest.fixture(scope="module")
def preview(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("local")
    h100, cpu = folder / "h100.json", folder / "cpu.json"
    h100.write_text(json.dumps(local_document(LOCAL_ID)))
    cpu.write_text(json.dumps(local_document(CPU_ID, device="CPU")))
    before = tree_digest(FIXTURE / "results")
    out = folder / "_site"
    stats = build_site(FIXTURE, out, now=NOW, local=[h100, cpu])
    assert stats["local"] == 2 and stats["runs"] == 17
    assert tree_digest(FIXTURE / "results") == before, "a preview never writes under results/"
    return out


def test_the_local_run_is_marked_on_the_leaderboard_and_never_ranked(preview):
    html = (preview / "lb" / "vecadd" / "index.html").read_text()
    assert 'id="local-note"' in html and LOCAL_MARK in html
    h100 = re.search(r'<section class="panel" id="dev-H100".*?</section>', html, re.S).group(0)
    (local_rows,) = re.findall(r'<table class="compact local-runs">.*?</table>', h100, re.S)
    assert 'data-author="newbie"' in local_rows and "would rank #3 of 6" in local_rows
    ranking = re.search(r'<table class="ranking sortable".*?</table>', h100, re.S).group(0)
    assert "newbie" not in ranking
    authors = re.findall(r'<tr class="entry[^"]*" data-rank="\d+" data-author="([^"]+)"', h100)
    assert authors == ["alice", "bob", "carol", "dave", "erin"]
    assert 'data-author="reference"' not in local_rows  # the run's reference is not a submission


def test_a_device_the_leaderboard_does_not_list_gets_its_own_local_tab(preview):
    html = (preview / "lb" / "vecadd" / "index.html").read_text()
    tabs = re.findall(r'data-panel="(dev-[^"]+)"', html)
    assert tabs == ["dev-H100", "dev-A100", "dev-CPU"]
    cpu = re.search(r'<section class="panel" id="dev-CPU".*?</section>', html, re.S).group(0)
    assert 'data-author="newbie"' in cpu and "CPU is not a listed device" in cpu
    assert 'table class="ranking' not in cpu


def test_the_local_run_page_says_local_and_unranked(preview):
    page = (preview / "lb" / "vecadd" / "runs" / f"local-{LOCAL_ID}-0.html").read_text()
    assert 'id="local-note"' in page
    assert f'<dt>Rank</dt><dd><span class="local-mark">{LOCAL_MARK}</span>' in page
    assert "it would rank #3 of 6" in page
    assert (preview / "lb" / "vecadd" / "runs" / f"local-{CPU_ID}-0.html").is_file()
    assert not (preview / "authors" / "newbie.html").exists()


def test_exports_and_the_dataset_hold_only_filed_runs(preview):
    for device in ("H100", "A100"):
        export = json.loads((preview / "data" / "vecadd" / f"{device}.json").read_text())
        assert "newbie" not in [r["author"] for r in export["ranking"]]
    dataset = (preview / "data" / "dataset.jsonl").read_text()
    assert len(dataset.splitlines()) == 17 and "newbie" not in dataset


def test_an_unknown_leaderboard_is_refused_naming_the_file(tmp_path):
    doc = local_document(LOCAL_ID)
    doc["evaluations"][0]["leaderboard"]["name"] = "nosuch"
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(LocalRunError, match=rf"{path}: evaluation 0 is for leaderboard 'nosuch'"):
        build_site(FIXTURE, tmp_path / "out", now=NOW, local=[path])


def test_cli_preview_and_its_errors(tmp_path, capsys):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(local_document(LOCAL_ID)))
    out = tmp_path / "site"
    args = ["site", "build", "--root", str(FIXTURE), "--out", str(out), "--local", str(path)]
    assert cli.main([*args, "--now", "2025-06-15T12:00:00Z"]) == 0
    assert "previewing 1 local runs, marked local and unranked" in capsys.readouterr().out
    assert (out / "lb" / "vecadd" / "runs" / f"local-{LOCAL_ID}-0.html").is_file()

    path.write_text('{"schema": "kernelboard.run/1"}')
    assert cli.main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kernelboard site build: {path}:") and "Traceback" not in err


def test_every_link_of_the_preview_resolves(preview):
    from test_site_build import Links

    for path in preview.rglob("*.html"):
        parser = Links()
        parser.feed(path.read_text())
        for url in parser.urls:
            target = url.split("#", 1)[0]
            if target and not re.match(r"^[a-z]+:", target):
                assert (path.parent / target).resolve().is_file(), f"{path}: broken link {url}"
