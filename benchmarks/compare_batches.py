"""Two judgings of one batch: do the verdicts agree, and are the speedups tied with each other?

    python benchmarks/compare_batches.py FIRST.jsonl SECOND.jsonl

A candidate's speedup on a timed case is tied between the two runs when the intervals the
records give it (`speedup_ci95`) overlap or the speedups are within 2% (the tie rule of
docs/timing.md), case by case: `batch_throughput.compare_runs`, the rule its `--runs 2` uses.

Then how far apart the speedups lie in the standard errors their intervals imply, and how many
exact 95% intervals of those widths would leave untied on average. Two exact intervals of one
width fail to overlap 0.56% of the time, so with 60 speedups compared even exact intervals
leave one or more untied in about one pair of runs in three: an untied count is read against
that, not against zero."""

from __future__ import annotations

import json
import sys

from batch_throughput import calibration_line, compare_runs


def main(first_path: str, second_path: str) -> int:
    first = [json.loads(line) for line in open(first_path)]
    second = [json.loads(line) for line in open(second_path)]
    agreement = compare_runs(first, second)
    differ, untied = agreement["differ"], agreement["untied"]
    print(f"{len(first)} candidates: verdicts differ for {len(differ)}")
    for candidate_id, a, b in differ[:10]:
        print(f"  {candidate_id}: {a} vs {b}")
    print(f"{agreement['compared']} speedups compared: {len(untied)} not tied between the runs")
    for candidate_id, a, b in untied[:20]:
        print(f"  {candidate_id}: {a:.3f} vs {b:.3f}")
    print(calibration_line(agreement["calibration"]))
    return 0 if not differ and not untied else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
