"""How soon a batch judge's first record comes, with its zygote started before the judge
imports torch (supervisor/launch.py, prestart_zygote) and without.

    python benchmarks/probes/first_record.py [--repeats 5] [--candidates 4] [--gpus 0]
        [--root REPO --leaderboard NAME]

Each run is a fresh Python judging copies of the leaderboard's correct solution in benchmark
mode (default: the test fixture's `addone`), the two variants taking turns; `off` makes
prestart_zygote do nothing, as the judge was before it. Prints, per variant, the medians of the
time from the interpreter's start to the first record and to the last. Sandboxed as a runner
is (KERNELBOARD_SANDBOX=require): without the sandbox there is no zygote.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RUN = """
import json, sys, time
started = time.perf_counter()
from pathlib import Path
if sys.argv[1] == "off":
    from pytest_kernelboard.supervisor import launch
    launch.prestart_zygote = lambda: None
from pytest_kernelboard.batch import Candidate, judge_many
root, leaderboard, count = Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
gpus = [int(g) for g in sys.argv[5].split(",")] if sys.argv[5] else None
source = next((root / "leaderboards").rglob(f"{leaderboard}/solutions/correct/*.py")).read_text()
first = None
for record in judge_many(leaderboard, [Candidate(f"c{i}", source) for i in range(count)],
                         mode="benchmark", root=root, gpus=gpus):
    assert record["status"] == "passed", record["message"]
    first = first or time.perf_counter() - started
print(json.dumps({"first_s": first, "all_s": time.perf_counter() - started}))
"""


def run(variant: str, args: argparse.Namespace) -> dict[str, float]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN,
            variant,
            str(args.root),
            args.leaderboard,
            str(args.candidates),
            args.gpus,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        env={**os.environ, "KERNELBOARD_SANDBOX": "require"},
    )
    if done.returncode != 0:
        sys.exit(f"{variant}: the judge failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--gpus", default="", help="as kernelboard judge --gpus (default: all)")
    parser.add_argument("--root", type=Path, default=REPO / "tests" / "fixtures" / "core")
    parser.add_argument("--leaderboard", default="addone")
    args = parser.parse_args()
    seen: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    for _ in range(args.repeats):
        for variant in seen:
            seen[variant].append(run(variant, args))
    for variant, runs in seen.items():
        first = statistics.median(r["first_s"] for r in runs)
        whole = statistics.median(r["all_s"] for r in runs)
        print(
            f"prestart {variant:3}: first record {first:6.2f} s, all {args.candidates} "
            f"{whole:6.2f} s (medians of {len(runs)})"
        )


if __name__ == "__main__":
    main()
