"""Timing accuracy on a GPU: our per-call times beside Nsight Compute, do_bench and the roofline.

    python benchmarks/timing_accuracy.py [--runs 5] [--out DIR]

Builds a throw-away repository with one leaderboard of known kernels (copies from 4 KiB to
1 GiB, a large bf16 matmul, the empty submission, and a copy hidden on a side stream), judges
it through the plugin `--runs` times in benchmark mode, measures the same calls under
`ncu --metrics gpu__time_duration.sum` and `triton.testing.do_bench`, and prints one table.
Each kernel is a single launch (gpu-facts: ncu does not list a device-to-device memcpy).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from pytest_kernelboard.judge.profiling import DURATION_TO_US

KiB, MiB, GiB = 1024, 1024**2, 1024**3
COPY_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB, 1 * GiB]
MATMUL_N = 8192

TASK_YML = """\
files:
  - {"name": "submission.py", "source": "@SUBMISSION@"}
  - {"name": "reference.py", "source": "reference.py"}
lang: "py"
description: "Known kernels for measuring the harness's timing accuracy."
tests:
  - {"op": "copy", "nbytes": 4096, "seed": 1}
benchmarks:
%s
benchmark_timeout: 120
test_timeout: 120
ranking_by: "geom"
gpus: ["H100", "H200"]
"""

REFERENCE = """
import torch


