"""benchmarks/batch_against_baseline.py: an older judge's runs and this one's, read from their
own output, and the older tree's code on the path of its runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def against(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import batch_against_baseline

    return batch_against_baseline


OLD_OUTPUT = """batch.jsonl: 100 candidates, benchmark mode, on GPU

run 1: 100 records in 118.0 s
| id | verdict |

verdicts not as expected (3):
| id | what |
"""
NEW_OUTPUT = """batch.jsonl: 100 candidates, benchmark mode, on GPU

run 1: 100 records in 51.9 s
  first record after 3.1 s; the 99 after it at 7100 an hour
"""


def test_a_run_is_read_from_either_judges_output(against):
    old = against.parse_run("baseline", OLD_OUTPUT)
    new = against.parse_run("current", NEW_OUTPUT)
    assert (old.records, old.wall_s, old.not_expected) == (100, 118.0, 3)
    assert (new.records, new.wall_s, new.not_expected) == (100, 51.9, 0)
    assert new.per_hour == pytest.approx(3600 * 100 / 51.9)


def test_output_without_a_run_line_names_the_judge(against):
    with pytest.raises(ValueError, match="baseline judge's output"):
        against.parse_run("baseline", "Traceback (most recent call last):\n")


def test_the_ratio_is_of_median_wall_times(against):
    runs = [
        against.BatchRun("current", 100, 60.0, 0),
        against.BatchRun("baseline", 100, 120.0, 0),
        against.BatchRun("current", 100, 50.0, 0),
        against.BatchRun("baseline", 100, 110.0, 0),
        against.BatchRun("current", 100, 52.0, 0),
    ]
    assert against.speedup_over_baseline(runs) == pytest.approx(115.0 / 52.0)
    assert against.speedup_over_baseline(runs[:1]) is None


def test_the_baseline_runs_its_own_tree_first_on_the_path(tmp_path):
    """A baseline tree's batch_throughput.py imports a module only that tree has: the run
    finds it, and each run's output is kept beside its folder."""
    tree = tmp_path / "old"
    (tree / "benchmarks").mkdir(parents=True)
    (tree / "only_in_the_old_tree.py").write_text("WALL = 118.0\n")
    (tree / "benchmarks" / "batch_throughput.py").write_text(
        "import only_in_the_old_tree as old\nprint(f'run 1: 100 records in {old.WALL} s')\n"
    )
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "batch_against_baseline.py"),
            str(tree),
            "--order",
            "b,b",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "run 2 (baseline): 100 records in 118.0 s, 3051 an hour" in done.stdout
    assert (out / "1-baseline.log").read_text().startswith("run 1: 100 records in 118.0 s")


def test_an_order_of_other_letters_is_refused(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARKS / "batch_against_baseline.py"),
            str(tmp_path),
            "--order",
            "c,x",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--order" in done.stderr
