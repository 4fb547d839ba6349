"""Host memory of a command's whole process tree at its peak: who held what.

    python benchmarks/cpu_memory.py [--interval 0.2] [--kill-above GB] [--json OUT]
                                    [--series OUT] -- CMD ...
    python benchmarks/cpu_memory.py            # the README's "then timing" step on the example

Runs CMD and samples, every --interval seconds, every process descended from it (the judge,
its zygote, the sandboxed workers forked from it, torch_shm_manager, bwrap) and the
shared-memory files in /dev/shm, where CPU tensors cross between the judge and its workers:

process  PSS from /proc/PID/smaps_rollup (anonymous + file-backed, each shared page divided
         among the processes that map it), shared memory left out: it is counted once below.
         A sandboxed worker is not dumpable, so its smaps cannot be read: its RssAnon (RSS
         less file-backed and shared pages) from /proc/PID/status stands in, which counts the
         pages it still shares with the zygote it was forked from in full.
shm      the bytes of the /dev/shm files that appeared since CMD started (a tensor's file
         lives while any process maps it). The machine's other users' new files count too:
         their names are listed at the peak.
total    the processes' sum plus shm: the memory the run holds at that moment. Its peak is
         printed with every process's and the shm files' share of it, beside each process's
         own high-water mark (VmHWM) and the machine's used memory above its level before
         the run (MemTotal - MemAvailable, everyone's).

A spike shorter than the interval can be missed. --series writes every sample as a JSON line
(time.monotonic(), as KERNELBOARD_MEMORY_TRACE's lines have it, so the judge's phases line up). --kill-above stops the run (its process group)
once the total passes that many GB, so a measurement cannot take a shared machine down; the
exit status is then 3, else CMD's own.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pytest_kernelboard.supervisor import proctree

ROOT = Path(__file__).resolve().parent.parent
SHM = Path("/dev/shm")
DEFAULT_COMMAND = ["pytest", "submissions/vectoradd/example", "--kb-mode", "benchmark"]
GB = 1e9


@dataclass
class Held:
    """One process's memory at one sample (bytes)."""

    pid: int
    name: str
    anon: int = 0
    file: int = 0
    shmem: int = 0  # its mapped shared memory (not added to the total: shm counts it once)
    hwm: int = 0  # VmHWM: its own peak RSS so far
    estimated: bool = False  # smaps unreadable: RssAnon from status instead of PSS

    @property
    def own(self) -> int:
        return self.anon + self.file


@dataclass
class Sample:
    t: float
    processes: list[Held] = field(default_factory=list)
    shm_files: dict[str, int] = field(default_factory=dict)
    machine_used: int = 0
    mapped_only: bool = False  # shm: what the tree maps, not the new files in /dev/shm

    @property
    def shm(self) -> int:
        if self.mapped_only:
            return sum(p.shmem for p in self.processes)
        return sum(self.shm_files.values())

    @property
    def total(self) -> int:
        return sum(p.own for p in self.processes) + self.shm


def read_text(path: str) -> str | None:
    """A /proc file's text, or None where it cannot be read (a process gone, not dumpable)."""
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def kb_fields(text: str) -> dict[str, int]:
    """A /proc status or meminfo text's `Key: N kB` lines, in bytes."""
    found = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            found[key] = int(parts[0]) * 1024
    return found


def tree(root: int) -> dict[int, int]:
    """root and every process descended from it, each with its parent (root's: 0)."""
    snapshot = proctree.read_snapshot()
    if snapshot is None:
        return {root: 0}
    return {
        pid: 0 if pid == root else snapshot.processes[pid].ppid for pid in snapshot.tree(root)
    } or {root: 0}


def _command_line(pid: int) -> list[str]:
    raw = read_text(f"/proc/{pid}/cmdline") or ""
    return [w for w in raw.split("\0") if w]


def process_name(pid: int, parent: int) -> str:
    """What the process is: bwrap, the zygote, a worker forked from it, or its command line."""
    words = _command_line(pid)
    if not words:
        return (read_text(f"/proc/{pid}/comm") or "?").strip()
    program = os.path.basename(words[0])
    line = " ".join([program, *words[1:]])
    if program == "bwrap":
        return "bwrap (a sandbox)"
    if _zygote(words):
        if _zygote(_command_line(parent)):
            return "worker (forked from the zygote)"
        return "zygote (imports torch once, forks the workers)"
    return line[:100]


def _zygote(words: list[str]) -> bool:
    """The judge's fork server, whichever way it was started; its forks keep its command."""
    return "pytest_kernelboard.worker.zygote" in words


def held(pid: int, parent: int = 0) -> Held | None:
    status = read_text(f"/proc/{pid}/status")
    if status is None:
        return None
    st = kb_fields(status)
    entry = Held(pid, process_name(pid, parent), hwm=st.get("VmHWM", 0))
    rollup = read_text(f"/proc/{pid}/smaps_rollup")
    fields = kb_fields(rollup) if rollup else {}
    if "Pss_Anon" in fields:
        entry.anon = fields["Pss_Anon"]
        entry.file = fields.get("Pss_File", 0)
        entry.shmem = fields.get("Pss_Shmem", 0)
    else:  # not dumpable (a sandboxed worker) or an old kernel: RSS less what is shared
        entry.anon = st.get("RssAnon", 0)
        entry.shmem = st.get("RssShmem", 0)
        entry.estimated = True
    return entry


def shm_files(before: set[str]) -> dict[str, int]:
    """The /dev/shm files that were not there before, with the bytes each holds."""
    found = {}
    try:
        names = os.listdir(SHM)
    except OSError:
        return found
    for name in names:
        if name in before:
            continue
        try:
            found[name] = os.stat(SHM / name).st_blocks * 512
        except OSError:
            continue
    return found


