"""Why one candidate's timed case stops after five calls and the next one's after twenty.

    python benchmarks/probes/timed_calls.py KERNELBENCH_PROBLEM.py [--candidates 40]
        [--variants default,in_flight_3,spares_running,spares_running_cold] [--json OUT]

Copies of a KernelBench problem's own model (`class ModelNew(Model)`, as
`benchmarks/batch_throughput.py --kernelbench-problem` makes them) are judged in benchmark mode
on cuda:0 by a batch judge in this process, once per variant, each variant in a fresh Python.
Every timed case's per-call samples are kept (the stopping rule stops at five calls when all
five lie within 1% of each other: a case that needs more had a call outside that band), with
what the judge had in flight while the case was timed: its spare workers, the workers of the
candidates prepared ahead (paused), and where each sample lies against the case's median.

Variants:
- `default`: as `kernelboard judge --gpus 0` judges (four candidates in flight; the pool's
  spare workers paused while a case is timed, WorkerPool.quiet).
- `in_flight_3`: three in flight (`--in-flight 3`), as each of several GPUs' judges keeps.
- `spares_running`: the spares left to start while a case is timed (their driver start, CUDA
  context, cuBLAS set-up and profiler's first start on the device the case is timed on).
- `spares_running_cold`: the same, the spares starting without the blocking kernel's
  compile (the first calibration then pays for it).
- `no_timing_core`: the judge keeps no CPU core for timed calls (KERNELBOARD_TIMING_CORE=0):
  each case's timed calls go to the CPU its probe chose, beside whatever else runs there
  (judge/timing_core.py).
- `repeat`: each candidate's case timed a second time in the same worker right after the
  first: if the two medians agree far better than the copies' medians do, a case's time is
  set by its worker process; if they differ as much, by the moment.
- `no_turns`: a host-bound case's candidates timed alone (KERNELBOARD_PAIRED_TURNS=0), not in
  turns with a worker of the reference's (evaluation/paired.py; in the default variant every
  timing loop of a turn is a case of the output, the candidate's and the reference's in turn).
- `python_switch`: the judge keeps Python's own 5 ms GIL switch interval while a case is timed
  (KERNELBOARD_TIMING_SWITCH_US=0), instead of handing the GIL back to the timing thread within
  200 us (batch/gil_handoff.py): what the judge's other threads add to each call's round trip.
- `wake_in_turns`: each turn of a case timed in turns spins the GPU awake after an idle gap
  (its warm call and its timed calls), as a case timed alone does; by default turns run
  without the spin (TimingPlan.wake): their calls are host-bound.
- `warmup_in_turns`: each later turn of a case timed in turns makes a warm-up call first, as
  before timing method 8; by default a side whose last turn ended warm makes none, its first
  call warmed by the untimed call as every later one is (TimingPlan.warm_start).
- `hugepages`: the workers' heaps on transparent huge pages (glibc's malloc asked for them,
  `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, and Python's objects allocated through it,
  `PYTHONMALLOC=malloc`): if a process's host time is set by where its heap's 4 KiB pages
  landed in the physically indexed caches, 2 MiB pages take that away.

Each variant reports how far the copies' case medians spread (the same code: any spread is the
timing's) and where the reference's median lies among them.

Each variant also reports the judge process's own CPU seconds (every thread of it, none of its
workers'): near the wall time, its Python is what the batch waits for.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VARIANTS = (
    "default",
    "in_flight_3",
    "spares_running",
    "spares_running_cold",
    "no_timing_core",
    "repeat",
    "hugepages",
    "no_turns",
    "python_switch",
    "wake_in_turns",
    "warmup_in_turns",
)
# What each call's reply says of it (worker/timing.py): the worker's time before the flush (its
# wake spin among it), its whole timed window, the call's own host time, and after it.
CALL_PARTS = ("pre_us", "wall_us", "call_us", "device_us", "post_us")
WOKE_ABOVE_US = 1500.0  # a pre_us this long held the 2 ms wake spin


def _change_turn_plans(**changes: bool) -> None:
    """Every turn of a case timed in turns planned with `changes` (evaluation/paired.py)."""
    from dataclasses import replace

    from pytest_kernelboard.evaluation import paired

    turn_plan = paired.PairedTiming._turn_plan
    paired.PairedTiming._turn_plan = lambda self, *args, **kwargs: replace(
        turn_plan(self, *args, **kwargs), **changes
    )


def run_variant(problem: Path, candidates: int, variant: str, work: Path, scale: int = 1) -> dict:
    """In this (fresh) process: judge the copies once under `variant`; per timed case, its
    samples and what was in flight."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    sys.path.insert(0, str(REPO))
    import batch_throughput as bt

    from pytest_kernelboard.batch import judge as batch_judge
    from pytest_kernelboard.batch.candidates import load_candidates
    from pytest_kernelboard.evaluation.session import JudgingSession
    from pytest_kernelboard.judge import measure
    from pytest_kernelboard.supervisor import pool as pool_module

    root = bt.kernelbench_repo(problem, work / "repo", scale)
    leaderboard = bt.leaderboard_of(root)
    jsonl, _ = bt.model_copies(candidates, work)
    judges: list = []
    original_init = batch_judge.BatchJudge.__init__

    def keep_judge(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        judges.append(self)

    batch_judge.BatchJudge.__init__ = keep_judge
    cases: list[dict] = []
    original_measure = measure.CaseTimer.measure

    if variant == "hugepages":
        from pytest_kernelboard.supervisor import launch as launch_module

        plain_environment = launch_module.worker_environment

        def huge_page_environment(*args, **kwargs):
            env = plain_environment(*args, **kwargs)
            env.update(GLIBC_TUNABLES="glibc.malloc.hugetlb=1", PYTHONMALLOC="malloc")
            return env

        launch_module.worker_environment = huge_page_environment
    if variant == "no_timing_core":
        os.environ["KERNELBOARD_TIMING_CORE"] = "0"
    if variant == "no_turns":
        os.environ["KERNELBOARD_PAIRED_TURNS"] = "0"
    if variant == "python_switch":
        os.environ["KERNELBOARD_TIMING_SWITCH_US"] = "0"
    if variant == "wake_in_turns":
        _change_turn_plans(wake=True)
    if variant == "warmup_in_turns":
        _change_turn_plans(warm_start=False)
    if variant.startswith("spares_running"):
        pool_module.WorkerPool.quiet = lambda self: nullcontext()
    if variant == "spares_running_cold":

        def cold_spawn(self):
            return self._spawner.submit(
                pool_module.WorkerProcess, launcher=self.launcher, warm_timing=False
            ).result()

        pool_module.WorkerPool._spawn = cold_spawn

    calls: list[dict] = []  # the case being timed: each call's reply parts (one thread times)
    original_one_call = measure.CaseTimer._one_call

    def recorded_one_call(self, *args, **kwargs):
        entered = time.perf_counter()
        pristine, reply = original_one_call(self, *args, **kwargs)
        parts = {k: round(float(reply[k]), 1) for k in CALL_PARTS if k in reply}
        if "cpu" in reply:  # the CPU the worker's case probe chose (worker/cpu_choice.py)
            parts["cpu"] = int(reply["cpu"])
        left = time.perf_counter()
        parts["one_call_us"] = round((left - entered) * 1e6, 1)
        parts["entered"], parts["left"] = entered, left
        calls.append(parts)
        return pristine, reply

    measure.CaseTimer._one_call = recorded_one_call

    def recorded_measure(self, case, plan, timeout_s, label, *args, **kwargs):
        pool = judges[0].session.pool if judges else None
        spares = [w.process.pid for w in pool.spare_workers()] if pool else []
        started = time.perf_counter()
        calls.clear()
        m = original_measure(self, case, plan, timeout_s, label, *args, **kwargs)
        repeat = None
        if variant == "repeat" and not in_reference[0] and m.samples_us:
            repeat = list(
                original_measure(self, case, plan, timeout_s, label, *args, **kwargs).samples_us
            )
        # The judge's time between one call's return and the next's start: the idle gap the
        # worker's wake spin (worker/timing.py, WAKE_AFTER_IDLE_S) answers to, in part.
        for before, after in itertools.pairwise(calls):
            after["gap_us"] = round((after["entered"] - before["left"]) * 1e6, 1)
        for call in calls:
            del call["entered"], call["left"]
        samples = list(m.samples_us)
        median = statistics.median(samples) if samples else 0.0
        cases.append(
            {
                "label": label,
                "reference": in_reference[0],
                "calls": len(samples),
                "warmup_calls": m.warmup_calls,
                "stop_reason": m.stop_reason,
                "samples_us": [round(s, 2) for s in samples],
                "off_median_pct": [round(100 * (s / median - 1), 2) for s in samples],
                "spares": len(spares),
                "loop_s": round(time.perf_counter() - started, 4),
                "parts_s": {k: round(v, 4) for k, v in m.wall_s.items()},
                "warm_calls": m.warm_calls,
                "per_call": list(calls),
                **({"repeat_samples_us": [round(x, 2) for x in repeat]} if repeat else {}),
            }
        )
        return m

    measure.CaseTimer.measure = recorded_measure
    in_reference = [False]  # the reference's workers are timed inside time_references
    original_references = JudgingSession.time_references

    def marked_references(self, *args, **kwargs):
        in_reference[0] = True
        try:
            return original_references(self, *args, **kwargs)
        finally:
            in_reference[0] = False

    JudgingSession.time_references = marked_references
    in_flight = 3 if variant == "in_flight_3" else None
    started, cpu_started = time.perf_counter(), os.times()
    records = list(
        batch_judge.judge_many(
            leaderboard,
            load_candidates([jsonl]),
            mode="benchmark",
            root=root,
            gpus=[0],
            in_flight=in_flight,
        )
    )
    wall, cpu = time.perf_counter() - started, os.times()
    return {
        "variant": variant,
        "wall_s": round(wall, 2),
        "judge_cpu_s": round(cpu.user + cpu.system - cpu_started.user - cpu_started.system, 2),
        "passed": sum(r["status"] == "passed" for r in records),
        "tied": sum(bool(r.get("tied")) for r in records),
        "cases": cases,
        "phases": [r.get("phases", {}) for r in records],
        "speedups": [speedup_of(r) for r in records if speedup_of(r)],
    }


def speedup_of(record: dict) -> dict | None:
    """A copy's timed case's speedup, its interval and its turns' ratios (where it had turns)."""
    for case in record.get("cases", []):
        if case.get("kind") == "benchmark" and case.get("speedup") and case.get("speedup_ci95"):
            return {
                "speedup": case["speedup"],
                "ci95": case["speedup_ci95"],
                "turn_ratios": case.get("turn_ratios", []),
            }
    return None


def speedups_line(speedups: list[dict]) -> str:
    """How the copies' speedups over the reference (the same code) spread, against what their
    intervals say: with turns, the sd of their logs should match about half a mean half-width,
    and few should lie beyond their interval."""
    if len(speedups) < 2:
        return ""
    logs = [math.log(s["speedup"]) for s in speedups]
    halves = [math.log(s["ci95"][1] / s["ci95"][0]) / 2 for s in speedups]
    faster = sum(s["ci95"][0] > 1 for s in speedups)
    slower = sum(s["ci95"][1] < 1 for s in speedups)
    turns = sum(bool(s["turn_ratios"]) for s in speedups)
    values = sorted(s["speedup"] for s in speedups)
    return (
        f"\n  speedups over the reference ({turns} of {len(speedups)} in turns): "
        f"{values[0]:.3f} / {statistics.median(values):.3f} / {values[-1]:.3f}, sd of ln "
        f"{statistics.stdev(logs):.3f}; intervals' mean half-width (ln) "
        f"{statistics.mean(halves):.3f}; faster beyond it {faster}, slower {slower}"
    )


def summary(result: dict) -> str:
    candidates = [c for c in result["cases"] if not c["reference"]]
    calls = [c["calls"] for c in candidates]
    if not calls:
        return (
            f"{result['variant']:<14} wall {result['wall_s']:6.1f} s  passed "
            f"{result['passed']}: no candidate's case was timed (its judge's records say why)"
        )
    at_five = sum(n <= 5 for n in calls)
    outside = [abs(p) for c in candidates for p in c["off_median_pct"]]
    far = sum(p > 0.5 for p in outside)
    serial = ("prepare_wait", "turn", "closing", "calibrate", "benchmark_check", "timing")
    phases = result["phases"]
    means = {k: statistics.mean(p.get(k, 0.0) for p in phases) for k in serial} if phases else {}
    per_call = [call for c in candidates for call in c.get("per_call", [])]
    woke = sum(call.get("pre_us", 0.0) > WOKE_ABOVE_US for call in per_call)
    parts = {
        k: statistics.mean(call[k] for call in per_call if k in call) / 1e3
        for k in ("one_call_us", "pre_us", "wall_us", "post_us", "gap_us")
        if any(k in call for call in per_call)
    }
    calls_line = (
        "\n  per call, ms: "
        + "  ".join(f"{k.removesuffix('_us')} {v:.2f}" for k, v in parts.items())
        + f"  wake spin before {woke} of {len(per_call)} calls"
        if per_call
        else ""
    )
    medians = sorted(statistics.median(c["samples_us"]) for c in candidates if c["samples_us"])
    references = [statistics.median(c["samples_us"]) for c in result["cases"] if c["reference"]]
    cpus = {call["cpu"] for c in result["cases"] for call in c.get("per_call", []) if "cpu" in call}
    spread_line = (
        f"\n  case medians, µs: {medians[0]:.1f} / {statistics.median(medians):.1f} / "
        f"{medians[-1]:.1f} (max/min {medians[-1] / medians[0]:.2f}, rsd "
        f"{statistics.pstdev(medians) / statistics.mean(medians):.1%}); reference workers "
        + ", ".join(f"{r:.1f}" for r in references)
        + (
            f" (their median / the copies' {statistics.median(references) / statistics.median(medians):.2f})"
            if references
            else ""
        )
        + f"; CPUs {sorted(cpus)}"
        if medians
        else ""
    )
    pairs = [
        math.log(statistics.median(c["samples_us"]) / statistics.median(c["repeat_samples_us"]))
        for c in candidates
        if c.get("repeat_samples_us")
    ]
    if pairs:
        logs = [math.log(m) for m in medians]
        spread_line += (
            f"\n  timed again in the same worker: |ln(first/second)| median "
            f"{statistics.median(abs(p) for p in pairs):.3f}, sd {statistics.pstdev(pairs):.3f} "
            f"over {len(pairs)}; the copies' ln medians sd {statistics.pstdev(logs):.3f}"
        )
    return (
        f"{result['variant']:<14} wall {result['wall_s']:6.1f} s  "
        f"judge CPU {result.get('judge_cpu_s', 0.0):6.1f} s  passed {result['passed']}  "
        f"calls mean {statistics.mean(calls):5.1f} median {statistics.median(calls):4.1f}  "
        f"at 5: {at_five}/{len(calls)}  samples > 0.5% off their median: {far}/{len(outside)}  "
        + "  ".join(f"{k} {v:.3f}" for k, v in means.items())
        + calls_line
        + spread_line
        + speedups_line(result.get("speedups", []))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", type=Path)
    parser.add_argument("--candidates", type=int, default=40)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--benchmark-scale", type=int, default=1, help="shrink the timed shapes (a CPU's check)"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a variant, in this process
    args = parser.parse_args(argv)
    if args.one:
        with tempfile.TemporaryDirectory(prefix="kb-timed-calls-") as work:
            result = run_variant(
                args.problem, args.candidates, args.one, Path(work), args.benchmark_scale
            )
        print(json.dumps(result))
        return 0
    results = []
    for variant in args.variants.split(","):
        if variant not in VARIANTS:
            parser.error(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
        command = [sys.executable, __file__, str(args.problem), "--one", variant]
        command += ["--candidates", str(args.candidates)]
        command += ["--benchmark-scale", str(args.benchmark_scale)]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
        if done.returncode != 0:
            print(f"{variant}: exit {done.returncode}\n{done.stderr[-3000:]}")
            continue
        result = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(result)
        print(summary(result), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
