"""GPU MODE's distributed problems, imported unmodified and judged on this host's GPUs.

    python benchmarks/gpumode_distributed.py PROBLEMS [--world-sizes 2,4] [--modes test,leaderboard]
        [--competition amd_distributed.yaml] [--out DIR]

PROBLEMS is a checkout's `problems/` folder of gpu-mode/reference-kernels. The competition is
imported with `kernelboard import gpumode` into a scratch repository, as a user would. Its cases
ask for `world_size: 8`; for each world size W asked for (and no larger than the GPUs here) the
script writes a copy of the imported folders whose task.yml cases say W (every other file byte
for byte) and judges each problem with its shipped `submission.py` in each mode, and with the
reference as `custom_kernel` in test mode. On the unmodified folders it runs test mode, where a
host with fewer GPUs than 8 skips every case with the reason. One table row per run: cases
passed/failed/skipped, and per benchmark case the ranked time, its interval, the speedup, the
NCCL transports the ranks used and each rank's time; the full results files go to --out.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFERENCE_AS_KERNEL = '''"""The leaderboard's own reference as the submission."""

from reference import ref_kernel


def custom_kernel(data):
    return ref_kernel(data)
'''
WORLD_SIZE = re.compile(r'("world_size"\s*:\s*)\d+')


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def import_competition(problems: Path, competition: str, root: Path) -> Path:
    (root / "leaderboards").mkdir(parents=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_kernelboard.cli",
            "import",
            "gpumode",
            str(problems),
            "--competition",
            str(problems / competition),
            "--root",
            str(root),
        ],
        check=True,
    )
    return root


def copy_with_world_size(source: Path, target: Path, world_size: int) -> list[Path]:
    """The imported repository again, every task.yml's cases at `world_size`: the changed
    task.yml files (every other file is copied byte for byte)."""
    shutil.copytree(source, target)
    changed = []
    for task in (target / "leaderboards").rglob("task.yml"):
        text = task.read_text()
        rewritten = WORLD_SIZE.sub(lambda m: f"{m.group(1)}{world_size}", text)
        if rewritten != text:
            task.write_text(rewritten)
            changed.append(task)
    return changed


def leaderboards(root: Path) -> list[tuple[str, Path]]:
    """(name, folder) of every imported leaderboard (its name from the sidecar)."""
    found = []
    for sidecar in sorted((root / "leaderboards").rglob("kernelboard.yml")):
        name = re.search(r"^name:\s*(\S+)", sidecar.read_text(), re.M)
        if name:
            found.append((name.group(1).strip("'\""), sidecar.parent))
    return found


def judge(root: Path, name: str, submission: Path, mode: str, results: Path) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(submission),
            "--kb-leaderboard",
            name,
            "--kb-mode",
            mode,
            "--kb-results",
            str(results),
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
        ],
        cwd=root,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - started
    (results.with_suffix(".log")).write_text(done.stdout + done.stderr)
    row = {"wall_s": round(wall, 1), "exit": done.returncode, "cases": []}
    if results.exists():
        document = json.loads(results.read_text())
        for evaluation in document.get("evaluations", []):
            for case in evaluation["cases"]:
                row["cases"].append(summarise(case))
    else:
        row["tail"] = (done.stdout + done.stderr).strip().splitlines()[-15:]
    return row


def summarise(case: dict) -> dict:
    timing = case.get("timing") or {}
    reference = case.get("reference_timing") or {}
    ranks = timing.get("ranks") or {}
    summary = {"kind": case["kind"], "id": case["id"], "status": case["status"]}
    if case["status"] != "passed":
        summary["message"] = (case.get("message") or "").splitlines()[:3]
    if timing:
        summary.update(
            rank_us=timing.get("rank_us"),
            rank_ci95_us=timing.get("rank_ci95_us"),
            reference_us=reference.get("rank_us"),
            speedup=(reference["rank_us"] / timing["rank_us"])
            if reference.get("rank_us") and timing.get("rank_us")
            else None,
            transports=ranks.get("transports"),
            rank_means_us=ranks.get("mean_us"),
            peak_bytes=case.get("peak_bytes") or timing.get("peak_bytes"),
        )
    return summary


def print_row(label: str, row: dict) -> None:
    counts: dict[str, int] = {}
    for case in row["cases"]:
        counts[case["status"]] = counts.get(case["status"], 0) + 1
    print(f"{label:58s} exit {row['exit']}  {row['wall_s']:7.1f} s  {counts}")
    for case in row["cases"]:
        if case.get("rank_us"):
            low, high = case["rank_ci95_us"] or (None, None)
            speedup = f"{case['speedup']:.3f}x" if case.get("speedup") else "-"
            print(
                f"    {case['id'][:60]:60s} {case['rank_us']:10.1f} us "
                f"[{low:.1f}-{high:.1f}] {speedup} {case['transports']}"
            )
        elif case["status"] not in ("passed",):
            print(f"    {case['id'][:60]:60s} {case['status']}: {case.get('message')}")
    for line in row.get("tail", []):
        print("    " + line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", type=Path)
    parser.add_argument("--competition", default="amd_distributed.yaml")
    parser.add_argument("--world-sizes", default="2,4")
    parser.add_argument("--modes", default="test,leaderboard")
    parser.add_argument("--out", type=Path, default=Path("gpumode-distributed"))
    parser.add_argument("--only", default="", help="comma-separated leaderboard names")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    gpus = gpu_count()
    scratch = Path(tempfile.mkdtemp(prefix="kb-gpumode-dist-"))
    imported = import_competition(args.problems.resolve(), args.competition, scratch / "as-is")
    table: dict[str, dict] = {}

    def run(root: Path, label: str, name: str, submission: Path, mode: str) -> None:
        results = args.out / (re.sub(r"[^A-Za-z0-9_.-]", "_", label) + ".json")
        row = judge(root, name, submission, mode, results)
        table[label] = row
        print_row(label, row)
        sys.stdout.flush()

    only = {name for name in args.only.split(",") if name}

    def chosen(root: Path) -> list[tuple[str, Path]]:
        return [(n, f) for n, f in leaderboards(root) if not only or n in only]

    for name, folder in chosen(imported):  # as published: world_size 8
        run(
            imported, f"{name} ws=as-published shipped test", name, folder / "submission.py", "test"
        )
    for world_size in (int(w) for w in args.world_sizes.split(",") if w):
        if world_size > gpus:
            print(f"world_size {world_size}: this host has {gpus} GPU(s); not run")
            continue
        root = scratch / f"ws{world_size}"
        copy_with_world_size(imported, root, world_size)
        reference = root / "reference_as_kernel.py"
        reference.write_text(REFERENCE_AS_KERNEL)
        for name, folder in chosen(root):
            for mode in args.modes.split(","):
                run(
                    root,
                    f"{name} ws={world_size} shipped {mode}",
                    name,
                    folder / "submission.py",
                    mode,
                )
            run(root, f"{name} ws={world_size} reference test", name, reference, "test")
    (args.out / "table.json").write_text(json.dumps(table, indent=1))
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