def machine_used() -> int:
    info = kb_fields(read_text("/proc/meminfo") or "")
    return info.get("MemTotal", 0) - info.get("MemAvailable", 0)


class TreeSampler:
    """Samples a process tree's memory in a thread until stopped; keeps the peak sample and
    each process's largest VmHWM."""

    def __init__(
        self,
        root: int,
        interval_s: float = 0.2,
        kill_above: int | None = None,
        series: Path | None = None,
        mapped_only: bool = False,
    ):
        """mapped_only: count the shared memory the tree's processes map (each page divided
        among them), not every new file in /dev/shm: other runs on the machine (a test
        suite's other processes) add files of their own. A file no process maps is missed,
        and an unreadable process's mappings count in full."""
        self.root = root
        self.series = series
        self.mapped_only = mapped_only
        self.interval_s = interval_s
        self.kill_above = kill_above
        self.started = time.monotonic()
        self.shm_before = set(os.listdir(SHM)) if SHM.is_dir() else set()
        self.machine_before = machine_used()
        self.peak: Sample | None = None
        self.peak_machine = 0
        self.hwm: dict[int, tuple[str, int]] = {}
        self.samples = 0
        self.killed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> TreeSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> Sample:
        now = Sample(round(time.monotonic() - self.started, 2), mapped_only=self.mapped_only)
        for pid, parent in tree(self.root).items():
            entry = held(pid, parent)
            if entry is not None:
                now.processes.append(entry)
                name, hwm = self.hwm.get(pid, (entry.name, 0))
                self.hwm[pid] = (name, max(hwm, entry.hwm))
        now.shm_files = shm_files(self.shm_before)
        now.machine_used = machine_used() - self.machine_before
        return now

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self.sample()
            self.samples += 1
            if self.series is not None:
                self._write(now)
            self.peak_machine = max(self.peak_machine, now.machine_used)
            if self.peak is None or now.total > self.peak.total:
                self.peak = now
            if self.kill_above is not None and now.total > self.kill_above and not self.killed:
                self.killed = True
                try:
                    os.killpg(self.root, signal.SIGKILL)
                except OSError:
                    pass
            self._stop.wait(self.interval_s)

    def _write(self, now: Sample) -> None:
        line = {
            "t": round(self.started + now.t, 3),
            "total": now.total,
            "shm": now.shm,
            "processes": {f"{p.pid} {p.name[:40]}": p.own for p in now.processes if p.own > 1e8},
        }
        with open(self.series, "a") as out:  # type: ignore[arg-type]
            out.write(json.dumps(line) + "\n")


def report(sampler: TreeSampler, wall_s: float) -> dict:
    peak = sampler.peak or Sample(0.0)
    return {
        "wall_s": round(wall_s, 1),
        "samples": sampler.samples,
        "interval_s": sampler.interval_s,
        "peak_total_bytes": peak.total,
        "peak_t_s": peak.t,
        "peak_processes": [asdict(p) | {"own": p.own} for p in peak.processes],
        "peak_shm_bytes": peak.shm,
        "peak_shm_files": peak.shm_files,
        "peak_machine_used_bytes": sampler.peak_machine,
        "hwm": {str(pid): {"name": n, "vm_hwm": h} for pid, (n, h) in sampler.hwm.items()},
        "killed": sampler.killed,
    }


def _gb(n: int) -> str:
    return f"{n / GB:6.2f} GB"


def print_report(result: dict) -> None:
    print(f"wall {result['wall_s']} s, {result['samples']} samples every {result['interval_s']} s")
    if result["killed"]:
        print("stopped: the total passed --kill-above")
    print(
        f"peak over the process tree: {_gb(result['peak_total_bytes']).strip()} "
        f"at {result['peak_t_s']} s (processes + /dev/shm)"
    )
    print(f"  {'pid':>7}  {'anon':>9}  {'file':>9}  {'maps shm':>9}  process")
    for p in sorted(result["peak_processes"], key=lambda p: -p["own"]):
        mark = "*" if p["estimated"] else " "
        print(
            f"  {p['pid']:>7}{mark} {_gb(p['anon'])}  {_gb(p['file'])}  {_gb(p['shmem'])}  "
            f"{p['name']}"
        )
    files = result["peak_shm_files"]
    print(f"  /dev/shm: {_gb(result['peak_shm_bytes']).strip()} in {len(files)} new files")
    for name, size in sorted(files.items(), key=lambda kv: -kv[1])[:8]:
        if size:
            print(f"           {_gb(size)}  {name}")
    print("  (* RssAnon from status: the process is not dumpable, its smaps unreadable)")
    print(f"machine's used memory above its level before: {_gb(result['peak_machine_used_bytes'])}")
    print("each process's own peak RSS (VmHWM), the largest first:")
    for pid, entry in sorted(result["hwm"].items(), key=lambda kv: -kv[1]["vm_hwm"])[:8]:
        print(f"  {pid:>7}  {_gb(entry['vm_hwm'])}  {entry['name']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--kill-above", type=float, default=None, help="GB")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--series", type=Path, default=None)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    command = command or DEFAULT_COMMAND
    print("$ " + shlex.join(command), flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
    kill_above = int(args.kill_above * GB) if args.kill_above else None
    sampler = TreeSampler(proc.pid, args.interval, kill_above, args.series).start()
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGTERM)
        rc = proc.wait()
    sampler.stop()
    result = report(sampler, time.monotonic() - started)
    result["command"] = command
    result["returncode"] = rc
    print_report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 3 if sampler.killed else rc


if __name__ == "__main__":
    sys.exit(main())
