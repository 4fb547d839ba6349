"""Numbers a newcomer can trust on the site: a local run on the index with counts that agree,
its page about the user's own code, a Reproduce line in the run's own mode, history axes that
span the data, a FAST column that counts only speedups beyond noise, and runs of an older
timing method ranked apart, never against the current method's."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_kernelboard import TIMING_METHOD
from site_generator import charts
from site_generator.build import build_site

FIXTURE = Path(__file__).parent / "fixtures" / "site"
NOW = dt.datetime(2025, 6, 15, 12, 0, tzinfo=dt.UTC)
CPU_ID, TEST_ID = "c" * 32, "d" * 32


def filed(root: Path, board: str, device: str, author: str) -> Path:
    (path,) = sorted((root / "results" / board / device).glob(f"*-{author}-*.json"))[-1:]
    return path


def local_document(run_id: str, device: str | None = None, mode: str | None = None) -> dict:
    """What `pytest ... --kb-results` writes: alice's first vecadd run, made afresh by newbie."""
    first = sorted((FIXTURE / "results" / "vecadd" / "H100").glob("*-alice-*.json"))[0]
    doc = json.loads(first.read_text())
    for key in ("provenance", "evaluation_index"):
        doc.pop(key, None)
    doc["run_id"], doc["created_at"] = run_id, "2025-06-14T09:30:00Z"
    evaluation = doc["evaluations"][0]
    evaluation["submission"].update(author="newbie", path="mine/submission.py")
    if device is not None:
        doc["environment"] = {"device": device, "device_kind": "cpu", "python": "3.11.9"}
    if mode is not None:
        doc["mode"] = mode
        evaluation["summary"].update(score_us=None, score_ci95_us=None, speedup=None)
    return doc


def section(html: str, panel: str) -> str:
    return re.search(rf'<section class="panel" id="{panel}".*?</section>', html, re.S).group(0)


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.fixture(scope="module")
def preview(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("trust")
    cpu, test = folder / "cpu.json", folder / "test.json"
    cpu.write_text(json.dumps(local_document(CPU_ID, device="CPU")))
    test.write_text(json.dumps(local_document(TEST_ID, mode="test")))
    out = folder / "_site"
    build_site(FIXTURE, out, now=NOW, local=[cpu, test])
    return out


# -- a local run on the index, and counts that agree with what is listed ----------------------


def test_a_local_run_appears_on_the_index(preview):
    html = (preview / "index.html").read_text()
    assert "2 local runs previewed" in text(html)
    tile = html[html.index('data-leaderboard="vecadd"') :]  # the last tile
    links = re.findall(r'<li class="local" data-author="newbie">.*?href="([^"]+)"', tile)
    assert sorted(links) == [
        f"lb/vecadd/runs/local-{CPU_ID}-0.html",
        f"lb/vecadd/runs/local-{TEST_ID}-0.html",
    ]
    for link in links:
        assert (preview / link).is_file()
    # the CPU device (not listed by vecadd) says why it has only a local run
    assert "not a listed device: local preview only" in tile


def test_counts_agree_with_what_is_listed(preview):
    html = (preview / "lb" / "vecadd" / "index.html").read_text()
    cpu = section(html, "dev-CPU")
    title = text(re.search(r'<h2 class="panel-title">.*?</h2>', cpu, re.S).group(0))
    assert "0 runs" not in title and title.startswith("CPU 1 run (0 filed, 1 local)")
    assert len(re.findall(r'<tr class="local"', cpu)) == 1
    tab = re.search(r'<a role="tab" href="#dev-CPU".*?</a>', html).group(0)
    assert '<span class="count"' not in tab and "1 local" in tab  # no "0" beside a listed run
    h100 = section(html, "dev-H100")
    title = text(re.search(r'<h2 class="panel-title">.*?</h2>', h100, re.S).group(0))
    assert title.startswith("H100 5 ranked · 10 runs (9 filed, 1 local)")
    assert len(re.findall(r'<tr class="local"', h100)) == 1


# -- a local run's page: the user's own code, a Reproduce line in the run's own mode ----------


def test_a_local_runs_page_speaks_of_your_code_not_of_publication(preview):
    page = (preview / "lb" / "vecadd" / "runs" / f"local-{TEST_ID}-0.html").read_text()
    assert "Code on this leaderboard is not published." not in page
    assert "The code is shown after the deadline" not in page
    note = text(re.search(r'<p class="notice" id="code-hidden">.*?</p>', page, re.S).group(0))
    assert note.startswith("Your code, from your local run: mine/submission.py")


def test_a_local_runs_own_code_is_shown_where_its_file_is(tmp_path):
    code = (FIXTURE / "submissions" / "vecadd" / "alice" / "submission.py").read_text()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "submission.py").write_text(code)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(local_document(TEST_ID, mode="test")))
    build_site(FIXTURE, tmp_path / "out", now=NOW, local=[path])
    page = (tmp_path / "out" / "lb" / "vecadd" / "runs" / f"local-{TEST_ID}-0.html").read_text()
    assert 'id="code"' in page and "fused, vectorised and tuned" in page


