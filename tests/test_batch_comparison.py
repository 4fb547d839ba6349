"""benchmarks/batch_throughput.py's comparison of two judgings of one batch: a speedup is held
against the other run's by the interval its record gives it."""

from __future__ import annotations

import itertools
import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def batch_throughput(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import batch_throughput

    return batch_throughput


def record(speedup: float, interval: list[float] | None, status: str = "passed") -> dict:
    """A candidate's record with one timed case, its time from the reference's 172.9 µs and a
    candidate's interval half as wide as its speedup's (a case timed in turns: each side
    carries half the pairs' interval)."""
    reference_us = 172.9
    time_us = reference_us / speedup
    case = {
        "kind": "benchmark",
        "id": "big",
        "speedup": speedup,
        "reference_us": reference_us,
        "time_us": time_us,
        "ci95_us": [time_us * 0.96, time_us * 1.04],
    }
    if interval is not None:
        case["speedup_ci95"] = interval
    return {
        "id": "slower-twice",
        "status": status,
        "correct": True,
        "error_kind": None,
        "flags": [],
        "cases": [case],
    }


def test_speedups_are_held_by_the_intervals_the_records_give_them(batch_throughput):
    # Two runs of one candidate timed in turns: 0.650 [0.573, 0.737] and 0.765 [0.702, 0.833]
    # on an H200. Their speedup intervals overlap; the candidate's time intervals alone do not.
    first = [record(0.650, [0.573, 0.737])]
    second = [record(0.765, [0.702, 0.833])]
    agreement = batch_throughput.compare_runs(first, second)
    assert agreement["compared"] == 1 and agreement["untied"] == []
    farther = batch_throughput.compare_runs(first, [record(0.900, [0.850, 0.950])])
    assert farther["untied"] == [("slower-twice", 0.650, 0.900)]


def test_a_record_without_a_speedup_interval_is_held_by_its_time_s(batch_throughput):
    agreement = batch_throughput.compare_runs([record(0.650, None)], [record(0.765, None)])
    assert agreement["untied"] == [("slower-twice", 0.650, 0.765)]  # ±4% each: apart


def test_compare_batches_says_the_same(tmp_path):
    runs = []
    for name, speedup, interval in (("a", 0.650, [0.573, 0.737]), ("b", 0.765, [0.702, 0.833])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(record(speedup, interval)) + "\n")
        runs.append(str(path))
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "compare_batches.py"), *runs],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 speedups compared: 0 not tied" in done.stdout


