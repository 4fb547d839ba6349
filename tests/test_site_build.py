"""The static site built from the fixture store: pages, exports, and no JavaScript needed."""

from __future__ import annotations

import datetime as dt
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pytest_kernelboard.spec.discovery import load_catalog
from site_generator.build import BuildError, build_site, status_of

FIXTURE = Path(__file__).parent / "fixtures" / "site"
NOW = dt.datetime(2025, 6, 15, 12, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("build") / "_site"
    stats = build_site(FIXTURE, out, now=NOW)
    assert stats["runs"] == 17 and stats["skipped"] == 0
    return out


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("href", "src") and value:
                self.urls.append(value)


def page(site: Path, rel: str) -> str:
    return (site / rel).read_text()


def test_index_lists_every_leaderboard(site):
    html = page(site, "index.html")
    for name in load_catalog(FIXTURE).tasks:
        assert f'data-leaderboard="{name}"' in html
    assert "closing in 5 days" in html and ">closed<" in html and ">open<" in html
    assert html.count('class="medal gold"') == 3  # vecadd H100, vecadd A100, softmax H100


def test_every_local_link_resolves_and_nothing_is_fetched_from_the_network(site):
    pages = list(site.rglob("*.html"))
    assert len(pages) > 20
    for path in pages:
        parser = Links()
        parser.feed(path.read_text())
        for url in parser.urls:
            if url.startswith("https://github.com/"):
                continue  # pull-request links
            assert not re.match(r"^[a-z]+:|^//", url), f"{path}: external URL {url}"
            target = url.split("#", 1)[0]
            if target:
                assert (path.parent / target).resolve().is_file(), f"{path}: broken link {url}"
    fetch = re.compile(r"""(url\(|@import|src=|href=|fetch\(|XMLHttpRequest)\s*["']?(https?:)?//""")
    for asset in (site / "static").iterdir():
        assert not fetch.search(asset.read_text()), f"{asset.name} loads something from the network"


def test_leaderboard_reads_without_javascript(site):
    html = page(site, "lb/vecadd/index.html")
    # every device section is in the page and none is hidden until the script runs
    assert re.findall(r'<section class="panel" id="(dev-[^"]+)"', html) == ["dev-H100", "dev-A100"]
    assert "hidden" not in re.search(r'<section class="panel"[^>]*>', html).group(0)
    assert html.count('<svg class="chart history"') == 2
    assert html.count('<svg class="chart fastp"') == 2
    assert 'class="heatmap sortable"' in html
    assert "<h2>Problem</h2>" in html and "<code>custom_kernel(data)</code>" in html
    authors = re.findall(r'<tr class="entry[^"]*" data-rank="\d+" data-author="([^"]+)"', html)
    assert authors[:5] == ["alice", "bob", "carol", "dave", "erin"]
    assert authors[5:] == ["carol", "alice", "bob"]
    assert "≈ tied with #1" in html
    assert 'class="baseline"' in html
    assert "fast<sub>1</sub>" in html and "#103" in html


def test_markdown_is_escaped_not_trusted(tmp_path):
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(FIXTURE / "leaderboards", root / "leaderboards")
    task = root / "leaderboards" / "identity" / "task.yml"
    task.write_text(task.read_text().replace("(a warm-up problem).", "<script>alert(1)</script>"))
    build_site(root, tmp_path / "out", now=NOW)
    html = (tmp_path / "out" / "lb" / "identity" / "index.html").read_text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html


def test_test_mode_runs_show_without_timings(site):
    html = page(site, "lb/identity/index.html")
    assert "No ranked runs on CPU yet." in html
    assert "Recent runs that are not ranked (2)" in html
    runs = sorted((site / "lb" / "identity" / "runs").glob("*.html"))
    assert len(runs) == 2
    run = runs[0].read_text()
    assert "not ranked" in run and 'id="code"' in run  # open code: shown without a deadline


def test_code_only_after_the_deadline(site):
    hidden = page(site, "lb/vecadd/runs/28fd25e7149dead27783b2df4aa98211-0.html")
    assert 'id="code"' not in hidden
    assert "The code is shown after the deadline, 2025-06-20 12:00 UTC." in hidden
    shown = page(site, "lb/softmax/runs/1fa5b83d397986f6621e717a723c68f7-0.html")
    assert '<div class="code" id="code"><div class="hl"><table class="hltable">' in shown
    assert '<span class="k">return</span>' in shown
    # the reproduction capsule and the rerun command
    assert (
        "pytest submissions/softmax/bob/submission.py --kb-mode leaderboard --kb-replay results/softmax/H100/"
        in shown
    )
    for needle in ("NVIDIA H100 80GB HBM3", "1980 MHz", "550.54.15", "3f2a9c1", "<dt>seeds</dt>"):
        assert needle in shown
    assert shown.count('<svg class="spread"') == 2


def test_code_is_public_once_the_deadline_passed(tmp_path):
    out = tmp_path / "later"
    build_site(FIXTURE, out, now=dt.datetime(2025, 7, 1, tzinfo=dt.UTC))
    html = (out / "lb/vecadd/runs/28fd25e7149dead27783b2df4aa98211-0.html").read_text()
    assert 'id="code"' in html
    assert ">closed<" in (out / "index.html").read_text()


def test_author_page(site):
    html = page(site, "authors/alice.html")
    for board in ("vecadd", "softmax"):
        assert f">{board}</a>" in html
    assert html.count("<tr><td>") == 3  # vecadd on H100 and A100, softmax on H100
    assert "5 runs on 3 leaderboards" in html


def test_exports(site):
    board = json.loads(page(site, "data/vecadd/H100.json"))
    assert [r["author"] for r in board["ranking"]] == ["alice", "bob", "carol", "dave", "erin"]
    assert board["ranking"][1]["tied_with_above"] is True
    assert board["reference"]["score_us"] == 40.0
    assert board["ranking"][3]["case_speedups"]["size=4096"] == 7.5
    assert len(board["history"]) == 6

    lines = [json.loads(line) for line in page(site, "data/dataset.jsonl").splitlines()]
    assert len(lines) == 17
    by_board = {}
    for line in lines:
        by_board.setdefault(line["leaderboard"], []).append(line)
        assert {"code", "leaderboard", "device", "cases", "status", "sha256"} <= set(line)
    assert all(line["code"] is None for line in by_board["vecadd"])  # before the deadline
    assert all("def custom_kernel" in line["code"] for line in by_board["softmax"])
    assert all(line["code"] for line in by_board["identity"])  # open code
    timed = [c for c in by_board["softmax"][0]["cases"] if c["kind"] == "benchmark"]
    assert timed[0]["timing"]["median_us"] > 0 and timed[0]["speedup"] > 0
    untimed = [c for c in by_board["identity"][0]["cases"] if c["kind"] == "benchmark"]
    assert untimed[0]["timing"] is None


def test_status_words():
    catalog = load_catalog(FIXTURE)
    vecadd = catalog.get("vecadd")
    assert status_of(vecadd, dt.datetime(2025, 6, 19, 13, tzinfo=dt.UTC)) == (
        "closing",
        "closing in 1 day",
    )
    assert status_of(vecadd, dt.datetime(2025, 6, 21, tzinfo=dt.UTC)) == ("closed", "closed")
    assert status_of(catalog.get("identity"), NOW) == ("open", "open")


def test_refuses_to_clear_a_folder_it_did_not_make(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(BuildError, match="refusing"):
        build_site(FIXTURE, precious, now=NOW)
    assert (precious / "notes.txt").read_text() == "keep me"


def test_rebuild_replaces_the_previous_site(site, tmp_path):
    out = tmp_path / "again"
    build_site(FIXTURE, out, now=NOW)
    (out / "stale.html").write_text("old")
    build_site(FIXTURE, out, now=NOW)
    assert not (out / "stale.html").exists()


def test_parallel_build_matches_serial(tmp_path, monkeypatch):
    from site_generator import build, data

    serial, parallel = tmp_path / "serial", tmp_path / "parallel"
    build_site(FIXTURE, serial, now=NOW, workers=1)
    monkeypatch.setattr(data, "MIN_RECORDS_PER_WORKER", 1)
    monkeypatch.setattr(build, "MIN_PAGES_PER_WORKER", 1)
    stats = build_site(FIXTURE, parallel, now=NOW, workers=2)
    assert stats["workers"] == 2
    files = sorted(p.relative_to(serial) for p in serial.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(parallel) for p in parallel.rglob("*") if p.is_file())
    for rel in files:
        assert (serial / rel).read_bytes() == (parallel / rel).read_bytes(), rel


def test_cli_build(tmp_path, capsys):
    import argparse

    from site_generator import cli

    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers(dest="command"))
    out = tmp_path / "cli-site"
    args = parser.parse_args(
        ["site", "build", "--root", str(FIXTURE), "--out", str(out), "--now", "2025-06-15T12:00:00"]
    )
    assert args.func(args) == 0
    assert "17 runs" in capsys.readouterr().out
    assert (out / "index.html").is_file() and (out / ".nojekyll").is_file()


# -- what a first visitor reads: tile summaries, the tolerance once, the per-case table ----------


@pytest.mark.parametrize(
    "description, summary",
    [
        ("`out = x if x > 0 else slope * x`", "out = x if x > 0 else slope * x"),
        ("out = x if x > 0 else slope * x", "out = x if x > 0 else slope * x"),
        ("A *fast* `a_b * c`\nsecond line.\n\nNext paragraph.", "A fast a_b * c second line."),
        ("# Title\n\nThe statement, [linked](https://x.invalid).", "The statement, linked."),
        ("# Only a title", "Only a title"),
        ("", ""),
    ],
)
def test_tile_summary_is_the_markdown_rendered_to_text(description, summary):
    from site_generator.build import _markdown
    from site_generator.statement import summary_line

    assert summary_line(_markdown(), description) == summary


def test_index_tiles_keep_the_characters_of_code(site):
    html = page(site, "index.html")
    tile = re.search(r'data-leaderboard="softmax".*?<p class="summary">([^<]*)</p>', html, re.S)
    assert (
        tile.group(1)
        == "Row-wise softmax of a float32 matrix of shape (rows, cols), of the scaled input x * scale."
    )


def test_the_tolerance_is_shown_once(site, tmp_path):
    # the statement says it: task.yml's tolerance note is not repeated
    assert page(site, "lb/vecadd/index.html").lower().count("tolerance") == 1
    # the repository's own vectoradd, the page the problem was seen on
    repo = Path(__file__).resolve().parents[1]
    build_site(repo, tmp_path / "repo-site", now=NOW, workers=1)
    html = (tmp_path / "repo-site" / "lb" / "vectoradd" / "index.html").read_text()
    assert html.lower().count("tolerance") == 1
    # a statement without one still shows the note
    html = (tmp_path / "repo-site" / "lb" / "histogram" / "index.html").read_text()
    assert '<p class="muted tolerance">Tolerance: exact (int32 counts)</p>' in html


def test_case_table_shows_what_ranks(tmp_path):
    """The run page's per-case times are the medians that rank, with the reference's and their
    ratio, as in the pull-request comment."""
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    (record,) = (root / "results" / "softmax" / "H100").glob("*-bob-*.json")
    doc = json.loads(record.read_text())
    case = next(c for c in doc["evaluations"][0]["cases"] if c["kind"] == "benchmark")
    case["timing"].update(statistic="median", rank_us=468.7, rank_ci95_us=[466.0, 471.0])
    case["reference_timing"].update(statistic="median", rank_us=440.6, rank_ci95_us=[438.0, 443.0])
    record.write_text(json.dumps(doc))
    build_site(root, tmp_path / "out", now=NOW)
    html = (tmp_path / "out" / "lb" / "softmax" / "runs" / f"{doc['run_id']}-0.html").read_text()
    row = re.search(
        r'<tr class="case-passed"><td class="case"[^>]*><span[^>]*>benchmark.*?</tr>', html
    )
    cells = re.sub(r"<[^>]+>", "|", row.group(0))
    assert "468.7 µs|466 µs – 471 µs" in cells and "440.6 µs|438 µs – 443 µs" in cells
    assert "|0.94×|" in cells
    assert "Times are medians (the statistic that ranks)" in html