def generate_input(op, nbytes, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    if op == "matmul":
        n = nbytes
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        return op, (a, b), torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    src = torch.randn(nbytes // 4, device="cuda", generator=gen)
    return op, (src,), torch.empty_like(src)


def run(data):
    op, args, out = data
    if op == "matmul":
        return torch.matmul(args[0], args[1], out=out)
    if op == "empty":
        return out
    return torch.neg(args[0], out=out)  # one elementwise kernel: reads n bytes, writes n bytes


def ref_kernel(data):
    return run(data)


def check_implementation(data, output):
    op, args, out = data
    if op == "empty":
        return True, ""
    expected = run((op, args, torch.empty_like(out)))
    ok = torch.allclose(output.float(), expected.float(), rtol=1e-2, atol=1e-2)
    return bool(ok), "" if ok else "mismatch"
"""

PLAIN = """
from reference import run


def custom_kernel(data):
    return run(data)
"""

SIDE_STREAM = """
import torch

side = torch.cuda.Stream()


def custom_kernel(data):
    op, args, out = data
    # The work goes to a side stream that the current stream never waits for.
    with torch.cuda.stream(side):
        torch.neg(args[0], out=out)
    return out
"""

NCU_TARGET = """
import sys, torch
sys.path.insert(0, sys.argv[1])
from reference import generate_input, run
for op, nbytes in %r:
    data = generate_input(op, nbytes, 7)
    for _ in range(5):
        run(data)
    torch.cuda.synchronize()
"""


def cases() -> list[tuple[str, int]]:
    return [("copy", n) for n in COPY_SIZES] + [("matmul", MATMUL_N), ("empty", 4 * KiB)]


def case_label(op: str, nbytes: int) -> str:
    if op == "matmul":
        return f"matmul bf16 {nbytes}^3"
    if op == "empty":
        return "empty submission"
    return f"copy {nbytes // KiB} KiB" if nbytes < MiB else f"copy {nbytes // MiB} MiB"


def build_repo(root: Path) -> None:
    board = root / "leaderboards" / "timing"
    board.mkdir(parents=True)
    lines = [
        f'  - {{"op": "{op}", "nbytes": {n}, "seed": {i + 2}}}' for i, (op, n) in enumerate(cases())
    ]
    lines.append(f'  - {{"op": "side", "nbytes": {256 * MiB}, "seed": 99}}')
    (board / "task.yml").write_text(TASK_YML % "\n".join(lines))
    (board / "reference.py").write_text(
        REFERENCE.replace('if op == "empty"', 'if op in ("empty",)')
    )
    for author, source in (("plain", PLAIN), ("hidden", SIDE_STREAM)):
        folder = root / "submissions" / "timing" / author
        folder.mkdir(parents=True)
        (folder / "submission.py").write_text(textwrap.dedent(source))


def run_plugin(root: Path, submission: str, results: Path, extra: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            submission,
            "-q",
            "-p",
            "no:cacheprovider",
            "--kb-mode",
            "benchmark",
            "--kb-results",
            str(results),
            *extra,
        ],
        cwd=root,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def ncu_times(root: Path) -> dict[tuple[str, int], float]:
    """Mean gpu__time_duration per case (us), or {} where ncu is missing or cannot profile."""
    if shutil.which("ncu") is None:
        return {}
    script = root / "ncu_target.py"
    script.write_text(NCU_TARGET % (cases(),))
    proc = subprocess.run(
        [
            "ncu",
            "--csv",
            "--clock-control",
            "none",
            "--metrics",
            "gpu__time_duration.sum",
            sys.executable,
            str(script),
            str(root / "leaderboards" / "timing"),
        ],
        capture_output=True,
        text=True,
    )
    rows = [
        r
        for r in csv.DictReader(io.StringIO(proc.stdout[proc.stdout.find('"ID"') :]))
        if r.get("Metric Name") == "gpu__time_duration.sum"
    ]
    # Kernels arrive in launch order: each case launches its kernel 5 times (empty: none),
    # after generate_input's own kernels (randn), which we skip by name.
    times: dict[tuple[str, int], float] = {}
    timed = [
        r
        for r in rows
        if "normal" not in r["Kernel Name"] and "fill" not in r["Kernel Name"].lower()
    ]
    cursor = 0
    for op, nbytes in cases():
        if op == "empty":
            continue
        group = timed[cursor : cursor + 5]
        cursor += 5
        values = [
            float(r["Metric Value"].replace(",", "")) * DURATION_TO_US[r["Metric Unit"].strip()]
            for r in group
        ]
        if values:
            times[(op, nbytes)] = statistics.mean(values[1:] or values)
    return times


def do_bench_times(root: Path) -> dict[tuple[str, int], float]:
    import torch
    import triton.testing

    sys.path.insert(0, str(root / "leaderboards" / "timing"))
    from reference import generate_input, run  # noqa: E402

    times = {}
    for op, nbytes in cases():
        data = generate_input(op, nbytes, 7)
        times[(op, nbytes)] = (
            triton.testing.do_bench(lambda data=data: run(data), return_mode="median") * 1e3
        )
        del data
        torch.cuda.empty_cache()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("timing_accuracy needs a CUDA GPU", file=sys.stderr)
        return 2
    from pytest_kernelboard.judge import devices

    env = devices.environment()
    peak = devices.peak_bandwidth_bytes_per_s() or float("nan")
    root = Path(tempfile.mkdtemp(prefix="kb-timing-"))
    build_repo(root)
    walls, runs = [], []
    for r in range(args.runs):
        path = root / f"run{r}.json"
        walls.append(run_plugin(root, "submissions/timing/plain", path, []))
        runs.append(json.loads(path.read_text()))
    side_path = root / "side.json"
    run_plugin(root, "submissions/timing/hidden", side_path, ["-k", "side"])
    side = json.loads(side_path.read_text())
    ncu = ncu_times(root)
    bench = do_bench_times(root)

    def case_means(doc, op, nbytes):
        for case in doc["evaluations"][0]["cases"]:
            if (
                case["spec"].get("op") == op
                and case["spec"].get("nbytes") == nbytes
                and case.get("timing")
            ):
                return case["timing"]
        return None

    rows = []
    for op, nbytes in cases():
        timings = [case_means(doc, op, nbytes) for doc in runs]
        means = [t["mean_us"] for t in timings if t]
        if not means:
            rows.append({"case": case_label(op, nbytes), "ours_us": None})
            continue
        roofline = 2 * nbytes / peak * 1e6 if op == "copy" else None
        ours = statistics.median(means)
        rows.append(
            {
                "case": case_label(op, nbytes),
                "ours_us": ours,
                "ci95_us": timings[0]["ci95_us"],
                "n": timings[0]["n"],
                "ncu_us": ncu.get((op, nbytes)),
                "ratio": ours / ncu[(op, nbytes)] if (op, nbytes) in ncu else None,
                "spread": max(means) / min(means) - 1,
                "do_bench_us": bench.get((op, nbytes)),
                "roofline_us": roofline,
            }
        )
    side_timing = case_means(side, "side", 256 * MiB)
    copy_256 = next(r for r in rows if r["case"] == "copy 256 MiB")
    scores = [s for doc in runs if (s := doc["evaluations"][0]["summary"]["score_us"]) is not None]
    report = {
        "device": env["device"],
        "gpu": env["gpu_name"],
        "driver": env["driver"],
        "cuda": env["cuda"],
        "torch": env["torch"],
        "triton": env["triton"],
        "peak_gbps": peak / 1e9,
        "rows": rows,
        "side_stream_us": side_timing and side_timing["mean_us"],
        "side_stream_flags": side_timing and side_timing.get("flags"),
        "scores_us": scores,
        "walls_s": walls,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "timing_accuracy.json").write_text(json.dumps(report, indent=1))
    for r in range(args.runs):  # every sample of every run, for a closer look
        shutil.copy(root / f"run{r}.json", args.out / f"timing_accuracy_run{r}.json")

    def fmt(value, spec=".2f"):
        return "-" if value is None else format(value, spec)

    print(
        f"\n{env['gpu_name']} driver {env['driver']} CUDA {env['cuda']} torch {env['torch']} "
        f"triton {env['triton']} peak {peak / 1e9:.0f} GB/s"
    )
    print(
        f"{'case':<22}{'ours us':>11}{'ncu us':>11}{'ours/ncu':>10}{'spread5':>9}{'do_bench':>11}{'roofline':>10}{'n':>6}"
    )
    for row in rows:
        print(
            f"{row['case']:<22}{fmt(row['ours_us']):>11}{fmt(row.get('ncu_us')):>11}"
            f"{fmt(row.get('ratio'), '.3f'):>10}{fmt(100 * row['spread'] if row.get('spread') is not None else None, '.2f'):>8}%"
            f"{fmt(row.get('do_bench_us')):>11}{fmt(row.get('roofline_us')):>10}{row.get('n', '-'):>6}"
        )
    print(
        f"side-stream copy 256 MiB: {fmt(report['side_stream_us'])} us (plain copy {fmt(copy_256['ours_us'])} us); "
        f"flags {report['side_stream_flags']}"
    )
    print(
        f"score over {len(scores)} runs: {', '.join(fmt(s) for s in scores)} us; "
        f"spread {100 * (max(scores) / min(scores) - 1) if scores else float('nan'):.2f}%; wall per evaluation {', '.join(f'{w:.1f}' for w in walls)} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
