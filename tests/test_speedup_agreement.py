"""One speedup per run: the pull-request comment and the site show the same number.

The run's speedup is the reference's score over the submission's score under the leaderboard's
ranking_by. The per-case speedups below (3x and 1.5x) are chosen so that their geometric mean
differs from that ratio for `last` and `mean`: a front-end showing another speedup fails here.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path

import pytest

from pytest_kernelboard.pr import comment
from pytest_kernelboard.presentation import fmt_speedup
from pytest_kernelboard.results import store
from pytest_kernelboard.results.summary import summarize_evaluation
from pytest_kernelboard.spec.discovery import load_catalog
from site_generator.build import build_site

FIXTURES = Path(__file__).parent / "fixtures"
NOW = dt.datetime(2030, 1, 2, tzinfo=dt.UTC)
SUBMISSION_US = (10.0, 40.0)
REFERENCE_US = (30.0, 60.0)
EXPECTED = {"last": 60 / 40, "mean": 45 / 25, "geom": (1800 / 400) ** 0.5}

TASK_YML = """\
files:
  - {{"name": "submission.py", "source": "@SUBMISSION@"}}
  - {{"name": "reference.py", "source": "reference.py"}}
lang: "py"
description: Speedup fixture ranked by {ranking}.
tests:
  - {{"size": 8, "seed": 1}}
benchmarks:
  - {{"size": 64, "seed": 2}}
  - {{"size": 128, "seed": 3}}
ranking_by: "{ranking}"
gpus: ["CPU"]
"""


def timing(mean: float) -> dict:
    return {
        "clock": "host",
        "n": 10,
        "mean_us": mean,
        "median_us": mean,
        "std_us": 0.01 * mean,
        "min_us": 0.98 * mean,
        "max_us": 1.02 * mean,
        "ci95_us": [0.99 * mean, 1.01 * mean],
    }


def case(kind: str, index: int, sub: float | None = None, ref: float | None = None) -> dict:
    record = {
        "kind": kind,
        "index": index,
        "id": f"{kind}{index}",
        "spec": {"size": 8},
        "seed": 1,
        "status": "passed",
        "message": "",
        "duration_s": 0.1,
    }
    if sub is not None:
        record.update(timing=timing(sub), reference_timing=timing(ref), speedup=ref / sub)
    return record


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("speedup")
    source = FIXTURES / "site" / "leaderboards" / "identity" / "reference.py"
    for ranking in EXPECTED:
        folder = root / "leaderboards" / f"by-{ranking}"
        folder.mkdir(parents=True)
        (folder / "task.yml").write_text(TASK_YML.format(ranking=ranking))
        shutil.copy(source, folder / "reference.py")
    catalog = load_catalog(root)
    for number, ranking in enumerate(EXPECTED, start=1):
        task = catalog.tasks[f"by-{ranking}"]
        cases = [case("test", 0)] + [
            case("benchmark", i, s, r)
            for i, (s, r) in enumerate(zip(SUBMISSION_US, REFERENCE_US, strict=True))
        ]
        evaluation = {
            "leaderboard": {"name": task.name, "ranking_by": ranking, "lang": "py"},
            "submission": {
                "path": f"submissions/{task.name}/alice/submission.py",
                "author": "alice",
                "sha256": "a" * 64,
                "is_reference": False,
            },
            "cases": cases,
            "summary": summarize_evaluation(cases, task, "leaderboard"),
        }
        run = {
            "schema": "kernelboard.run/1",
            "run_id": f"{number:032x}",
            "created_at": "2030-01-01T00:00:00Z",
            "mode": "leaderboard",
            "environment": {"device": "CPU", "device_kind": "cpu", "python": "3.11"},
            "evaluations": [evaluation],
        }
        store.add_run(root, run, catalog=catalog)
    return root


@pytest.fixture(scope="module")
def site(repo, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "_site"
    build_site(repo, out, now=NOW, workers=1)
    return out


def pr_speedup(run: dict) -> str:
    text = "\n".join(comment.device_section(comment.DeviceOutcome("CPU", run)))
    return re.search(r"\*\*speedup over the reference:\*\* (\S+)", text).group(1)


def site_speedups(site: Path, name: str, run: dict) -> set[str]:
    """The speedup as the leaderboard's ranking row and the run's own page show it."""
    board = (site / "lb" / name / "index.html").read_text()
    (row,) = re.findall(r'<tr class="entry[^"]*"[^>]*data-author="alice">.*?</tr>', board, re.S)
    shown = set(re.findall(r"(\d+\.\d\d×)", row))
    page = site / "lb" / name / "runs" / f"{run['run_id']}-0.html"
    shown |= set(re.findall(r"<dt>Speedup</dt><dd>([^<]*)</dd>", page.read_text()))
    return shown


@pytest.mark.parametrize("ranking", list(EXPECTED))
def test_pr_comment_and_site_show_the_same_speedup(repo, site, ranking):
    name = f"by-{ranking}"
    (run,) = [
        r for _, r in store.load_records(repo) if r["evaluations"][0]["leaderboard"]["name"] == name
    ]
    summary = run["evaluations"][0]["summary"]
    assert summary["speedup"] == pytest.approx(EXPECTED[ranking])
    expected = fmt_speedup(EXPECTED[ranking])
    assert pr_speedup(run) == expected
    assert site_speedups(site, name, run) == {expected}


def test_a_reference_timed_at_zero_leaves_a_geom_run_without_a_speedup_not_a_crash():
    """On a loaded CPU the judge's clock can put a call below its grain: 0 µs. A geometric
    mean of it is undefined, so the run keeps its score and gets no speedup."""
    from pytest_kernelboard.results.summary import evaluation_summary
    from pytest_kernelboard.spec.task import load_task

    task = load_task(Path(__file__).parent / "fixtures/core/leaderboards/addone/task.yml")
    assert task.ranking_by == "geom"

    def timing(us: float) -> dict:
        return {"rank_us": us, "rank_ci95_us": [us, us], "mean_us": us, "n": 5}

    case = {"kind": "benchmark", "status": "passed", "timing": timing(10.0)}
    summary = evaluation_summary([dict(case, reference_timing=timing(0.0))], task, "benchmark")
    assert summary.score_us == pytest.approx(10.0) and summary.speedup is None
    zero = evaluation_summary([dict(case, timing=timing(0.0))], task, "benchmark")
    assert zero.score_us is None