def test_compare_batches_pools_several_pairs_by_distance_from_one(tmp_path, batch_throughput):
    paths = []
    for name, speedup, interval in (
        ("a", 0.650, [0.573, 0.737]),
        ("b", 0.765, [0.702, 0.833]),
        ("c", 4.0, [3.8, 4.2]),  # far from 1 and apart: untied
        ("d", 3.0, [2.9, 3.1]),
    ):
        path = tmp_path / f"{name}.jsonl"
        path.write_text(json.dumps(record(speedup, interval)) + "\n")
        paths.append(str(path))
    script = str(BENCHMARKS / "compare_batches.py")
    done = subprocess.run([sys.executable, script, *paths], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr  # the second pair is untied
    assert "over 2 pair(s): 1 untied of 2 compared" in done.stdout
    # 0.65 against 0.765 lies 0.35 from 1 in log, 4 against 3 lies 1.24: two bands apart.
    near, _ = batch_throughput.standardized_gap(0.650, [0.573, 0.737], 0.765, [0.702, 0.833])
    far, _ = batch_throughput.standardized_gap(4.0, [3.8, 4.2], 3.0, [2.9, 3.1])
    rows = {line.split("  ")[0]: line.split() for line in done.stdout.splitlines()}
    assert rows["0.61 - 0.90, 1.11 - 1.65"][-3:] == ["1", "100.0%", f"{near:.2f}"]
    assert rows["0.18 - 0.37, 2.72 - 5.47"][-3:] == ["1", "100.0%", f"{far:.2f}"]
    assert "0.90 - 1.11" not in rows  # a band with nothing in it is left out
    odd = subprocess.run([sys.executable, script, *paths[:3]], capture_output=True, text=True)
    assert odd.returncode == 2 and "runs come in pairs: 3 given" in odd.stderr


def test_the_pairs_alone_take_the_run_to_run_part_out_of_a_speedup_s_interval(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import compare_batches

    widened = record(
        2.0, [2.0 * math.exp(-math.hypot(0.1, 0.2)), 2.0 * math.exp(math.hypot(0.1, 0.2))]
    )
    widened["cases"][0]["run_to_run_half_log"] = 0.2
    low, high = compare_batches.without_run_to_run(widened)["cases"][0]["speedup_ci95"]
    assert (low, high) == (pytest.approx(2.0 * math.exp(-0.1)), pytest.approx(2.0 * math.exp(0.1)))
    assert widened["cases"][0]["speedup_ci95"][0] < low  # the record given is left as it was
    plain = record(2.0, [1.8, 2.2])
    assert compare_batches.without_run_to_run(plain) == plain


def test_the_pace_after_the_first_record_leaves_the_start_out(batch_throughput):
    # The first record after 7.7 s, the last of 40 at 22.3 s: 39 in 14.6 s.
    first, then = batch_throughput.after_the_first([7.7] + [7.7 + 14.6 * k / 38 for k in range(39)])
    assert first == 7.7 and round(then) == round(3600 * 39 / 14.6)
    assert batch_throughput.after_the_first([]) == (None, None)
    assert batch_throughput.after_the_first([3.0]) == (3.0, None)


def test_each_record_is_timed_as_the_judge_writes_it(batch_throughput, monkeypatch, tmp_path):
    """The records come off the judge's stdout as it writes them, each with its arrival; the
    output file keeps them all."""
    writer = (
        "import json, sys, time\n"
        "for n in range(3):\n"
        "    time.sleep(0.4)\n"
        "    print(json.dumps({'id': f'c{n}'}), flush=True)\n"
    )
    monkeypatch.setattr(
        batch_throughput, "kernelboard_command", lambda: [sys.executable, "-c", writer]
    )
    out = tmp_path / "records.jsonl"
    wall, records, arrivals = batch_throughput.judge(
        "lb", [tmp_path / "c.jsonl"], tmp_path, "test", out, tmp_path / "judge.log"
    )
    assert [r["id"] for r in records] == ["c0", "c1", "c2"]
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["c0", "c1", "c2"]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert arrivals[0] >= 0.35 and all(gap >= 0.3 for gap in gaps), arrivals
    assert wall >= arrivals[-1]


def test_the_critical_path_by_category_puts_the_start_and_a_hang_on_rows_of_their_own(
    batch_throughput,
):
    """The first candidate's wait is the batch's start; a hanging candidate's wait is its own
    category's; the serial phases it does not name are summed as `other`."""
    records = [
        {"id": "slower-twice", "phases": {"prepare_wait": 2.9, "reference": 3.5, "timing": 0.2}},
        {"id": "wrong-relu", "phases": {"prepare_wait": 0.4, "correctness": 0.01}},
        {"id": "hang-busy", "phases": {"prepare_wait": 9.9}},
        {"id": "wrong-offset", "phases": {"prepare_wait": 0.6, "worker_start": 0.7}},
    ]
    lines = batch_throughput.serial_by_category(records).splitlines()
    rows = {line.split("  ")[0].strip(): line.split() for line in lines[2:]}
    header = lines[0].split()
    assert header == ["category", "n", "serial_s", *batch_throughput.NAMED_SERIAL, "other"]
    assert [line.split("  ")[0].strip() for line in lines[2:]] == [
        "hang",
        "slower",
        batch_throughput.START,
        "wrong",
        "all",
    ]
    column = {name: header.index(name) for name in header}
    start = lines[4].split(batch_throughput.START)[1].split()
    assert start[:3] == ["1", "2.9", "2.9"]
    assert rows["slower"][column["prepare_wait"]] == "0.0"  # the start is not its own wait
    assert rows["slower"][column["other"]] == "3.5"  # the reference's timing
    assert rows["wrong"][column["n"]] == "2"
    assert rows["wrong"][column["serial_s"]] == "1.0"  # worker_start runs beside: not serial
    assert rows["all"][:3] == ["all", "4", "17.5"]


def test_exact_intervals_read_as_calibrated_and_narrow_ones_do_not(batch_throughput):
    """Speedups drawn as exact 95% intervals would have them: the median |z| near 0.674, 5%
    beyond 1.96, and as many untied as `expected_untied` says. Intervals half as wide as the
    draws' spread read twice the gaps and several times the untied ones."""
    rng = random.Random(20261129)

    def runs(width_factor: float) -> tuple[list[dict], list[dict]]:
        first, second = [], []
        for index in range(3000):
            se = rng.choice([0.02, 0.05, 0.1])  # each candidate's own log standard error
            half = batch_throughput.Z95 * se * width_factor
            for out in (first, second):
                speedup = 0.8 * math.exp(rng.gauss(0.0, se))
                interval = [speedup * math.exp(-half), speedup * math.exp(half)]
                out.append(record(speedup, interval) | {"id": f"c{index}"})
        return first, second

    exact = batch_throughput.compare_runs(*runs(1.0))
    found = exact["calibration"]
    assert found["compared"] == exact["compared"] == 3000
    assert 0.62 <= found["median_z"] <= 0.73
    assert 0.04 <= found["beyond_1_96"] <= 0.06
    assert (
        abs(len(exact["untied"]) - found["expected_untied"]) <= 3 * found["expected_untied"] ** 0.5
    )
    narrow = batch_throughput.compare_runs(*runs(0.5))
    assert narrow["calibration"]["median_z"] >= 1.2
    assert len(narrow["untied"]) > 5 * narrow["calibration"]["expected_untied"]


def test_a_gap_is_read_in_the_standard_errors_its_intervals_imply(batch_throughput):
    """1.0 [0.9, 1.1] against itself is no gap; against 1.2 [1.1, 1.3] it is ln 1.2 over the
    two log standard errors; an interval open above (a time whose interval reached 0) is not
    read at all; two equal exact intervals fail to overlap 0.56% of the time."""
    gap = batch_throughput.standardized_gap
    assert gap(1.0, [0.9, 1.1], 1.0, [0.9, 1.1])[0] == 0.0
    se = [math.log(h / lo) / (2 * batch_throughput.Z95) for lo, h in ([0.9, 1.1], [1.1, 1.3])]
    z, chance = gap(1.0, [0.9, 1.1], 1.2, [1.1, 1.3])
    assert z == pytest.approx(math.log(1.2) / math.hypot(*se))
    assert gap(1.0, [0.9, math.inf], 1.2, [1.1, 1.3]) is None
    assert gap(1.0, [0.0, 1.1], 1.2, [1.1, 1.3]) is None
    _, equal = gap(1.0, [0.8, 1.25], 1.0, [0.8, 1.25])
    assert equal == pytest.approx(math.erfc(2 * batch_throughput.Z95 / 2), rel=1e-6)
    assert equal == pytest.approx(0.0056, abs=2e-4)
    assert batch_throughput.calibration([]) == {"compared": 0}
