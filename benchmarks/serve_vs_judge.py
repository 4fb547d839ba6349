"""`kernelboard serve` over HTTP against `kernelboard judge`, on the same batch and machine.

    python benchmarks/serve_vs_judge.py LEADERBOARD CANDIDATE... [--mode benchmark]
                                        [--root DIR] [--repeats 1] [--limit 1.1] [--jobs 1]

CANDIDATE is what `kernelboard judge` takes (source files, folders, JSONL files). Each repeat
runs both, alternating which goes first: `kernelboard judge ... --out F.jsonl` (wall time of
the command), then `kernelboard serve` on loopback with a fresh state folder, the whole batch
posted as one job and long-polled until done (wall time from starting the server to the last
record: both include their start-up). Prints both medians, the ratio, and whether the verdicts
(status, correct, error_kind per id) agree. Exit status 0 when they agree and the ratio is at
most --limit. With --jobs N the server then judges the same batch N - 1 times more, one job
after another (what a training loop's steps do): each later job's wall time from its post to its
last record, which its warm judges answer without their start-up or the reference's timing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from pytest_kernelboard.service.server import started_url

VERDICT = ("status", "correct", "error_kind")


def time_judge(args: argparse.Namespace, scratch: Path) -> tuple[float, dict[str, tuple]]:
    out = scratch / "judge.jsonl"
    command = [sys.executable, "-m", "pytest_kernelboard.cli", "judge", args.leaderboard,
               *args.candidates, "--mode", args.mode, "--out", str(out), *root_args(args)]  # fmt: skip
    started = time.monotonic()
    subprocess.run(command, check=True, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - started
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return wall, {r["id"]: tuple(r.get(k) for k in VERDICT) for r in records}


def time_serve(
    args: argparse.Namespace, scratch: Path, candidates: list
) -> tuple[float, dict, list[float]]:
    """The first job's wall time from the server's start, its verdicts, and each later job's
    wall time from its post (--jobs)."""
    state = scratch / f"state-{time.monotonic_ns()}"
    command = [sys.executable, "-m", "pytest_kernelboard.cli", "serve", "--port", "0",
               "--state", str(state), "--max-queue", str(max(4096, len(candidates))),
               *root_args(args)]  # fmt: skip
    started = time.monotonic()
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        assert server.stdout is not None
        url = started_url(server.stdout)
        if url is None:
            raise SystemExit("kernelboard serve did not start")
        answer = run_job(url, args, candidates, "")
        wall = time.monotonic() - started
        later = []
        for job in range(1, args.jobs):
            posted = time.monotonic()
            run_job(url, args, candidates, f"-job{job}")
            later.append(time.monotonic() - posted)
        return wall, {r["id"]: tuple(r.get(k) for k in VERDICT) for r in answer["records"]}, later
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=120)


def run_job(url: str, args: argparse.Namespace, candidates: list, suffix: str) -> dict:
    """The batch as one job (each id with the suffix), long-polled until it is done."""
    body = {
        "leaderboard": args.leaderboard,
        "mode": args.mode,
        "candidates": [
            {"id": c.id + suffix, "source": c.source, "lang": c.lang} for c in candidates
        ],
    }
    job = post(f"{url}/v1/jobs", body)["job"]
    while True:
        answer = get(f"{url}/v1/jobs/{job}?wait=600")
        if answer["state"] in ("done", "failed"):
            break
    if answer["state"] != "done":
        raise SystemExit(f"the job failed: {answer.get('error')}")
    return answer


def post(url: str, body: object) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=600) as reply:
        return json.loads(reply.read())


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=900) as reply:
        return json.loads(reply.read())


def root_args(args: argparse.Namespace) -> list[str]:
    return ["--root", str(args.root)] if args.root else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("leaderboard")
    parser.add_argument("candidates", nargs="+")
    parser.add_argument("--mode", choices=("test", "benchmark"), default="benchmark")
    parser.add_argument("--root", type=Path)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--limit", type=float, default=1.1, help="serve/judge at most")
    parser.add_argument("--keep", type=Path, help="keep the judge's records and logs here")
    parser.add_argument("--jobs", type=int, default=1, help="jobs posted to each server")
    args = parser.parse_args()

    from pytest_kernelboard.batch import load_candidates

    candidates = load_candidates(args.candidates)
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="kb-serve-vs-judge-"))
    scratch.mkdir(parents=True, exist_ok=True)
    judge_walls, serve_walls, later_walls = [], [], []
    agree = True
    for repeat in range(args.repeats):
        order = ("judge", "serve") if repeat % 2 == 0 else ("serve", "judge")
        verdicts = {}
        for which in order:
            if which == "judge":
                wall, verdicts[which] = time_judge(args, scratch)
                judge_walls.append(wall)
            else:
                wall, verdicts[which], later = time_serve(args, scratch, candidates)
                serve_walls.append(wall)
                later_walls += later
                if later:
                    print(
                        f"repeat {repeat + 1}: serve's later jobs "
                        + ", ".join(f"{w:.1f} s" for w in later),
                        flush=True,
                    )
            print(f"repeat {repeat + 1}: {which} {wall:.1f} s", flush=True)
        differ = [i for i in verdicts["judge"] if verdicts["judge"][i] != verdicts["serve"].get(i)]
        if differ or len(verdicts["serve"]) != len(verdicts["judge"]):
            agree = False
            print(f"repeat {repeat + 1}: verdicts differ for {differ[:10]}")
    judge_s, serve_s = statistics.median(judge_walls), statistics.median(serve_walls)
    ratio = serve_s / judge_s
    print(
        f"{len(candidates)} candidates, mode {args.mode}: judge {judge_s:.1f} s, serve (HTTP) "
        f"{serve_s:.1f} s, ratio {ratio:.3f} (limit {args.limit:g}); verdicts "
        f"{'agree' if agree else 'DIFFER'}"
    )
    if later_walls:
        later_s = statistics.median(later_walls)
        print(
            f"serve's later jobs: median {later_s:.1f} s ({judge_s / later_s:.2f}x the rate of a "
            f"kernelboard judge per batch)"
        )
    return 0 if agree and ratio <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
