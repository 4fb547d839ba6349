"""Generate realistic synthetic result stores and time `kernelboard site build` on them.

    python benchmarks/site_scale.py                       # 50 leaderboards x 4 devices, 20,000 runs
    python benchmarks/site_scale.py --runs 20000 50000 100000 200000
    python benchmarks/site_scale.py --runs 2000 --keep /tmp/kb-scale   # keep the store and site

Each size gets a fresh repository in a temporary folder: leaderboards/<name>/task.yml and
results/ laid out exactly as `kernelboard results add` files them (one record per
evaluation, code content-addressed under results/_code/). The mix is realistic: authors
submit several versions over weeks, most runs are ranked, some fail, some are test-mode
runs without timings, and half of the leaderboards are closed (their code is rendered).
Only the build is timed, not the generation.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_kernelboard.results.store import code_relpath, record_relpath  # noqa: E402
from site_generator.build import build_site  # noqa: E402

DEVICES = ["H100", "A100", "L4", "B200", "H200", "T4", "MI300", "CPU"]
NOW = dt.datetime(2025, 9, 1, tzinfo=dt.UTC)
START = NOW - dt.timedelta(days=120)
N_TESTS, N_BENCH = 5, 6


def write_leaderboards(root: Path, boards: int, devices: list[str]) -> list[str]:
    names = []
    for i in range(boards):
        name = f"problem{i:03d}"
        folder = root / "leaderboards" / name
        folder.mkdir(parents=True)
        (folder / "reference.py").write_text("def ref_kernel(data):\n    return data\n")
        closed = i % 2 == 0
        deadline = (NOW - dt.timedelta(days=5)) if closed else (NOW + dt.timedelta(days=10 + i))
        tests = "\n".join(f'  - {{"size": {2**k}, "seed": {k}}}' for k in range(N_TESTS))
        bench = "\n".join(
            f'  - {{"size": {2 ** (10 + k)}, "seed": {100 + k}}}' for k in range(N_BENCH)
        )
        (folder / "task.yml").write_text(
            f"""files:
  - {{"name": "submission.py", "source": "@SUBMISSION@"}}
  - {{"name": "reference.py", "source": "reference.py"}}
lang: "py"
description: |
  # Problem {i}

  A synthetic problem for the site benchmark: transform a tensor of shape `(size,)`.
