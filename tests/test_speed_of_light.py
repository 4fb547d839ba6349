"""Speed of light: the byte floor over the ranking time, in the results, the PR comment and the site."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.judge.core import CaseOutcome
from pytest_kernelboard.pr import comment
from pytest_kernelboard.presentation import fmt_speed_of_light
from pytest_kernelboard.results.recorder import RunRecorder
from pytest_kernelboard.results.records import validate_run
from pytest_kernelboard.spec.cases import BENCHMARK, Case
from pytest_kernelboard.spec.discovery import SubmissionRef
from pytest_kernelboard.spec.task import load_task
from pytest_kernelboard.stats.speed_of_light import speed_of_light, with_speed_of_light

FIXTURES = Path(__file__).parent / "fixtures"
SITE = FIXTURES / "site"


def timing(mean_us: float, floor_us: float | None) -> dict:
    return {
        "clock": "cuda_event",
        "n": 3,
        "mean_us": mean_us,
        "median_us": mean_us - 1,
        "std_us": 1.0,
        "min_us": mean_us - 1,
        "max_us": mean_us + 1,
        "ci95_us": [mean_us - 2, mean_us + 2],
        "floor_us": floor_us,
    }


def test_fraction_is_floor_over_the_mean():
    assert speed_of_light(timing(40.0, 30.0)) == pytest.approx(0.75)
    assert speed_of_light(timing(40.0, None)) is None  # CPU runs have no floor
    assert speed_of_light(timing(0.0, 30.0)) is None
    assert speed_of_light(None) is None
    # a record keeps the value it was recorded with
    assert speed_of_light({**timing(40.0, 30.0), "speed_of_light": 0.5}) == 0.5


def test_with_speed_of_light_sets_the_field_and_recomputes():
    record = with_speed_of_light({**timing(10.0, 2.5), "speed_of_light": 0.9})
    assert record["speed_of_light"] == pytest.approx(0.25)
    assert with_speed_of_light(timing(10.0, None))["speed_of_light"] is None
    assert with_speed_of_light(None) is None


def test_format():
    assert fmt_speed_of_light(0.834) == "83%"
    assert fmt_speed_of_light(0.0123) == "1.2%"
    assert fmt_speed_of_light(None) == "—"


def test_results_document_carries_it_per_case(tmp_path):
    task = load_task(FIXTURES / "core" / "leaderboards" / "addone" / "task.yml")
    sub = tmp_path / "submission.py"
    sub.write_text("def custom_kernel(data):\n    return data\n")
    recorder = RunRecorder("benchmark")
    case = Case(BENCHMARK, 0, dict(task.benchmarks[0]))
    outcome = CaseOutcome(
        "passed", timing=timing(20.0, 15.0), reference_timing=timing(30.0, 15.0), speedup=1.5
    )
    recorder.record(task, SubmissionRef(sub, task.name, "alice"), case, outcome)
    doc = recorder.document()
    validate_run(doc)  # the schema knows the field
    (record,) = doc["evaluations"][0]["cases"]
    assert record["timing"]["speed_of_light"] == pytest.approx(0.75)
    assert record["reference_timing"]["speed_of_light"] == pytest.approx(0.5)


def test_pr_comment_has_a_column():
    from test_pr_comment import make_gate, make_run

    run = make_run(score=10.0)
    run["evaluations"][0]["cases"][1]["timing"]["floor_us"] = 6.0
    body = comment.render_comment(make_gate(), [comment.DeviceOutcome("CPU", run)])
    assert "| speedup | of peak bandwidth |" in body
    assert "| 2.00× | 60% |" in body
    assert "| test size=8 | ✅ passed | — | — | — | — |" in body


def test_site_case_table_has_a_column(tmp_path):
    from site_generator.build import build_site

    root = tmp_path / "store"
    shutil.copytree(SITE, root)
    record = (
        root / "results/softmax/H100/20250510T120000Z-bob-1fa5b83d397986f6621e717a723c68f7-0.json"
    )
    doc = json.loads(record.read_text())
    benchmarks = [c for c in doc["evaluations"][0]["cases"] if c["kind"] == "benchmark"]
    # the floor over the statistic that ranks (the median)
    benchmarks[0]["timing"]["floor_us"] = benchmarks[0]["timing"]["rank_us"] * 0.42
    benchmarks[1]["timing"]["speed_of_light"] = 0.031
    record.write_text(json.dumps(doc))
    out = tmp_path / "_site"
    build_site(root, out, now=dt.datetime(2025, 6, 15, 12, 0, tzinfo=dt.UTC))
    html = (out / "lb/softmax/runs/1fa5b83d397986f6621e717a723c68f7-0.html").read_text()
    assert ">Of peak BW</th>" in html
    assert '<td class="num" data-v="0.42">42%</td>' in html
    assert '<td class="num" data-v="0.031">3.1%</td>' in html
    lines = [json.loads(line) for line in (out / "data/dataset.jsonl").read_text().splitlines()]
    (line,) = [x for x in lines if x["record"].endswith(record.name)]
    exported = [c["speed_of_light"] for c in line["cases"] if c["kind"] == "benchmark"]
    assert exported == [pytest.approx(0.42), 0.031]
