"""Load on one `kernelboard serve`: many clients at once, every candidate judged exactly once.

    python benchmarks/serve_load.py [--clients 8] [--candidates 200] [--job-size 5]
                                    [--max-queue 40] [--mode test]

Loopback only, bounded: it starts a server on 127.0.0.1 (a free port, a temporary state
folder) over a throw-away leaderboard (x + 1 on a small vector, one test case), and N client
threads that each submit their share of the candidates in jobs of --job-size, honour 429's
Retry-After, and long-poll their jobs. Candidates are a fixed mix: correct, wrong (the last
element left out) and broken (raises on import); each must come back once with its verdict.
The server's resident memory (the server process only, not its workers) is sampled every
second; it is "flat" when its growth after the first tenth of the records stays under 5% or
16 MiB. Exit status 0 only when every candidate has exactly one right record and memory is flat.
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
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from pytest_kernelboard.service.server import started_url

TASK = """\
files:
  - {"name": "submission.py", "source": "@SUBMISSION@"}
  - {"name": "reference.py", "source": "reference.py"}
lang: "py"
description: "x + 1 into a pre-allocated output (the reward service's load test)."
tests:
  - {"size": 257, "seed": 1}
benchmarks:
  - {"size": 65536, "seed": 2}
test_timeout: 60
benchmark_timeout: 120
ranked_timeout: 120
ranking_by: "geom"
gpus: ["H100", "H200", "CPU"]
"""

REFERENCE = """
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def generate_input(size, seed):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(size, device=DEVICE, generator=gen)
    return x, torch.full_like(x, float("nan"))


def ref_kernel(data):
    x, out = data
    out.copy_(x + 1)
    return out


def check_implementation(data, output):
    x, _ = data
    ok = torch.allclose(output, x + 1)
    return bool(ok), "" if ok else "mismatch"
