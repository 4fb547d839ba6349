"""Judgings of one batch, two at a time: do the verdicts agree, and are the speedups tied with
each other?

    python benchmarks/compare_batches.py FIRST.jsonl SECOND.jsonl [FIRST2.jsonl SECOND2.jsonl ...]
        [--pairs-alone]

A candidate's speedup on a timed case is tied between the two runs when the intervals the
records give it (`speedup_ci95`) overlap or the speedups are within 2% (the tie rule of
docs/timing.md), case by case: `batch_throughput.compare_runs`, the rule its `--runs 2` uses.

Then how far apart the speedups lie in the standard errors their intervals imply, and how many
exact 95% intervals of those widths would leave untied on average. Two exact intervals of one
width fail to overlap 0.56% of the time, so with 60 speedups compared even exact intervals
leave one or more untied in about one pair of runs in three: an untied count is read against
that, not against zero. Over every pair given, the same by how far the speedup lies from 1:
intervals that hold near 1 can still miss far from it (docs/timing.md, "How many untied
speedups two runs should show").

--pairs-alone compares each speedup timed in turns by its pairs' interval alone, without the
run-to-run part its record carries (`run_to_run_half_log`): what that part changes.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
from typing import Any

from batch_throughput import Z95, calibration_line, compare_runs, table

# Bands of distance from 1, by |ln speedup|: within 1.11x, 1.65x, e, 5.47x, and beyond.
BAND_EDGES = (0.1, 0.5, 1.0, 1.7)


def band_name(index: int) -> str:
    """ "0.61 - 0.90, 1.11 - 1.65" for the second band: both sides of 1."""
    edges = (0.0, *BAND_EDGES)
    if index == len(BAND_EDGES):
        low = math.exp(-edges[-1])
        return f"below {low:.2f}, above {1 / low:.2f}"
    inner, outer = edges[index], edges[index + 1]
    if inner == 0.0:
        return f"{math.exp(-outer):.2f} - {math.exp(outer):.2f}"
    return (
        f"{math.exp(-outer):.2f} - {math.exp(-inner):.2f}, "
        f"{math.exp(inner):.2f} - {math.exp(outer):.2f}"
    )


def by_distance(gaps: list[tuple[float, float, float]]) -> list[list[Any]]:
    """Rows of (band, compared, share of gaps beyond 1.96 standard errors, median |z|) from
    (distance from 1, |z|, chance) triples; bands with nothing in them left out."""
    bands: list[list[float]] = [[] for _ in range(len(BAND_EDGES) + 1)]
    for distance, z, _ in gaps:
        index = sum(distance > edge for edge in BAND_EDGES)
        bands[index].append(z)
    rows = []
    for index, sizes in enumerate(bands):
        if sizes:
            beyond = sum(z > Z95 for z in sizes) / len(sizes)
            rows.append(
                [
                    band_name(index),
                    len(sizes),
                    f"{100 * beyond:.1f}%",
                    f"{statistics.median(sizes):.2f}",
                ]
            )
    return rows


def without_run_to_run(record: dict[str, Any]) -> dict[str, Any]:
    """The record with each case's speedup interval narrowed to its turns' pairs' alone, where
    it carries a run-to-run part (the half-widths add in quadrature, stats/paired.py)."""
    record = copy.deepcopy(record)
    for case in record.get("cases") or ():
        part, interval = case.get("run_to_run_half_log"), case.get("speedup_ci95")
        if part is None or not interval or not case.get("speedup"):
            continue
        low, high = interval
        half = math.log(high / low) / 2
        pairs = math.sqrt(max(half * half - part * part, 0.0))
        case["speedup_ci95"] = [
            case["speedup"] * math.exp(-pairs),
            case["speedup"] * math.exp(pairs),
        ]
    return record


def load(path: str, pairs_alone: bool) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in open(path)]
    return [without_run_to_run(r) for r in records] if pairs_alone else records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="records of two judgings of one batch, in pairs")
    parser.add_argument("--pairs-alone", action="store_true")
    args = parser.parse_args(argv)
    if len(args.runs) % 2:
        parser.error(f"runs come in pairs: {len(args.runs)} given")
    pairs = list(zip(args.runs[::2], args.runs[1::2], strict=True))
    all_gaps: list[tuple[float, float, float]] = []
    untied_total = compared_total = 0
    expected_total = 0.0
    agreeing = True
    for first_path, second_path in pairs:
        if len(pairs) > 1:
            print(f"== {first_path} and {second_path}")
        first, second = load(first_path, args.pairs_alone), load(second_path, args.pairs_alone)
        agreement = compare_runs(first, second)
        differ, untied = agreement["differ"], agreement["untied"]
        print(f"{len(first)} candidates: verdicts differ for {len(differ)}")
        for candidate_id, a, b in differ[:10]:
            print(f"  {candidate_id}: {a} vs {b}")
        print(f"{agreement['compared']} speedups compared: {len(untied)} not tied between the runs")
        for candidate_id, a, b in untied[:20]:
            print(f"  {candidate_id}: {a:.3f} vs {b:.3f}")
        print(calibration_line(agreement["calibration"]))
        all_gaps += agreement["gaps"]
        untied_total += len(untied)
        compared_total += agreement["compared"]
        expected_total += agreement["calibration"].get("expected_untied", 0.0)
        agreeing = agreeing and not differ and not untied
    if all_gaps:
        print(
            f"\nover {len(pairs)} pair(s): {untied_total} untied of {compared_total} compared, "
            f"exact intervals of these widths would leave {expected_total:.1f}; by distance "
            "from 1 (5% beyond 1.96 and a median of 0.67 for exact intervals):"
        )
        print(table(by_distance(all_gaps), ["speedup", "compared", "beyond 1.96", "median |z|"]))
    return 0 if agreeing else 1


if __name__ == "__main__":
    sys.exit(main())