def test_reproduce_suggests_the_runs_own_mode(preview):
    def command(rel: str) -> str:
        page = (preview / rel).read_text()
        return re.search(r'<pre class="command"><code>(.*?)</code>', page).group(1)

    assert command(f"lb/vecadd/runs/local-{TEST_ID}-0.html") == (
        "pytest mine/submission.py --kb-mode test"
    )
    # a filed test-mode run too
    (identity,) = (preview / "lb" / "identity" / "runs").glob("f9af9db2*.html")
    assert command(str(identity.relative_to(preview))).endswith("--kb-mode test")
    # a leaderboard run replays its own seeds
    assert command("lb/vecadd/runs/28fd25e7149dead27783b2df4aa98211-0.html").startswith(
        "pytest submissions/vecadd/alice/submission.py --kb-mode leaderboard --kb-replay results/"
    )


# -- "Best score over time": axes that span the data -------------------------------------------


def x_labels(svg: str) -> list[str]:
    return re.findall(
        rf'<text x="[\d.]+" y="{charts.H - charts.PAD_B + 18}"[^>]*>([^<]+)</text>', svg
    )


def dots(svg: str) -> list[float]:
    return [float(x) for x in re.findall(r'<circle class="run" cx="([\d.]+)"', svg)]


def test_points_at_one_instant_get_an_hour_around_them_not_a_day():
    at = "2025-06-14T09:30:00Z"
    svg = charts.history_svg([(at, 12.0, "a"), (at, 10.0, "b")], "CPU")
    labels = x_labels(svg)
    assert labels[0] == "06-14 09:00" and labels[-1] == "06-14 10:00", labels
    middle = (charts.PAD_L + charts.W - charts.PAD_R) / 2
    assert dots(svg) == [pytest.approx(middle, abs=1)] * 2


def test_the_time_axis_spans_the_points_with_a_small_margin():
    svg = charts.history_svg(
        [("2025-06-14T09:30:00Z", 12.0, "a"), ("2025-06-14T09:50:00Z", 10.0, "b")], "H100"
    )
    left, right = min(dots(svg)), max(dots(svg))
    plot = (charts.W - charts.PAD_R - 6) - (charts.PAD_L + 6)
    assert right - left > 0.85 * plot  # not two dots bunched inside a day-wide axis
    assert x_labels(svg)[0] == "06-14 09:29" and x_labels(svg)[-1] == "06-14 09:51"
    # seconds apart: labels with seconds
    svg = charts.history_svg(
        [("2025-06-14T09:30:00Z", 12.0, "a"), ("2025-06-14T09:30:40Z", 10.0, "b")], "H100"
    )
    assert x_labels(svg)[0] == "09:29:58"
    # weeks apart: dates
    svg = charts.history_svg(
        [("2025-05-01T00:00:00Z", 12.0, "a"), ("2025-05-21T00:00:00Z", 10.0, "b")], "H100"
    )
    assert x_labels(svg)[0] == "2025-04-30"


# -- the FAST column: shapes faster only beyond noise ------------------------------------------