"""

SOURCES = {
    "correct": "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n",
    "wrong": "def custom_kernel(data):\n    x, out = data\n    out[:-1] = x[:-1] + 1\n    return out\n",
    "broken": "raise RuntimeError('does not import')\n",
}
EXPECTED = {"correct": "passed", "wrong": "failed", "broken": "error"}
KINDS = ["correct", "correct", "wrong", "broken"]  # the mix, dealt in turn


def make_repository(folder: Path) -> Path:
    board = folder / "leaderboards" / "loadtest"
    board.mkdir(parents=True)
    (board / "task.yml").write_text(TASK)
    (board / "reference.py").write_text(REFERENCE)
    return folder


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Client(threading.Thread):
    def __init__(self, url: str, name: str, candidates: list[dict], job_size: int, mode: str):
        super().__init__(name=name, daemon=True)
        self.url, self.candidates, self.job_size, self.mode = url, candidates, job_size, mode
        self.records: list[dict] = []
        self.refusals = 0  # 429s
        self.retry_after: list[float] = []  # what each 429 said
        self.latencies: list[float] = []  # job submitted -> job done
        self.errors: list[str] = []

    def request(self, method: str, path: str, body: object = None) -> tuple[int, dict, dict]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=600) as reply:
                return reply.status, dict(reply.headers), json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), json.loads(exc.read())

    def run(self) -> None:
        try:
            jobs = []
            for start in range(0, len(self.candidates), self.job_size):
                chunk = self.candidates[start : start + self.job_size]
                body = {"leaderboard": "loadtest", "mode": self.mode, "candidates": chunk}
                while True:
                    status, headers, answer = self.request("POST", "/v1/jobs", body)
                    if status != 429:
                        break
                    self.refusals += 1
                    self.retry_after.append(float(headers.get("Retry-After", "1")))
                    time.sleep(min(self.retry_after[-1], 60.0))
                if status != 202:
                    self.errors.append(f"POST answered {status}: {answer}")
                    return
                jobs.append((answer["job"], time.monotonic()))
            for job, submitted in jobs:
                while True:
                    status, _, answer = self.request("GET", f"/v1/jobs/{job}?wait=60")
                    if status != 200 or answer["state"] in ("done", "failed"):
                        break
                if status != 200 or answer["state"] != "done":
                    self.errors.append(f"job {job}: {status} {answer.get('state')}")
                    return
                self.latencies.append(time.monotonic() - submitted)
                self.records.extend(answer["records"])
        except Exception as exc:  # noqa: BLE001 (reported with the results)
            self.errors.append(f"{type(exc).__name__}: {exc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--job-size", type=int, default=5)
    parser.add_argument("--max-queue", type=int, default=40, help="the server's queue limit")
    parser.add_argument("--mode", choices=("test", "benchmark"), default="test")
    parser.add_argument("--server-arg", action="append", default=[], help="passed to serve")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="kb-serve-load-"))
    root = make_repository(scratch / "repo")
    kinds = {f"k{i:04d}": KINDS[i % len(KINDS)] for i in range(args.candidates)}
    candidates = [{"id": cid, "source": SOURCES[kind]} for cid, kind in kinds.items()]
    shares = [candidates[i :: args.clients] for i in range(args.clients)]

    command = [
        sys.executable, "-m", "pytest_kernelboard.cli", "serve", "--host", "127.0.0.1",
        "--port", "0", "--root", str(root), "--state", str(scratch / "state"),
        "--max-queue", str(args.max_queue), *args.server_arg,
    ]  # fmt: skip
    log = open(scratch / "server.log", "wb")  # noqa: SIM115
    started = time.monotonic()
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    assert server.stdout is not None
    url = started_url(server.stdout)
    if url is None:
        print(f"the server did not start: {scratch / 'server.log'}", file=sys.stderr)
        return 2
    print(f"server up in {time.monotonic() - started:.1f} s at {url}")

    samples: list[tuple[float, int, int]] = []  # (seconds, records so far, RSS KiB)
    clients = [
        Client(url, f"client{i}", share, args.job_size, args.mode) for i, share in enumerate(shares)
    ]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            written = sum(
                p.read_bytes().count(b"\n")
                for p in (scratch / "state" / "jobs").glob("*/records.jsonl")
            )
            samples.append((time.monotonic() - t0, written, rss_kib(server.pid)))
            stop.wait(1.0)

    t0 = time.monotonic()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    wall = time.monotonic() - t0
    stop.set()
    sampler.join()
    samples.append((wall, args.candidates, rss_kib(server.pid)))
    os.killpg(server.pid, signal.SIGTERM)
    server.wait(timeout=120)
    log.close()

    # Exactly once: through the API and in the state folder.
    errors = [e for c in clients for e in c.errors]
    got: dict[str, list[str]] = {}
    for client in clients:
        for record in client.records:
            got.setdefault(record["id"], []).append(record["status"])
    on_disk = [
        json.loads(line)["id"]
        for path in (scratch / "state" / "jobs").glob("*/records.jsonl")
        for line in path.read_text().splitlines()
    ]
    missing = sorted(set(kinds) - set(got))
    twice = sorted(cid for cid, statuses in got.items() if len(statuses) > 1)
    wrong = sorted(cid for cid, statuses in got.items() if statuses[0] != EXPECTED[kinds[cid]])
    disk_twice = len(on_disk) - len(set(on_disk))

    warm = next((s for s in samples if s[1] >= args.candidates / 10), samples[0])
    peak = max(s[2] for s in samples if s[0] >= warm[0])
    growth = peak - warm[2]
    flat = growth < max(16 * 1024, 0.05 * warm[2])
    latencies = sorted(x for c in clients for x in c.latencies)

    print(f"clients {args.clients}, candidates {args.candidates}, jobs of {args.job_size}, "
          f"queue limit {args.max_queue}, mode {args.mode}")  # fmt: skip
    waits = [x for c in clients for x in c.retry_after]
    print(f"wall {wall:.1f} s; {60 * args.candidates / wall:.1f} candidates/min; "
          f"429 answers {len(waits)}"
          + (f" (Retry-After median {statistics.median(waits):g} s)" if waits else ""))  # fmt: skip
    print(f"job latency (submitted -> done): median {statistics.median(latencies):.1f} s, "
          f"max {latencies[-1]:.1f} s" if latencies else "no job finished")  # fmt: skip
    print(f"records: {sum(len(v) for v in got.values())} via the API, {len(on_disk)} on disk; "
          f"missing {len(missing)}, twice {len(twice)} (on disk {disk_twice}), "
          f"wrong verdict {len(wrong)}")  # fmt: skip
    print(f"server RSS: {samples[0][2] / 1024:.0f} MiB at start, {warm[2] / 1024:.0f} MiB after "
          f"{warm[1]} records, peak after that {peak / 1024:.0f} MiB, at the end "
          f"{samples[-1][2] / 1024:.0f} MiB: {'flat' if flat else 'GROWING'} "
          f"({growth / 1024:+.1f} MiB)")  # fmt: skip
    for line in errors[:10]:
        print(f"client error: {line}")
    ok = not (errors or missing or twice or wrong or disk_twice) and flat
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
