"""Where the README's test command spends its CPU (the 300 s target on 2 cores).

Runs the README's second command (or the one given after `--`) and samples every process on
the machine twice a second, keeping the CPU time each one that started during the run used
(user + system, its own, not its children's). Prints the wall time, the CPU the run used
against what the cores could give, and the split by kind of process: sandboxed workers (each
one a Python that imports torch), nested pytest runs and CLI commands (a judge each), Ray,
compilers and the rest. On a CPU-bound run the wall time is about the CPU over the cores, so
the split says what a change must make cheaper.

    python benchmarks/test_command_cpu.py
    python benchmarks/test_command_cpu.py -- pytest -n auto tests/test_batch.py
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
SAMPLE_EVERY_S = 0.5

# (kind, pattern on the command line), first match wins.
KINDS = [
    ("bwrap (the sandbox around a worker)", re.compile(r"^\S*bwrap ")),
    # A zygote imports torch once; the workers it forks keep its command line.
    ("zygote + forked workers", re.compile(r"pytest_kernelboard\.worker\.zygote ")),
    ("worker (Python + torch)", re.compile(r"pytest_kernelboard\.worker\.main")),
    # The tests fork their nested judges from a server that has imported torch
    # (tests/forked_pytest.py); the children keep its command line.
    ("nested pytest, forked (a judge)", re.compile(r"forked_pytest\.py")),
    ("nested pytest (a judge)", re.compile(r"-m ?pytest |/pytest/__main__\.py|pytest ")),
    ("kernelboard CLI (a judge or a tool)", re.compile(r"pytest_kernelboard\.cli|kernelboard ")),
    ("xdist process", re.compile(r"exec\(eval\(")),
    ("Ray", re.compile(r"\bray\b|raylet|gcs_server")),
    ("GPU MODE eval.py", re.compile(r"eval\.py")),
    ("torch_shm_manager", re.compile(r"torch_shm_manager")),
    ("compiler", re.compile(r"\b(cc1plus|cc1|gcc|nvcc|cicc|ptxas|ld|as)\b|\b(g|cudafe)\+\+(\s|$)")),
    ("browser", re.compile(r"chrom")),
]


def readme_test_command() -> str:
    """The README's second command: the second line of its first bash block that is not a
    comment (as .ci/run reads it)."""
    lines, inside = [], False
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```bash"):
            inside = True
        elif line.startswith("```") and inside:
            break
        elif inside and line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return lines[1]


def own_cpu_s(pid: str) -> tuple[int, float] | None:
    """(start time in ticks, user + system seconds) of one process; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:
        return None
    return int(fields[19]), (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def command_line(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class Sampler(threading.Thread):
    """The CPU of every process that starts after it does, by (pid, start time)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.before = {pid: own_cpu_s(pid) for pid in os.listdir("/proc") if pid.isdigit()}
        self.seen: dict[tuple[str, int], list] = {}  # -> [command line, most CPU seen]
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(SAMPLE_EVERY_S):
            self.sample()
        self.sample()

    def sample(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            now = own_cpu_s(pid)
            if now is None or (self.before.get(pid) or (None,))[0] == now[0]:
                continue  # gone, or there before the run
            entry = self.seen.setdefault((pid, now[0]), [command_line(pid), 0.0])
            entry[0] = entry[0] or command_line(pid)  # an exec'd process names itself later
            entry[1] = max(entry[1], now[1])


def kind_of(command: str) -> str:
    for kind, pattern in KINDS:
        if pattern.search(command):
            return kind
    return "other"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="*", help="the command to run (default: README's)")
    args = parser.parse_args()
    command = shlex.join(args.command) if args.command else readme_test_command()
    cores = os.cpu_count() or 1
    sampler = Sampler()
    sampler.start()
    started = time.monotonic()
    print(f"+ {command}", file=sys.stderr, flush=True)
    returncode = subprocess.call(command, shell=True, cwd=ROOT)
    wall_s = time.monotonic() - started
    sampler.done.set()
    sampler.join()

    by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for command_text, cpu_s in sampler.seen.values():
        totals = by_kind[kind_of(command_text)]
        totals[0] += 1
        totals[1] += cpu_s
    used_s = sum(cpu for _, cpu in by_kind.values())
    print(f"\nexit {returncode}; wall {wall_s:.0f} s on {cores} cores")
    print(
        f"CPU used by processes the run started: {used_s:.0f} s "
        f"({used_s / (wall_s * cores):.0%} of what the cores could give)"
    )
    print(f"{'kind':40} {'processes':>9} {'CPU s':>7} {'share':>6} {'per process':>11}")
    for kind, (count, cpu_s) in sorted(by_kind.items(), key=lambda item: -item[1][1]):
        print(f"{kind:40} {count:9d} {cpu_s:7.0f} {cpu_s / used_s:6.0%} {cpu_s / count:10.2f}s")
    unnamed = sorted(
        ((cpu_s, text) for text, cpu_s in sampler.seen.values() if kind_of(text) == "other"),
        reverse=True,
    )
    if unnamed:
        print("\ncostliest processes of no kind above (a kind to add, if they matter):")
        for cpu_s, text in unnamed[:8]:
            print(f"{cpu_s:7.1f}s  {text[:160]}")
        print("\nthe same, by program (its first words, the module's name with -m):")
        by_program: dict[str, list[float]] = defaultdict(list)
        for cpu_s, text in unnamed:
            words = text.split()
            named = words[:3] if words[1:2] == ["-m"] else words[:2]
            by_program[" ".join(Path(w).name for w in named)[:80]].append(cpu_s)
        ranked = sorted(by_program.items(), key=lambda item: -sum(item[1]))
        for program, seconds in ranked[:10]:
            print(f"{sum(seconds):7.1f}s  {len(seconds):5d}  {program}")
    return returncode


if __name__ == "__main__":
    sys.exit(main())
