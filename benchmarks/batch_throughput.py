"""Throughput and verdicts of `kernelboard judge` on a batch, judged twice.

    python benchmarks/batch_throughput.py [CANDIDATES.jsonl EXPECTED.json] [--root REPO]
        [--mode test|benchmark] [--runs 2] [--gpus 0] [--in-flight K] [--load-inline] [--out DIR]
    python benchmarks/batch_throughput.py --kernelbench-problem PROBLEM.py --candidates 100
        [--mode benchmark] [--runs 2] [--out DIR]
    python benchmarks/batch_throughput.py --compare-pytest 6

The first form runs `kernelboard judge` (a subprocess, as a user runs it) on the batch `--runs`
times and prints, for each run, its wall time and candidates per hour (and, apart, when its first
record came and the rate of the records after it: the batch's pace once started, which a
server's warm judges keep from job to job), every verdict that
differs from its expectation (benchmarks/batch_candidates.py says what an expectation means),
then whether the runs agree: the same verdicts, and speedups tied with each other (their
intervals, from each benchmark case's `ci95_us`, overlap, or they differ by at most 2%: the
tie rule of docs/timing.md), with how far apart the speedups lie against their intervals
(benchmarks/compare_batches.py says how to read it). Without files it judges the 100-candidate
batch of batch_candidates.py (`--load-inline`: its 20 load_inline candidates, a cold build
cache on the first run) in a fresh repository that holds the problem's leaderboard.
`--kernelbench-problem` judges `--candidates` copies of the problem's own model (`class
ModelNew(Model)`, each source made distinct by a comment) against that KernelBench problem file
(KernelBench/levelN/NAME.py), imported into a fresh repository as `kernelboard import
kernelbench` does: every candidate must pass.

On a GPU each run also prints the peak device memory in use on the GPUs it judged on (NVML,
every 50 ms, as benchmarks/kernelbench_evaluator.py reads it for KernelBench's evaluator).
Each run also prints where a candidate's time went: the mean seconds per candidate of each
phase of the records' `phases` (pytest_kernelboard/batch/phases.py), which of them lie on the
critical path, and their sum beside the batch's wall time per candidate; `phases-N.json` in the
output folder keeps it. Then the critical path by category of candidate (the part of each id
before its first `-`): its serial phases' seconds summed, the first candidate's wait for the
batch's start on a row of its own (a hanging pair's timeout, say, shows as `hang`).

`--compare-pytest N` times N correct candidates judged by one `kernelboard judge` against N
separate `pytest` runs of the same files, each a submission in a scratch copy of the fixture
repository (tests/fixtures/core, leaderboard addone), and prints the ratio (target <= 0.5).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import batch_candidates as bc  # noqa: E402
from sweep_lane import MemoryPeaks  # noqa: E402

from pytest_kernelboard.batch.cli import pace_after_first  # noqa: E402
from pytest_kernelboard.batch.phases import SERIAL, account_lines, batch_account  # noqa: E402
from pytest_kernelboard.stats.scoring import TIE_TOLERANCE, tied  # noqa: E402

ONLY_LIBRARY = bc.ONLY_LIBRARY


def kernelboard_command() -> list[str]:
    """The `kernelboard` script beside this Python, else the module it runs."""
    script = Path(sys.executable).parent / "kernelboard"
    return [str(script)] if script.exists() else [sys.executable, "-m", "pytest_kernelboard.cli"]


def judge(
    leaderboard: str,
    paths: list[Path],
    root: Path,
    mode: str,
    out: Path,
    log: Path,
    gpus: str | None = None,
    in_flight: int | None = None,
) -> tuple[float, list[dict[str, Any]], list[float]]:
    """One `kernelboard judge` run: its wall time, its records (also written to `out`) and
    the seconds after the start at which each record came (read from its stdout as written).
    With BATCH_JUDGE_CPROFILE=F set, the judge runs under cProfile (its judging thread, the
    main one), the profile in F."""
    profile_to = os.environ.get("BATCH_JUDGE_CPROFILE")
    cli = [sys.executable, "-m", "cProfile", "-o", profile_to, "-m", "pytest_kernelboard.cli"]
    command = (cli if profile_to else kernelboard_command()) + ["judge", leaderboard]
    command += list(map(str, paths))
    command += ["--mode", mode, "--root", str(root)]  # the records on stdout, one a line
    command += ["--gpus", gpus] if gpus else []
    command += ["--in-flight", str(in_flight)] if in_flight else []
    started = time.perf_counter()
    records, arrivals = [], []
    with log.open("w") as stderr, out.open("w") as kept:
        judging = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        for line in judging.stdout:  # type: ignore[union-attr]
            if line.strip():
                arrivals.append(time.perf_counter() - started)
                records.append(json.loads(line))
                kept.write(line)
        returncode = judging.wait()
    wall = time.perf_counter() - started
    if returncode != 0:
        raise SystemExit(f"kernelboard judge exited with {returncode}; see {log}")
    return wall, records, arrivals


def after_the_first(arrivals: list[float]) -> tuple[float | None, float | None]:
    """When the first record came (seconds after the start), and the records after it per
    hour, from the first record's arrival to the last's: the batch's pace without its start
    (the judges' processes, torch, the reference's timing, the first candidate's worker).
    None where there is no record, or no second one."""
    if not arrivals:
        return None, None
    return arrivals[0], pace_after_first(arrivals[0], arrivals[-1], len(arrivals))


# -- expectations ----------------------------------------------------------------------------
def effective(expect: dict[str, Any], mode: str, gpu: bool) -> dict[str, Any]:
    """The expectation with its device and mode overrides applied."""
    modes = ("test", "benchmark")
    on_cpu = {} if gpu else expect.get("cpu", {})
    result = {k: v for k, v in expect.items() if k not in ("cpu", *modes)}
    result.update({k: v for k, v in on_cpu.items() if k not in modes})
    if not gpu:
        result["faster"] = result.get("faster_cpu")
    result.update(expect.get(mode, {}))
    result.update(on_cpu.get(mode, {}))
    return result


def faster(record: dict[str, Any]) -> bool:
    """Reliably faster than the reference: speedup above 1 and not tied with it."""
    return bool(record["speedup"] is not None and record["speedup"] > 1 and not record["tied"])


def mismatches(
    record: dict[str, Any], expect: dict[str, Any], mode: str, gpu: bool
) -> list[tuple[str, Any, Any]]:
    """(what, expected, got) for every way the record misses its expectation."""
    want = effective(expect, mode, gpu)
    found = []
    statuses = want["status"] if isinstance(want["status"], list) else [want["status"]]
    if record["status"] not in statuses:
        found.append(("status", "|".join(statuses), record["status"]))
    kinds = want.get("error_kind")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if "error_kind" in want and record["error_kind"] not in kinds:
        found.append(("error_kind", "|".join(map(str, kinds)), record["error_kind"]))
    # only_library_kernels is a benchmark-mode flag on a GPU, of a candidate that was timed.
    judged_library = mode == "benchmark" and gpu and record["status"] == "passed"
    expected_flags = {f for f in want.get("flags", []) if f != ONLY_LIBRARY or judged_library}
    got_flags = {f for f in record["flags"] if f != ONLY_LIBRARY or judged_library}
    if expected_flags != got_flags:
        found.append(("flags", sorted(expected_flags), sorted(got_flags)))
    timed = mode == "benchmark" and record["status"] == "passed"
    if timed and want.get("faster") is not None and faster(record) != want["faster"]:
        found.append(
            ("faster", want["faster"], f"speedup {record['speedup']}, tied {record['tied']}")
        )
    return found


# -- agreement between runs ------------------------------------------------------------------
def verdict(record: dict[str, Any]) -> tuple[str, str | None, tuple[str, ...]]:
    return record["status"], record["error_kind"], tuple(sorted(record["flags"]))


def case_speedups(record: dict[str, Any]) -> dict[str, tuple[float, list[float]]]:
    """Per benchmark case: (speedup, its interval), the interval the record gives the speedup
    (`speedup_ci95`: both sides' noise, or a case timed in turns its pairs'). A record without
    one: the reference's time over the case's interval, which holds only the candidate's noise
    (and, for a case timed in turns, half the pairs': each side carries half)."""
    found = {}
    for case in record["cases"]:
        if case["kind"] != "benchmark" or case["speedup"] is None:
            continue
        if case.get("speedup_ci95"):
            found[case["id"]] = (case["speedup"], list(case["speedup_ci95"]))
            continue
        if not case["ci95_us"]:
            continue
        reference, (low, high) = case["reference_us"], case["ci95_us"]
        interval = [reference / high if high > 0 else 0.0, reference / low if low > 0 else 1e30]
        found[case["id"]] = (case["speedup"], interval)
    return found


def compare_runs(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> dict[str, Any]:
    """Verdicts that differ, and speedups (per benchmark case) not tied with each other; with
    how far apart the speedups lie against their intervals (`calibration`)."""
    by_id = {r["id"]: r for r in second}
    differ, untied, compared = [], [], 0
    # (the speedup's distance from 1, |ln| of the two runs' mean; |z|; chance), per case read
    gaps: list[tuple[float, float, float]] = []
    for record in first:
        other = by_id.get(record["id"])
        if other is None:
            differ.append((record["id"], verdict(record), None))
            continue
        if verdict(record) != verdict(other):
            differ.append((record["id"], verdict(record), verdict(other)))
        mine, theirs = case_speedups(record), case_speedups(other)
        for case_id in mine.keys() & theirs.keys():
            compared += 1
            (a, a_int), (b, b_int) = mine[case_id], theirs[case_id]
            if not tied(a, a_int, b, b_int):
                untied.append((record["id"], a, b))
            gap = standardized_gap(a, a_int, b, b_int)
            if gap is not None:
                gaps.append((abs(math.log(a * b)) / 2, *gap))
    return {
        "differ": differ,
        "untied": untied,
        "compared": compared,
        "calibration": calibration([(z, chance) for _, z, chance in gaps]),
        "gaps": gaps,
    }


# -- are the intervals as wide as the runs' differences? -----------------------------------------
Z95 = 1.959964  # a 95% interval's half-width in standard errors


def standardized_gap(
    a: float, a_interval: list[float], b: float, b_interval: list[float]
) -> tuple[float, float] | None:
    """How far apart two runs' speedups of one case lie, in the standard errors their
    intervals imply (a log interval's half-width over 1.96, as stats/scoring reads a widened
    interval), and the chance that exact 95% intervals of those widths would not tie:
    (|z|, that chance). None where an interval is open or empty."""
    errors = [_log_se(interval) for interval in (a_interval, b_interval)]
    if a <= 0 or b <= 0 or None in errors or not all(errors):
        return None
    se_a, se_b = errors
    joint = math.hypot(se_a, se_b)
    # Untied: the intervals do not overlap and the speedups differ by more than TIE_TOLERANCE.
    apart = max(Z95 * (se_a + se_b), math.log1p(TIE_TOLERANCE))
    return abs(math.log(a / b)) / joint, math.erfc(apart / joint / math.sqrt(2))


def _log_se(interval: list[float]) -> float | None:
    low, high = interval
    if not (0 < low <= high) or math.isinf(high):
        return None
    return math.log(high / low) / (2 * Z95)


def calibration(gaps: list[tuple[float, float]]) -> dict[str, Any]:
    """The speedups' gaps between the runs against their intervals: the median |z| (0.674
    where the intervals are exact), the share beyond 1.96 (5%), and how many untied speedups
    exact intervals of these widths would give on average (`expected_untied`): one run pair's
    untied count read against chance, not against zero."""
    if not gaps:
        return {"compared": 0}
    sizes = [z for z, _ in gaps]
    return {
        "compared": len(gaps),
        "median_z": round(statistics.median(sizes), 3),
        "beyond_1_96": round(sum(z > Z95 for z in sizes) / len(sizes), 4),
        "expected_untied": round(sum(chance for _, chance in gaps), 2),
    }


# -- printing --------------------------------------------------------------------------------
def calibration_line(found: dict[str, Any]) -> str:
    if not found.get("compared"):
        return "the speedups' intervals: none to hold against each other"
    return (
        f"the speedups' gaps against their intervals: median |z| {found['median_z']:.2f} "
        f"(0.67 for exact 95% intervals), {100 * found['beyond_1_96']:.1f}% beyond 1.96 (5%); "
        f"exact intervals of these widths would leave {found['expected_untied']:.2f} untied "
        "on average"
    )


def table(rows: list[list[Any]], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def category(candidate_id: str) -> str:
    return candidate_id.split("-", 1)[0]


def verdict_table(records: list[dict[str, Any]]) -> str:
    counts = Counter((category(r["id"]), r["status"]) for r in records)
    categories = sorted({c for c, _ in counts})
    statuses = ["passed", "failed", "error"]
    rows = [[c, *(counts[(c, s)] for s in statuses)] for c in categories]
    return table(rows, ["category", *statuses])


# The serial phases a category's row names on its own; the rest are summed as `other`.
NAMED_SERIAL = ("prepare_wait", "closing", "turn", "timing", "census")
START = "(the batch's start)"  # the first candidate's wait for its judge's start, on its own row


def serial_by_category(records: list[dict[str, Any]]) -> str:
    """Where a batch's critical path went: per category of candidate, the seconds of its
    serial phases (batch/phases.py) summed over its candidates, most first. The first
    candidate's `prepare_wait` is the batch's start (judge, zygote, first worker) and has a
    row of its own."""
    seconds: dict[str, Counter[str]] = {}
    counts: Counter[str] = Counter()
    for index, record in enumerate(records):
        phases = dict(record.get("phases") or {})
        if index == 0 and phases.get("prepare_wait"):
            seconds.setdefault(START, Counter())["prepare_wait"] += phases.pop("prepare_wait")
            counts[START] += 1
        name = category(record["id"])
        counts[name] += 1
        row = seconds.setdefault(name, Counter())
        for phase in SERIAL:
            key = phase if phase in NAMED_SERIAL else "other"
            row[key] += float(phases.get(phase, 0.0))
    rows = sorted(seconds.items(), key=lambda item: -sum(item[1].values()))
    total = sum(sum(row.values()) for _, row in rows)
    lines = [
        [name, counts[name], f"{sum(row.values()):.1f}"]
        + [f"{row[p]:.1f}" for p in (*NAMED_SERIAL, "other")]
        for name, row in rows
    ]
    lines.append(["all", len(records), f"{total:.1f}", *[""] * (len(NAMED_SERIAL) + 1)])
    return table(lines, ["category", "n", "serial_s", *NAMED_SERIAL, "other"])


def report_batch(args: argparse.Namespace) -> int:
    """Judge the batch `args` names; its records and logs go to --out, else to a scratch folder
    that is kept (and printed). With --out, the scratch folder (the repository copy) goes."""
    scratch = Path(tempfile.mkdtemp(prefix="kb-throughput-"))
    try:
        return _report_batch(args, scratch)
    finally:
        if args.out:
            shutil.rmtree(scratch, ignore_errors=True)


def _report_batch(args: argparse.Namespace, scratch: Path) -> int:
    out = Path(args.out) if args.out else scratch
    out.mkdir(parents=True, exist_ok=True)
    if args.kernelbench_problem:
        problem = Path(args.kernelbench_problem)
        args.root = str(kernelbench_repo(problem, scratch / "repo", args.benchmark_scale))
        args.leaderboard = leaderboard_of(Path(args.root))
        lines, expected_path = model_copies(args.copies, out)
    elif args.candidates:
        lines, expected_path = Path(args.candidates), Path(args.expected)
    else:
        stem = "load_inline" if args.load_inline else "batch"
        specs = bc.load_inline_batch(args.salt) if args.load_inline else bc.main_batch()
        lines, expected_path = bc.write_batch(specs, out, stem)
    root = Path(args.root) if args.root else bc.make_repo(scratch / "repo")
    expected = json.loads(expected_path.read_text())
    gpu = args.device == "gpu" or (args.device == "auto" and has_gpu())
    print(f"{lines}: {len(expected)} candidates, {args.mode} mode, on {'GPU' if gpu else 'CPU'}")
    runs = []
    memory = MemoryPeaks() if gpu else None
    watched = judged_gpus(args.gpus, memory)
    for index in range(args.runs):
        if memory is not None:
            memory.begin(watched)
        wall, records, arrivals = judge(
            args.leaderboard,
            [lines],
            root,
            args.mode,
            out / f"records-{index + 1}.jsonl",
            out / f"judge-{index + 1}.log",
            args.gpus,
            args.in_flight,
        )
        wrong = []
        for record in records:
            for what, want, got in mismatches(record, expected[record["id"]], args.mode, gpu):
                wrong.append(
                    [record["id"], what, want, got, record["message"][:70].replace("\n", " ")]
                )
        missing = sorted(set(expected) - {r["id"] for r in records})
        peak = memory.end(watched) if memory is not None else None
        runs.append((wall, records, wrong, missing, arrivals))
        print(f"\nrun {index + 1}: {len(records)} records in {wall:.1f} s")
        first, then = after_the_first(arrivals)
        if then is not None:
            print(f"  first record after {first:.1f} s; the {len(records) - 1} after it at "
                  f"{then:.0f} an hour")  # fmt: skip
        if peak is not None:
            print(f"  peak device memory in use: {peak / 1e9:.2f} GB (GPUs {watched})")
        for line in (out / f"judge-{index + 1}.log").read_text().splitlines():
            if "(reference)" in line:  # its time in each worker that timed it
                print("  " + line)
        print(verdict_table(records))
        account = batch_account([r["phases"] for r in records if r.get("phases")])
        (out / f"phases-{index + 1}.json").write_text(json.dumps(account, indent=1) + "\n")
        print("\n".join(account_lines(account, wall)))
        print("the serial phases' seconds by category, summed over its candidates:")
        print(serial_by_category(records))
        calls = [c["calls"] for r in records for c in r["cases"] if c.get("calls")]
        if calls:  # what the stopping rule asked for: most of `timing` on a GPU
            print(
                f"  timed calls a timed case: mean {statistics.mean(calls):.1f}, "
                f"median {statistics.median(calls):g}, of {len(calls)} cases"
            )
        if wrong:
            print(f"\nverdicts not as expected ({len(wrong)}):")
            print(table(wrong, ["id", "what", "expected", "got", "message"]))
        if missing:
            print(f"no record for: {', '.join(missing)}")
    summary = []
    for index, (wall, records, wrong, missing, arrivals) in enumerate(runs, 1):
        as_expected = len(records) - len({row[0] for row in wrong})
        rate = 3600 * len(records) / wall if wall > 0 else 0.0
        first, then = after_the_first(arrivals)
        summary.append(
            [
                index,
                f"{wall:.1f}",
                f"{rate:.0f}",
                "-" if first is None else f"{first:.1f}",
                "-" if then is None else f"{then:.0f}",
                f"{as_expected}/{len(expected)}",
                len(missing),
            ]
        )
    if len(runs) > 1:
        agreement = compare_runs(runs[0][1], runs[1][1])
        print(f"\nruns 1 and 2: {len(agreement['differ'])} verdicts differ")
        for row in agreement["differ"]:
            print(f"  {row[0]}: {row[1]} vs {row[2]}")
        print(
            f"speedups compared: {agreement['compared']}, not tied with each other: "
            f"{len(agreement['untied'])}"
        )
        for candidate_id, a, b in agreement["untied"]:
            print(f"  {candidate_id}: {a:.3f} vs {b:.3f}")
        print(calibration_line(agreement["calibration"]))
    print(f"\nrecords and logs: {out}\n")
    columns = ["run", "wall_s", "candidates/h", "first_record_s", "then/h", "as expected"]
    print(table(summary, [*columns, "missing"]))
    if len(runs) > 1:
        print(
            f"verdicts equal across runs: {len(runs[0][1]) - len(agreement['differ'])}/"
            f"{len(runs[0][1])}; speedups tied across runs: "
            f"{agreement['compared'] - len(agreement['untied'])}/{agreement['compared']}"
        )
    return 0


# -- N copies of a KernelBench problem's own model ---------------------------------------------
def kernelbench_repo(problem: Path, dest: Path, benchmark_scale: int = 1) -> Path:
    """A repository holding the one KernelBench problem (KernelBench/levelN/NAME.py), imported
    as a user does; benchmark_scale > 1 shrinks its benchmark cases' shapes as its correctness
    cases' are (for a CPU, where KernelBench's sizes take seconds per call)."""
    level = problem.resolve().parent.name
    if not problem.is_file() or not level.startswith("level") or not level[5:].isdigit():
        raise SystemExit(f"--kernelbench-problem {problem}: not a KernelBench levelN/NAME.py file")
    source = dest.parent / "kernelbench" / level
    source.mkdir(parents=True, exist_ok=True)
    shutil.copy(problem, source / problem.name)
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest_kernelboard.cli", "import", "kernelbench"]
    command += [str(source.parent), "--level", level[5:], "--problems", problem.stem]
    command += ["--dest", "leaderboards/kernelbench"]
    result = subprocess.run(command, cwd=dest, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"kernelboard import kernelbench failed:\n{result.stderr}")
    if benchmark_scale != 1:
        for task in dest.glob("leaderboards/kernelbench/*/task.yml"):
            head, benchmarks = task.read_text().split("\nbenchmarks:\n", 1)
            benchmarks = re.sub(r"(?m)^(\s+)scale: 1$", rf"\1scale: {benchmark_scale}", benchmarks)
            task.write_text(f"{head}\nbenchmarks:\n{benchmarks}")
    return dest


def leaderboard_of(root: Path) -> str:
    """The name of the one leaderboard a fresh KernelBench repository holds."""
    for task in sorted(root.glob("leaderboards/kernelbench/*/task.yml")):
        for line in task.read_text().splitlines():
            if line.startswith("name:"):
                return line.split(":", 1)[1].strip()
    raise SystemExit(f"{root}: the import wrote no leaderboard")


def model_copies(count: int, out: Path) -> tuple[Path, Path]:
    """`count` candidates that are the problem's own Model, each source distinct, all passing."""
    specs = [
        bc.Spec(
            f"model-{index:04d}",
            f"# candidate {index}: the problem's own model\nfrom problem import Model\n\n\n"
            "class ModelNew(Model):\n    pass\n",
            {"status": "passed", "flags": [ONLY_LIBRARY]},
        )
        for index in range(count)
    ]
    return bc.write_batch(specs, out, "model_copies")


def judged_gpus(gpus: str | None, memory: MemoryPeaks | None) -> list[int]:
    """The GPUs a run judges on (--gpus, else every one NVML sees)."""
    if gpus:
        return [int(gpu) for gpu in gpus.split(",")]
    return list(range(memory.count())) if memory is not None else []


def has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


# -- one judge against separate pytest runs --------------------------------------------------
CORRECT_ADDONE = [
    "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n",
    "import torch\n\n\ndef custom_kernel(data):\n    x, out = data\n    return torch.add(x, 1, out=out)\n",
    "def custom_kernel(data):\n    x, out = data\n    out.copy_(x)\n    return out.add_(1)\n",
    "import torch\n\n\ndef custom_kernel(data):\n    x, out = data\n"
    "    return torch.add(x, torch.ones_like(x), out=out)\n",
    "def custom_kernel(data):\n    x, out = data\n    out[:] = x + 1\n    return out\n",
    "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x.add(1.0))\n",
]


def compare_pytest(args: argparse.Namespace) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="kb-compare-"))
    root = scratch / "repo"
    shutil.copytree(Path(args.fixture), root)
    paths = []
    for index in range(args.compare_pytest):
        folder = root / "submissions" / args.compare_leaderboard / f"batch{index:02d}"
        folder.mkdir(parents=True)
        source = CORRECT_ADDONE[index % len(CORRECT_ADDONE)]
        paths.append(folder / "submission.py")
        paths[-1].write_text(f"# candidate {index}\n{source}")
    # The same sources as a JSONL: files given by path take their names (all submission.py)
    # as ids, which a batch refuses as duplicates.
    lines = scratch / "candidates.jsonl"
    lines.write_text(
        "".join(
            json.dumps({"id": path.parent.name, "source": path.read_text()}) + "\n"
            for path in paths
        )
    )
    judge_wall, records, _ = judge(
        args.compare_leaderboard,
        [lines],
        root,
        "test",
        scratch / "records.jsonl",
        scratch / "judge.log",
    )
    bad = [r["id"] for r in records if r["status"] != "passed"]
    pytest_walls = []
    for path in paths:
        started = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                str(path.relative_to(root)),
                "-q",
                "-p",
                "no:cacheprovider",
            ],
            cwd=root,
            capture_output=True,
            text=True,
        )
        pytest_walls.append(time.perf_counter() - started)
        if result.returncode != 0:
            bad.append(f"pytest {path.relative_to(root)}: exit {result.returncode}")
    total = sum(pytest_walls)
    rows = [
        ["kernelboard judge (one run)", f"{judge_wall:.1f}", f"{judge_wall / len(paths):.1f}"],
        [f"pytest ({len(paths)} runs)", f"{total:.1f}", f"{total / len(paths):.1f}"],
    ]
    print(table(rows, ["how", "wall_s", "per candidate"]))
    print(f"ratio judge / pytest: {judge_wall / total:.2f} (target <= 0.5)")
    if bad:
        print(f"not passed: {', '.join(bad)}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("candidates", nargs="?", help="a JSONL of {id, source, lang}")
    parser.add_argument("expected", nargs="?", help="its expectations (JSON)")
    parser.add_argument("--root", help="the repository (default: a fresh one with the problem)")
    parser.add_argument("--leaderboard", default=bc.LEADERBOARD)
    parser.add_argument("--mode", choices=("test", "benchmark"), default="test")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    parser.add_argument("--gpus", metavar="0,1,...", help="passed to kernelboard judge")
    parser.add_argument("--in-flight", type=int, metavar="K", help="passed to kernelboard judge")
    parser.add_argument("--load-inline", action="store_true", help="the 20 load_inline candidates")
    parser.add_argument(
        "--kernelbench-problem",
        metavar="PROBLEM.py",
        help="judge copies of this KernelBench problem's own model (KernelBench/levelN/NAME.py)",
    )
    parser.add_argument(
        "--candidates",
        dest="copies",
        type=int,
        default=100,
        metavar="N",
        help="with --kernelbench-problem: how many copies (default 100)",
    )
    parser.add_argument(
        "--benchmark-scale",
        type=int,
        default=1,
        metavar="S",
        help="with --kernelbench-problem: divide the benchmark shapes by S (default 1: "
        "KernelBench's own sizes; a CPU needs about 8)",
    )
    parser.add_argument("--salt", default=None, help="load_inline sources' salt (default: random)")
    parser.add_argument("--out", help="where records and logs go (default: a temporary folder)")
    parser.add_argument(
        "--compare-pytest", type=int, metavar="N", help="N candidates, judge vs pytest"
    )
    parser.add_argument("--fixture", default=str(bc.ROOT / "tests" / "fixtures" / "core"))
    parser.add_argument("--compare-leaderboard", default="addone")
    args = parser.parse_args(argv)
    if args.compare_pytest:
        return compare_pytest(args)
    if args.kernelbench_problem and (args.candidates or args.load_inline):
        parser.error("--kernelbench-problem makes its own candidates: give no files")
    if bool(args.candidates) != bool(args.expected):
        parser.error("give both CANDIDATES.jsonl and EXPECTED.json, or neither")
    if args.load_inline and args.salt is None:
        import secrets

        args.salt = secrets.token_hex(4)
    return report_batch(args)


if __name__ == "__main__":
    sys.exit(main())