def timing(median: float, half: float) -> dict[str, Any]:
    return {
        "clock": "cuda_event",
        "n": 100,
        "mean_us": median,
        "median_us": median,
        "std_us": half,
        "min_us": median - 2 * half,
        "max_us": median + 2 * half,
        "ci95_us": [median - half, median + half],
        "statistic": "median",
        "rank_us": median,
        "rank_ci95_us": [median - half, median + half],
    }


def store_copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    return root


def edit(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_the_fast_column_counts_no_shape_inside_the_noise(tmp_path):
    """An entry at 0.97x whose three shapes read 1.00 - 1.04x within noise: KernelBench's
    fast_1 is 75% (the stored summary of a record written before fast_p was noise-aware);
    the column shows 0%, the raw share in its tooltip."""
    root = store_copy(tmp_path)

    def change(doc):
        evaluation = doc["evaluations"][0]
        benchmarks = [c for c in evaluation["cases"] if c["kind"] == "benchmark"]
        for case, (ours, half) in zip(
            benchmarks, [(99.0, 3.0), (97.0, 3.0), (96.5, 3.0), (115.0, 1.0)], strict=True
        ):
            case.update(
                timing=timing(ours, half), reference_timing=timing(100.0, 1.0), speedup=100 / ours
            )
        evaluation["summary"].update(
            speedup=0.97,
            tied_with_reference=True,
            fast_p={"0": 1.0, "0.5": 1.0, "1": 0.75, "1.5": 0.0, "2": 0.0},
        )

    edit(filed(root, "vecadd", "H100", "erin"), change)
    build_site(root, tmp_path / "out", now=NOW)
    html = (tmp_path / "out" / "lb" / "vecadd" / "index.html").read_text()
    row = re.search(r'<tr class="entry[^"]*" data-rank="5" data-author="erin">.*?</tr>', html, re.S)
    cells = re.findall(
        r'<td class="num" data-v="([^"]*)"(?: title="([^"]*)")?>(.*?)</td>', row.group(0)
    )
    speedup_cell, fast_cell = cells[-2], cells[-1]
    assert speedup_cell[2] == "0.97× (tie)"
    assert fast_cell[2] == "0%" and fast_cell[0] == "0.0"
    assert "fast_1 0%" in fast_cell[1]
    assert (
        "raw fast_p, KernelBench&#39;s definition: fast_0 100% · fast_0.5 100% · fast_1 75%"
        in (fast_cell[1])
    )
    export = json.loads((tmp_path / "out" / "data" / "vecadd" / "H100.json").read_text())
    (erin,) = [r for r in export["ranking"] if r["author"] == "erin"]
    assert erin["fast_p"]["1"] == 0.0 and erin["fast_p_raw"]["1"] == 0.75


# -- an older timing method is ranked apart ---------------------------------------------------

CURRENT = TIMING_METHOD
OLDER = TIMING_METHOD - 1


@pytest.fixture(scope="module")
def methods(tmp_path_factory) -> Path:
    """vecadd on H100 with every record on this harness's timing method (CURRENT), except
    erin's (the method before, OLDER) and bob's (a record older than the field)."""
    tmp_path = tmp_path_factory.mktemp("methods")
    root = store_copy(tmp_path)
    for path in (root / "results" / "vecadd" / "H100").glob("*.json"):
        author = path.name.split("-")[1]
        method = {"erin": OLDER, "bob": None}.get(author, CURRENT)
        if method is not None:
            edit(path, lambda doc, m=method: doc["harness"].update(timing_method=m))
    local = tmp_path / "newbie.json"
    doc = local_document("e" * 32)
    doc["harness"]["timing_method"] = OLDER
    local.write_text(json.dumps(doc))
    out = tmp_path / "out"
    build_site(root, out, now=NOW, local=[local])
    return out


def test_runs_of_an_older_timing_method_are_not_ranked_with_the_current_ones(methods):
    html = (methods / "lb" / "vecadd" / "index.html").read_text()
    h100 = section(html, "dev-H100")
    ranking = re.search(r'<table class="ranking sortable".*?</table>', h100, re.S).group(0)
    authors = re.findall(r'<tr class="entry[^"]*" data-rank="\d+" data-author="([^"]+)"', ranking)
    assert authors == ["alice", "carol", "dave"]
    assert f"Ranked: runs timed by timing method {CURRENT}." in text(h100)
    apart = re.findall(
        r'<table class="compact apart" data-method="([^"]+)">(.*?)</table>', h100, re.S
    )
    assert [(m, re.findall(r'data-author="([^"]+)"', t)) for m, t in apart] == [
        (f"timing method {OLDER}", ["erin"]),
        ("an unrecorded timing method (older)", ["bob"]),
    ]
    # the index's podium is the current method's
    index = (methods / "index.html").read_text()
    tile = re.search(r'data-leaderboard="vecadd".*?<ol class="podium">(.*?)</ol>', index, re.S)
    assert re.findall(r">([a-z]+)</a>", tile.group(1)) == ["alice", "carol", "dave"]
    # the export says which method ranks and keeps the others apart
    export = json.loads((methods / "data" / "vecadd" / "H100.json").read_text())
    assert export["timing_method"] == CURRENT
    assert [r["author"] for r in export["ranking"]] == ["alice", "carol", "dave"]
    assert [(a["timing_method"], [r["author"] for r in a["ranking"]]) for a in export["apart"]] == [
        (OLDER, ["erin"]),
        (None, ["bob"]),
    ]
    assert {h["author"] for h in export["history"]} == {"alice", "carol", "dave"}
    # a board whose records all lack the method (the fixture) ranks them all together
    a100 = json.loads((methods / "data" / "vecadd" / "A100.json").read_text())
    assert a100["timing_method"] is None and a100["apart"] == []
    assert len(a100["ranking"]) == 3


def test_a_run_ranked_apart_says_so_on_its_page(methods):
    page = methods / "lb" / "vecadd" / "runs" / "203e670eeb4b51ea45cba4588d745a21-0.html"  # bob
    html = page.read_text()
    note = text(
        re.search(r'<p class="notice method-note" id="method-note">.*?</p>', html, re.S).group(0)
    )
    assert note.startswith("Timed by an unrecorded timing method (older); this board ranks runs")
    assert "ranked apart (an unrecorded timing method (older))" in text(html)


def test_a_local_run_of_an_older_method_would_rank_among_its_own(methods):
    html = (methods / "lb" / "vecadd" / "index.html").read_text()
    local = re.search(r'<table class="compact local-runs">.*?</table>', html, re.S).group(0)
    assert "would rank #1 of 2" in local  # newbie at 12 µs ahead of erin (35 µs), both OLDER
    page = (methods / "lb" / "vecadd" / "runs" / f"local-{'e' * 32}-0.html").read_text()
    assert "the rank it would take is among filed runs of its own method only" in text(page)


def test_a_ranking_timed_by_an_older_method_than_this_harness_says_so(methods):
    """The fixture's records on A100 carry no timing method: they rank among themselves, and
    the board says they were timed by an older method than this harness's; the H100 board,
    ranked by this harness's own method, does not."""
    html = (methods / "lb" / "vecadd" / "index.html").read_text()
    a100 = text(section(html, "dev-A100"))
    assert "Timed by an older method." in a100
    assert f"this harness times by timing method {CURRENT}" in a100
    assert 'class="stale-method"' not in section(html, "dev-H100")


def test_a_board_opens_on_the_device_ranked_by_this_harness_s_method(tmp_path):
    """task.yml lists H100 before A100. With H100's runs timed by an older method and A100's
    by this harness's, the board's first tab and the index tile's first device are A100's."""
    root = store_copy(tmp_path)
    for device, method in (("H100", OLDER), ("A100", CURRENT)):
        for path in (root / "results" / "vecadd" / device).glob("*.json"):
            edit(path, lambda doc, m=method: doc["harness"].update(timing_method=m))
    build_site(root, tmp_path / "out", now=NOW)
    html = (tmp_path / "out" / "lb" / "vecadd" / "index.html").read_text()
    assert re.findall(r'role="tab" href="#(dev-[^"]+)"', html) == ["dev-A100", "dev-H100"]
    index = (tmp_path / "out" / "index.html").read_text()
    devices = re.findall(r'href="[^"]*vecadd/[^"#]*#(dev-[A-Za-z0-9]+)"', index)
    assert devices[:1] == ["dev-A100"] and "dev-H100" in devices
