"""`kernelboard import kernelbench` per level: the process tree's peak memory and the wall time.

    python benchmarks/kernelbench_import.py KERNELBENCH [--levels 1 2 3] [--collect]
                                            [--kill-above GB] [--interval 0.2] [--json OUT]

KERNELBENCH holds KernelBench's level1/, level2/, ... (its repository's KernelBench/ folder).
For each level, the import runs into a fresh temporary folder (`--dest TMP/leaderboards/
kernelbench`), exactly as the README's command, and every --interval seconds the script reads
every process descended from it in /proc (the command, the import's fork server and the
process it forks per problem, anything a problem starts):

rss  the sum of their VmRSS (a page two processes share is counted in each);
pss  the sum of their PSS from /proc/PID/smaps_rollup (each shared page divided among the
     processes that map it): the memory the import holds, the number the target is about.

Per level it prints the peaks (and the machine's used memory above its level before the run,
everyone's), the wall time, the exit status (the number of problems skipped), the folders
written, and the import's own summary line. --collect then runs `pytest DEST --collect-only -q`
over the level's folders and prints its last line. Target (issue 38): every level within 4 GB
(pss) and 10 minutes on a 2-core CPU machine.

--kill-above stops an import (its process group) once rss passes that many GB, so that a
measurement cannot take a shared machine down (default 12), and --time-limit once it has run
that many seconds (default 900); the level is then reported as stopped, with the folders it
wrote by then.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpu_memory import kb_fields, machine_used, read_text  # noqa: E402

from pytest_kernelboard.supervisor import proctree  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
GB = 1e9


def descendants(root: int) -> frozenset[int]:
    """root and every process below it."""
    snapshot = proctree.read_snapshot()
    return snapshot.tree(root) if snapshot is not None else frozenset({root})


@dataclass
class Peak:
    rss: int = 0
    pss: int = 0
    processes: int = 0  # at the rss peak
    machine: int = 0  # machine's used memory above its level before the run


class Sampler(threading.Thread):
    def __init__(self, root: int, interval_s: float, kill_above: float, time_limit: float):
        super().__init__(daemon=True)
        self.root, self.interval_s, self.kill_above = root, interval_s, kill_above
        self.time_limit, self.started = time_limit, time.monotonic()
        self.peak = Peak()
        self.killed = ""  # why the import was stopped
        self.machine_before = machine_used()
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            rss = pss = 0
            pids = descendants(self.root)
            for pid in pids:
                rss += kb_fields(read_text(f"/proc/{pid}/status") or "").get("VmRSS", 0)
                pss += kb_fields(read_text(f"/proc/{pid}/smaps_rollup") or "").get("Pss", 0)
            if rss > self.peak.rss:
                self.peak.rss, self.peak.processes = rss, len(pids)
            self.peak.pss = max(self.peak.pss, pss)
            self.peak.machine = max(self.peak.machine, machine_used() - self.machine_before)
            over = rss > self.kill_above * GB
            late = time.monotonic() - self.started > self.time_limit
            if (over or late) and not self.killed:
                self.killed = (
                    f"above {self.kill_above:g} GB" if over else f"after {self.time_limit:g} s"
                )
                os.killpg(self.root, signal.SIGKILL)
            self.done.wait(self.interval_s)


@dataclass
class LevelResult:
    level: int
    problems: int
    folders: int
    exit_status: int
    wall_s: float
    peak_rss_gb: float
    peak_pss_gb: float
    machine_gb: float
    processes: int
    stopped: str
    summary: str
    collected: str = ""


def import_level(kernelbench: Path, level: int, args: argparse.Namespace) -> LevelResult:
    work = Path(tempfile.mkdtemp(prefix=f"kb_import_l{level}_"))
    dest = work / "leaderboards" / "kernelbench"
    command = [sys.executable, "-m", "pytest_kernelboard.cli", "import", "kernelbench"]
    command += [str(kernelbench), "--level", str(level), "--dest", str(dest)]
    source = str(args.source.resolve())
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))
    )
    started = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    sampler = Sampler(process.pid, args.interval, args.kill_above, args.time_limit)
    sampler.start()
    lines = []
    for line in process.stderr:
        lines.append(line.rstrip("\n"))
        if args.verbose:
            print(f"  {line.rstrip()}", file=sys.stderr, flush=True)
    status = process.wait()
    wall = time.monotonic() - started
    sampler.done.set()
    sampler.join()
    folders = sorted(p.parent for p in dest.glob("*/task.yml")) if dest.is_dir() else []
    summary = next((line for line in reversed(lines) if " problems in " in line), "")
    if not summary and lines:
        summary = lines[-1]
    result = LevelResult(
        level=level,
        problems=len(list((kernelbench / f"level{level}").glob("*.py"))),
        folders=len(folders),
        exit_status=status,
        wall_s=round(wall, 1),
        peak_rss_gb=round(sampler.peak.rss / GB, 2),
        peak_pss_gb=round(sampler.peak.pss / GB, 2),
        machine_gb=round(sampler.peak.machine / GB, 2),
        processes=sampler.peak.processes,
        stopped=sampler.killed,
        summary=summary,
    )
    if args.collect and folders:
        shutil.copyfile(ROOT / "leaderboards" / "utils.py", work / "leaderboards" / "utils.py")
        collect = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                str(dest),
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        tail = [line for line in collect.stdout.splitlines() if line.strip()]
        result.collected = tail[-1] if tail else collect.stderr.strip()[-300:]
        if args.verbose:
            print("\n".join(tail[-3:]), file=sys.stderr)
    if args.keep:
        print(f"level {level}: kept {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernelbench", type=Path, help="folder holding level1/, level2/, ...")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    parser.add_argument("--kill-above", type=float, default=12.0, metavar="GB")
    parser.add_argument("--time-limit", type=float, default=900.0, metavar="S")
    parser.add_argument("--collect", action="store_true", help="then pytest --collect-only")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders")
    parser.add_argument("--verbose", action="store_true", help="echo the import's stderr")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--source",
        type=Path,
        default=ROOT,
        help="the checkout whose importer runs (default: this one)",
    )
    args = parser.parse_args(argv)
    results = []
    for level in args.levels:
        result = import_level(args.kernelbench.resolve(), level, args)
        results.append(result)
        stopped = f" STOPPED {result.stopped}" if result.stopped else ""
        print(
            f"level {level}: {result.folders}/{result.problems} folders, exit {result.exit_status}"
            f"{stopped}; wall {result.wall_s:.1f} s; peak pss {result.peak_pss_gb:.2f} GB, "
            f"rss {result.peak_rss_gb:.2f} GB ({result.processes} processes), machine "
            f"+{result.machine_gb:.2f} GB",
            flush=True,
        )
        print(f"  {result.summary}", flush=True)
        if result.collected:
            print(f"  collected: {result.collected}", flush=True)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
