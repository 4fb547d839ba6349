"""Two judgings of one batch: do the verdicts agree, and are the speedups tied with each other?

    python benchmarks/compare_batches.py FIRST.jsonl SECOND.jsonl

Speedups of one candidate are tied when its timed cases' intervals overlap between the two
runs or are within 2% (the tie rule of docs/timing.md), case by case."""

from __future__ import annotations

import json
import sys

from pytest_kernelboard.stats.scoring import tied

VERDICT = ("status", "correct", "error_kind")


def main(first_path: str, second_path: str) -> int:
    first = {r["id"]: r for r in map(json.loads, open(first_path))}
    second = {r["id"]: r for r in map(json.loads, open(second_path))}
    differ, untied, timed = [], [], 0
    for cid, a in first.items():
        b = second.get(cid)
        if b is None or any(a[k] != b[k] for k in VERDICT):
            differ.append(cid)
            continue
        for case_a, case_b in zip(a["cases"], b["cases"], strict=False):
            if case_a.get("time_us") and case_b.get("time_us"):
                timed += 1
                if not tied(
                    case_a["time_us"], case_a["ci95_us"], case_b["time_us"], case_b["ci95_us"]
                ):
                    untied.append(
                        f"{cid} {case_a['id']}: {case_a['time_us']:.2f} vs {case_b['time_us']:.2f} us"
                    )
    print(f"{len(first)} candidates: verdicts differ for {len(differ)} {differ[:10]}")
    print(f"{timed} timed cases: {len(untied)} not tied between the runs")
    for line in untied[:20]:
        print("  " + line)
    return 0 if not differ and not untied else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
