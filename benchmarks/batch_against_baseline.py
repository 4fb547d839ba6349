"""The mixed batch judged by an older judge and by this one, taking turns on one host.

    python benchmarks/batch_against_baseline.py BASELINE_TREE [--order c,b,c,b,c] [--gpus 0]
        [--mode benchmark] [--out DIR]

A rate target set against "today's rate" (2x the mixed batch's) compares two judges; measured
on different hosts, the ratio carries the hosts' difference too: on single-GPU H200 hosts the
same judge took 50.6 - 61.6 s for this batch, its host-bound reference 113 - 203 µs. This runs
both judges on one host, one run after the other, so each ratio compares judges only.

BASELINE_TREE is a checkout of the older commit (`git archive REV | tar -x -C DIR`). Its runs
put it first on PYTHONPATH, ahead of the installed package, with the same Python and
dependencies: the judge hands its workers its own package's folder as theirs, so its zygote
and workers run its code too. Each run is the tree's own
`benchmarks/batch_throughput.py --runs 1` (its own batch of `batch_candidates.py`, its own
expectations), in the order `--order` gives (c: this tree, b: the baseline). The first run of
a fresh machine fills the compile caches (Triton's) for every later one, whichever judge it is.

Prints each run's wall time and rate, then the ratio of the baseline's median wall time to this
judge's, and, for this judge's last two runs, whether their verdicts agree and their speedups
tie (`compare_batches.py`).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from batch_throughput import table  # noqa: E402

WHO = {"c": "current", "b": "baseline"}
RUN_LINE = re.compile(r"^run 1: (\d+) records in ([0-9.]+) s$", re.MULTILINE)
NOT_EXPECTED = re.compile(r"^verdicts not as expected \((\d+)\):$", re.MULTILINE)


@dataclass(frozen=True)
class BatchRun:
    """One `batch_throughput.py --runs 1` run: which judge, and what its output says."""

    who: str
    records: int
    wall_s: float
    not_expected: int  # rows of "verdicts not as expected", 0 when it prints none

    @property
    def per_hour(self) -> float:
        return 3600 * self.records / self.wall_s if self.wall_s > 0 else 0.0


def parse_run(who: str, output: str) -> BatchRun:
    """The run's record count, wall time and expectation misses, from its printed output."""
    found = RUN_LINE.search(output)
    if found is None:
        raise ValueError(f"the {who} judge's output has no 'run 1: N records in S s' line")
    missed = NOT_EXPECTED.search(output)
    return BatchRun(who, int(found[1]), float(found[2]), int(missed[1]) if missed else 0)


def speedup_over_baseline(runs: list[BatchRun]) -> float | None:
    """The baseline's median wall time over this judge's: how many times its rate this one's
    is; None without runs of both."""
    baseline = [r.wall_s for r in runs if r.who == "baseline"]
    current = [r.wall_s for r in runs if r.who == "current"]
    if not baseline or not current:
        return None
    return statistics.median(baseline) / statistics.median(current)


def run_batch(tree: Path, who: str, args: argparse.Namespace, out: Path) -> BatchRun:
    """One run of the tree's own batch_throughput.py, its judge the tree's package."""
    command = [sys.executable, str(tree / "benchmarks" / "batch_throughput.py")]
    command += ["--mode", args.mode, "--runs", "1", "--out", str(out)]
    if args.gpus is not None:
        command += ["--gpus", args.gpus]
    started = time.perf_counter()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    (out.parent / f"{out.name}.log").write_text(done.stdout + done.stderr)
    if done.returncode:
        tail = (done.stdout + done.stderr)[-2000:]
        raise SystemExit(f"the {who} run failed ({done.returncode}) after "
                         f"{time.perf_counter() - started:.0f} s:\n{tail}")  # fmt: skip
    return parse_run(who, done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", help="a checkout of the older commit")
    parser.add_argument("--order", default="c,b,c,b,c", help="c: this tree, b: the baseline")
    parser.add_argument("--mode", choices=("test", "benchmark"), default="benchmark")
    parser.add_argument("--gpus", help="passed to kernelboard judge")
    parser.add_argument("--out", default="batch-against-baseline")
    args = parser.parse_args()
    order = [step.strip() for step in args.order.split(",") if step.strip()]
    if not order or any(step not in WHO for step in order):
        parser.error(f"--order: a comma-separated list of c and b, got {args.order!r}")
    baseline_tree = Path(args.baseline).resolve()
    if not (baseline_tree / "benchmarks" / "batch_throughput.py").is_file():
        parser.error(f"{baseline_tree}: no benchmarks/batch_throughput.py there")
    trees = {"c": REPO, "b": baseline_tree}
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    runs: list[BatchRun] = []
    for index, step in enumerate(order, 1):
        folder = out / f"{index}-{WHO[step]}"
        run = run_batch(trees[step], WHO[step], args, folder)
        runs.append(run)
        print(f"run {index} ({run.who}): {run.records} records in {run.wall_s:.1f} s, "
              f"{run.per_hour:.0f} an hour, {run.not_expected} not as expected", flush=True)  # fmt: skip
    rows = [
        [i, r.who, f"{r.wall_s:.1f}", f"{r.per_hour:.0f}", r.not_expected]
        for i, r in enumerate(runs, 1)
    ]
    print(table(rows, ["run", "judge", "wall_s", "candidates/h", "not as expected"]))
    ratio = speedup_over_baseline(runs)
    if ratio is not None:
        print(f"this judge's rate over the baseline's (median wall times): {ratio:.2f}x")
    current = [i for i, step in enumerate(order, 1) if step == "c"]
    if len(current) >= 2:
        first, second = (out / f"{i}-current" / "records-1.jsonl" for i in current[-2:])
        compared = subprocess.run(
            [sys.executable, str(HERE / "compare_batches.py"), str(first), str(second)],
            capture_output=True,
            text=True,
        )
        print(f"this judge's runs {current[-2]} and {current[-1]}:\n{compared.stdout.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