tests:
{tests}
benchmarks:
{bench}
ranking_by: "geom"
gpus: {json.dumps(devices)}
deadline: "{deadline:%Y-%m-%d %H:%M}"
"""
        )
        names.append(name)
    return names


def _timing(mean: float, rng: random.Random) -> dict:
    rel = rng.uniform(0.005, 0.05)
    return {
        "clock": "cuda_event",
        "n": 100,
        "mean_us": mean,
        "median_us": mean * (1 - rel / 4),
        "std_us": mean * rel * 2,
        "min_us": mean * (1 - rel * 2),
        "max_us": mean * (1 + rel * 4),
        "ci95_us": [mean * (1 - rel), mean * (1 + rel)],
    }


def _stable_hash(text: str) -> int:
    return int(hashlib.md5(text.encode()).hexdigest()[:8], 16)


def _code(author: str, board: str, version: int, rng: random.Random) -> str:
    lines = [
        f'"""{board}: submission by {author}, version {version}."""',
        "import torch",
        "import triton",
        "",
    ]
    for k in range(rng.randint(20, 60)):
        lines.append(
            f"BLOCK_{k} = {rng.choice([64, 128, 256, 512])}  # tuned on the benchmark shapes"
        )
    lines += ["", "", "def custom_kernel(data):", "    x, = data", "    return x.clone()", ""]
    return "\n".join(lines)


def generate(root: Path, boards: int, devices: list[str], runs: int, seed: int = 0) -> None:
    """Write `runs` records spread over boards x devices, with their code."""
    rng = random.Random(seed)
    names = write_leaderboards(root, boards, devices)
    # authors: about one per 25 runs overall; each works on a few leaderboards and mostly
    # on one device, submitting several versions
    n_authors = max(4, runs // 25)
    authors = [f"user{i:05d}" for i in range(n_authors)]
    reference_us = {(b, d): rng.uniform(20, 5000) for b in names for d in devices}
    skill = {a: rng.uniform(1.0, 6.0) for a in authors}
    versions: dict[tuple[str, str], int] = {}
    environment = {
        d: {
            "device": d,
            "device_kind": "cpu" if d == "CPU" else "cuda",
            "gpu_name": None if d == "CPU" else f"NVIDIA {d}",
            "driver": "550.54.15",
            "cuda": "12.4",
            "torch": "2.5.1",
            "triton": "3.1.0",
            "python": "3.11.9",
            "clocks": {"sm_mhz": 1980, "mem_mhz": 2619},
        }
        for d in devices
    }
    seconds = (NOW - START).total_seconds()
    i = 0
    while i < runs:
        # one submission (a code version) is evaluated on 1..n of the author's devices,
        # each evaluation filed as its own record, as CI does for a pull request
        author = authors[
            int(rng.paretovariate(1.2)) % n_authors
            if rng.random() < 0.5
            else rng.randrange(n_authors)
        ]
        board = names[_stable_hash(f"{author}/{rng.randrange(3)}") % boards]
        home = _stable_hash(author) % len(devices)
        roll = rng.random()
        spread = 1 if roll < 0.5 else 2 if roll < 0.8 else len(devices)
        version = versions[(author, board)] = versions.get((author, board), 0) + 1
        submitted = START + dt.timedelta(seconds=rng.uniform(0, seconds))
        code = _code(author, board, version, rng)
        sha = hashlib.sha256(code.encode()).hexdigest()
        for j in range(spread):
            if i >= runs:
                break
            device = devices[(home + j) % len(devices)]
            created = submitted + dt.timedelta(minutes=7 * j)
            i += 1
            roll = rng.random()
            mode, status = (
                ("test", "passed")
                if roll < 0.05
                else ("leaderboard", "failed" if roll < 0.15 else "passed")
            )
            ranked = mode == "leaderboard" and status == "passed"
            ref = reference_us[(board, device)]
            base = skill[author] * (1 + version * 0.05) * rng.uniform(0.8, 1.2)
            cases = [
                {
                    "kind": "test",
                    "index": k,
                    "id": f"size{2**k}-seed{k}",
                    "spec": {"size": 2**k, "seed": k},
                    "seed": k,
                    "status": "failed" if status == "failed" and k == 2 else "passed",
                    "message": "mismatch" if status == "failed" and k == 2 else "",
                    "duration_s": 0.3,
                }
                for k in range(N_TESTS)
            ]
            speedups = []
            for k in range(N_BENCH):
                case_ref = ref * (0.4 + 0.3 * k)
                speedup = base * rng.uniform(0.6, 1.4)
                speedups.append(speedup)
                cases.append(
                    {
                        "kind": "benchmark",
                        "index": k,
                        "id": f"size{2 ** (10 + k)}-seed{100 + k}",
                        "spec": {"size": 2 ** (10 + k), "seed": 100 + k},
                        "seed": 100 + k,
                        "status": "passed" if ranked else "skipped",
                        "message": "",
                        "duration_s": 2.0,
                        "timing": _timing(case_ref / speedup, rng) if ranked else None,
                        "reference_timing": _timing(case_ref, rng) if ranked else None,
                        "speedup": speedup if ranked else None,
                    }
                )
            score = ref / base
            rel = rng.uniform(0.005, 0.04)
            doc = {
                "schema": "kernelboard.run/1",
                "run_id": hashlib.md5(f"{seed}-{i}".encode()).hexdigest(),
                "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "mode": mode,
                "harness": {"version": "0.1.0", "commit": "3f2a9c1"},
                "environment": environment[device],
                "seeds": {},
                "provenance": {
                    "repository": "example/kernelboard",
                    "pull_request": 1000 + i,
                    "commit": sha[:40],
                },
                "evaluations": [
                    {
                        "leaderboard": {
                            "name": board,
                            "path": f"leaderboards/{board}",
                            "ranking_by": "geom",
                            "lang": "py",
                        },
                        "submission": {
                            "path": f"submissions/{board}/{author}/submission.py",
                            "file": "submission.py",
                            "author": author,
                            "sha256": sha,
                            "is_reference": False,
                        },
                        "cases": cases,
                        "summary": {
                            "status": status,
                            "tests_passed": N_TESTS - (status == "failed"),
                            "tests_total": N_TESTS,
                            "benchmarks_passed": N_BENCH if ranked else 0,
                            "benchmarks_total": N_BENCH,
                            "score_us": score if ranked else None,
                            "score_ci95_us": [score * (1 - rel), score * (1 + rel)]
                            if ranked
                            else None,
                            "reference_score_us": ref if ranked else None,
                            "speedup": base if ranked else None,
                            "fast_p": {
                                p: sum(s > float(p) for s in speedups) / N_BENCH
                                for p in ("0", "0.5", "1", "1.5", "2")
                            }
                            if ranked
                            else None,
                        },
                    }
                ],
                "evaluation_index": 0,
            }
            target = root / record_relpath(doc, 0)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(doc, indent=1))
            code_path = root / code_relpath(sha, ".py")
            code_path.parent.mkdir(parents=True, exist_ok=True)
            code_path.write_text(code)


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (shows contention on a busy host)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaderboards", type=int, default=50)
    parser.add_argument("--devices", type=int, default=4, help=f"how many of {DEVICES}")
    parser.add_argument("--runs", type=int, nargs="+", default=[20000])
    parser.add_argument("--workers", type=int, help="build processes (default: CPU count)")
    parser.add_argument("--repeat", type=int, default=1, help="builds per size (the best counts)")
    parser.add_argument(
        "--keep", type=Path, help="generate into this folder and keep it (one size)"
    )
    args = parser.parse_args(argv)
    devices = DEVICES[: args.devices]
    results = []
    for runs in args.runs:
        base = args.keep or Path(tempfile.mkdtemp(prefix="kb-site-scale-"))
        root = base / f"store-{runs}"
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        started = time.perf_counter()
        generate(root, args.leaderboards, devices, runs)
        generated = time.perf_counter() - started
        best = None
        for _ in range(args.repeat):
            cpu0 = _cpu_seconds()
            stats = build_site(root, base / f"site-{runs}", now=NOW, workers=args.workers)
            stats["cpu_s"] = _cpu_seconds() - cpu0
            if best is None or stats["total_s"] < best["total_s"]:
                best = stats
        results.append((runs, best))
        print(
            f"{args.leaderboards} leaderboards x {len(devices)} devices, {runs:>7} runs: "
            f"build {best['total_s']:6.2f} s (read {best['load_s']:.2f} s, render {best['render_s']:.2f} s), "
            f"{best['pages']} pages, {best['workers']} workers, CPU {best['cpu_s']:.1f} s, "
            f"load average {os.getloadavg()[0]:.1f}  [generated in {generated:.1f} s]",
            flush=True,
        )
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    if len(results) > 1:
        (r0, s0), (r1, s1) = results[0], results[-1]
        ratio = (s1["total_s"] / s0["total_s"]) / (r1 / r0)
        print(f"time per run at {r1} vs {r0} runs: {ratio:.2f}x (1.00 = linear)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
