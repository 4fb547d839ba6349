"""`kernelboard judge LEADERBOARD CANDIDATE...`: judge a batch, one JSON record per line."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import KernelboardError
from ..evaluation.progress import Progress
from .candidates import load_candidates
from .depth import IN_FLIGHT, MAX_IN_FLIGHT, PREFETCH, in_flight_arg
from .judge import MODES, judge_many
from .records import (
    DEFAULT_EXCESSIVE_SPEEDUP,
    ErrorKindName,
    batch_fast_p,
    batch_fast_p_raw,
    faster,
)
from .reference_share import (
    HOST_BOUND_REFERENCE_WORKERS,
    MIN_REFERENCE_WORKERS,
    REFERENCE_WORKERS,
    reference_workers_arg,
)

# What a record's summary line keeps of it: what fast_p and "faster" are decided by.
SUMMARY_KEYS = ("mode", "correct", "speedup", "speedup_ci95", "tied")


class BatchProgress(Progress):
    """A line on stderr per finished candidate: done, correct, faster (beyond noise: the
    speedup's interval above 1, records.faster; a tie is not faster), and the rate."""

    def __init__(
        self, total: int, stream: IO[str], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.total, self.stream, self.clock = total, stream, clock
        self.started = clock()
        self.done = self.correct = self.faster = 0
        self.first_at: float | None = None  # when the first and the last record came
        self.last_at: float | None = None

    def case_timed(self, label: str, line: str) -> None:
        self.stream.write(f"{label}: {line}\n")
        self.stream.flush()

    def record(self, record: dict[str, Any]) -> None:
        self.done += 1
        self.correct += bool(record["correct"])
        self.faster += faster(record, 1.0)
        self.last_at = self.clock()
        self.first_at = self.last_at if self.first_at is None else self.first_at
        elapsed = self.last_at - self.started
        rate = 3600 * self.done / elapsed if elapsed > 0 else 0.0
        verdict = record["status"] + (f" ({record['error_kind']})" if record["error_kind"] else "")
        self.stream.write(
            f"[{self.done}/{self.total}] {record['id']}: {verdict}; {self.correct} correct, "
            f"{self.faster} faster; {rate:.0f} candidates/hour\n"
        )
        self.stream.flush()

    def pace_line(self) -> str | None:
        """When the first record came, and the pace of those after it: the batch's rate
        without its start (the judges' processes, torch, the reference's timing), which a
        server's warm judges keep from one job to the next. None before a second record."""
        if self.first_at is None or self.last_at is None or self.done < 2:
            return None
        rate = pace_after_first(self.first_at, self.last_at, self.done)
        pace = "at once" if rate is None else f"at {rate:.0f} an hour"
        return (
            f"{self.done} records in {self.last_at - self.started:.1f} s: the first after "
            f"{self.first_at - self.started:.1f} s, the {self.done - 1} after it {pace}"
        )


def pace_after_first(first_s: float, last_s: float, records: int) -> float | None:
    """The records after the first per hour, from the first's arrival to the last's (`records`
    in all): a batch's rate without its start. None without a second record or a span."""
    span = last_s - first_s
    return 3600 * (records - 1) / span if records > 1 and span > 0 else None


def run(args: argparse.Namespace) -> int:
    try:
        candidates = load_candidates(args.candidates)
        out = open(args.out, "w") if args.out else sys.stdout  # noqa: SIM115 (closed below)
    except (KernelboardError, OSError) as exc:
        print(f"kernelboard judge: {exc}", file=sys.stderr)
        return 2
    progress = BatchProgress(len(candidates), sys.stderr)
    records: list[dict[str, Any]] = []
    harness_errors = 0  # candidates the judge itself failed on (records.harness_error_record)
    try:
        for record in _records(args, candidates, progress):
            out.write(json.dumps(record) + "\n")
            out.flush()
            records.append({k: record.get(k) for k in SUMMARY_KEYS})
            harness_errors += record.get("error_kind") == ErrorKindName.HARNESS_ERROR
            progress.record(record)
    except KernelboardError as exc:
        print(f"kernelboard judge: {exc}", file=sys.stderr)
        return 2
    finally:
        if out is not sys.stdout:
            out.close()
    print(summary_line(records), file=sys.stderr)
    pace = progress.pace_line()
    if pace is not None:
        print(pace, file=sys.stderr)
    if harness_errors:  # every record is written, but these are no verdicts: exit 1
        print(
            f"kernelboard judge: the judge itself failed on {harness_errors} candidate(s) "
            "(error_kind harness_error, a bug of kernelboard's); the tracebacks are above",
            file=sys.stderr,
        )
        return 1
    return 0


def summary_line(records: list[dict[str, Any]]) -> str:
    """'N candidates judged; fast_0 1.00, fast_1 0.00, ... (beyond noise); raw fast_p
    (KernelBench's definition): fast_1 0.38, ...'."""

    def shares(values: dict[str, float | None]) -> str:
        return ", ".join(
            f"fast_{p} {share:.2f}" for p, share in values.items() if share is not None
        )

    line = f"{len(records)} candidates judged; {shares(batch_fast_p(records))}"
    raw = batch_fast_p_raw(records)
    if any(share is not None for p, share in raw.items() if p != "0"):
        line += (
            " (faster = beyond noise: the speedup's interval above p); "
            f"raw fast_p (KernelBench's definition): {shares(raw)}"
        )
    return line


def _records(
    args: argparse.Namespace, candidates: list, progress: Progress
) -> Iterator[dict[str, Any]]:
    root = Path(args.root) if args.root else None
    if args.ray:
        from .ray_judges import judge_many_on_ray

        yield from judge_many_on_ray(
            args.ray, args.leaderboard, candidates, mode=args.mode, root=root
        )
        return
    yield from judge_many(
        args.leaderboard,
        candidates,
        mode=args.mode,
        root=root,
        gpus=args.gpus,
        excessive_speedup=args.excessive_speedup,
        progress=progress,
        profile=args.profile,
        candidate_workers=args.candidate_workers,
        reference_workers=args.reference_workers,
        in_flight=args.in_flight,
    )


def _gpus(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,1 — got {text!r}") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "judge",
        help="judge many candidate kernels against one leaderboard (JSON lines out)",
        description=(
            "Judge candidates (source files, folders of them, or JSONL files of "
            "{id, source, lang}) against a leaderboard, one sandboxed worker each, one judge "
            "per GPU. One JSON record per candidate, in the order given, as each finishes "
            "(docs/agents.md); progress and fast_p (faster beyond noise; KernelBench's raw "
            "fast_p beside it) on stderr."
        ),
    )
    parser.add_argument("leaderboard", help="the leaderboard's name, as in leaderboards/")
    parser.add_argument(
        "candidates", nargs="+", help="a .py/.cu file (its id is its name), a folder, or a .jsonl"
    )
    parser.add_argument(
        "--out", metavar="FILE.jsonl", help="write the records here (default stdout)"
    )
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="test",
        help="test: correctness only (default); benchmark: correctness, then timing and speedups",
    )
    parser.add_argument(
        "--gpus",
        type=_gpus,
        metavar="0,1,...",
        help="the GPUs to judge on, one judge each (default: every GPU of this host)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="judge on a Ray cluster instead (one judge per GPU it has); 'local' starts one here",
    )
    parser.add_argument(
        "--excessive-speedup",
        type=float,
        default=DEFAULT_EXCESSIVE_SPEEDUP,
        metavar="X",
        help=f"flag speedups above X as excessive_speedup (default {DEFAULT_EXCESSIVE_SPEEDUP:g}, "
        "KernelBench's)",
    )
    parser.add_argument(
        "--candidate-workers",
        type=int,
        default=1,
        metavar="K",
        help="time every timed case of a candidate in K fresh workers, combined as the "
        "reference's are (default 1: one worker, its interval widened by the reference's "
        "workers' spread, a host-bound case's too)",
    )
    parser.add_argument(
        "--reference-workers",
        type=reference_workers_arg,
        default=REFERENCE_WORKERS,
        metavar="R",
        help=f"time the reference on every case in R fresh workers (default {REFERENCE_WORKERS}; "
        f"at least {MIN_REFERENCE_WORKERS}; a case whose calls most of them found host-bound in "
        f"{HOST_BOUND_REFERENCE_WORKERS} where R is fewer): fewer cost less, their spread widens every "
        "speedup's interval more",
    )
    parser.add_argument(
        "--in-flight",
        type=in_flight_arg,
        metavar="K",
        help=f"candidates each GPU's judge keeps in flight, the judged one included: the others "
        f"start their workers, import and make their correctness calls meanwhile (default "
        f"{PREFETCH + 1} for one GPU's judge, {IN_FLIGHT} for each of several GPUs'; at most "
        f"{MAX_IN_FLIGHT})",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="records carry the longest kernels of a timed call and each case's speed of light "
        "(benchmark mode on a GPU)",
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="the repository holding leaderboards/ (default: found from here)",
    )
    parser.set_defaults(func=run)
