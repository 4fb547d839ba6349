"""Profile mode: one call per benchmark case under Nsight Compute, else the torch profiler.

The full report is saved beside the results file; a short summary (the kernels the call
launched, their device time and, under Nsight Compute, their throughput) goes into the case's
record as `profile`. Profiles are diagnostics: a profiled run never ranks.

Nsight Compute profiles a whole process, so each profiled case gets its own worker started
under `ncu`; the worker opens the profiling range (cudaProfilerStart/Stop) around the one call
only, so imports, compilation and warm-up stay out of the report. Clocks are left as they
are (`--clock-control none`); ncu flushes the caches before each kernel replay itself.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import KernelboardError
from ..names import slug
from ..supervisor.launch import Launcher

NCU_SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy")
# Raw-page metric -> summary key. Units are converted where a duration is involved.
NCU_METRICS = {
    "gpu__time_duration.sum": "duration_us",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "launch__grid_size": "grid_size",
    "launch__block_size": "block_size",
    "launch__registers_per_thread": "registers_per_thread",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
}
DURATION_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
COUNT_KEYS = ("grid_size", "block_size", "registers_per_thread")
TOP_KERNELS = 10
KERNELS = "device kernels"
CPU_OPS = "CPU ops (inclusive times)"
NCU_IMPORT_TIMEOUT_S = 120.0


class ProfileError(KernelboardError):
    """The profiler ran but left no usable report (the message says what it printed)."""


def find_ncu() -> str | None:
    """Nsight Compute's command line, from PATH or the CUDA toolkit's usual places."""
    found = shutil.which("ncu")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and Path(home, "bin", "ncu").is_file():
            return str(Path(home, "bin", "ncu"))
    return None


def report_dir_for(results_path: str | None, rootpath: Path) -> Path:
    """`results.json` -> `results.profiles/`; without a results file, `kernelboard-profiles/`."""
    # Absolute: the worker that writes a trace runs in a folder of its own.
    if results_path:
        path = Path(results_path).resolve()
        return path.with_name(path.stem + ".profiles")
    return rootpath.resolve() / "kernelboard-profiles"


@dataclass
class CaseProfiler:
    """Which profiler to use, where its reports go, and how a report becomes a summary."""

    report_dir: Path
    ncu: str | None  # Nsight Compute's path, or None for the torch profiler

    @classmethod
    def for_machine(cls, report_dir: Path, use_cuda: bool) -> CaseProfiler:
        return cls(report_dir, find_ncu() if use_cuda else None)

    @property
    def tool(self) -> str:
        return "ncu" if self.ncu else "torch.profiler"

    def report_path(self, leaderboard: str, submission: str, case_id: str) -> Path:
        suffix = ".ncu-rep" if self.ncu else ".trace.json"
        self.report_dir.mkdir(parents=True, exist_ok=True)
        name = "-".join(
            slug(part, joiner="_", keep="._=-", empty="case")
            for part in (leaderboard, submission, case_id)
        )
        return self.report_dir / (name + suffix)

    def launcher(self, report: Path) -> Launcher | None:
        """What a dedicated worker starts under, or None for an ordinary worker."""
        if not self.ncu:
            return None
        sections = [arg for name in NCU_SECTIONS for arg in ("--section", name)]
        command = (
            self.ncu,
            "--profile-from-start",
            "off",
            "--target-processes",
            "all",
            "--clock-control",
            "none",
            *sections,
            "--export",
            str(report),
            "--force-overwrite",
        )
        # The install folder, not the (perhaps linked) path: ncu runs its own binaries there.
        return Launcher(command, Path(self.ncu).resolve().parent, report.parent)

    def summarize(self, report: Path, log: str = "") -> dict[str, Any]:
        """The report's summary; `log` is what the profiler printed while the worker ran."""
        if self.ncu:
            if not report.is_file() and "No kernels were profiled" in log:
                return profile_summary(
                    self.tool, report, [], KERNELS, "the call launched no kernel"
                )
            return profile_summary(
                self.tool, report, ncu_kernels(self._ncu_csv(report, log)), KERNELS
            )
        return profile_summary(self.tool, report, *trace_kernels(_read_trace(report)))

    def _ncu_csv(self, report: Path, log: str) -> str:
        if not report.is_file():
            said = "\n".join(line for line in log.splitlines() if line.startswith("==")) or log
            raise ProfileError(f"Nsight Compute wrote no report at {report}:\n{said[-1500:]}")
        proc = subprocess.run(
            [self.ncu, "--import", str(report), "--csv", "--page", "raw"],
            capture_output=True,
            text=True,
            timeout=NCU_IMPORT_TIMEOUT_S,
        )
        if proc.returncode != 0:
            raise ProfileError(f"ncu --import {report} failed: {proc.stderr.strip()[-500:]}")
        return proc.stdout


def profile_summary(
    tool: str, report: Path, entries: list[dict[str, Any]], what: str, note: str = ""
) -> dict[str, Any]:
    """The record's `profile` field: totals plus the entries that took the most time."""
    ranked = sorted(entries, key=lambda k: k.get("duration_us") or 0.0, reverse=True)
    summary = {
        "tool": tool,
        "report": report.name if report.is_file() else None,
        "what": what,
        "calls_total": sum(k.get("calls", 1) for k in entries),
        "duration_us_total": round(sum(k.get("duration_us") or 0.0 for k in entries), 3),
        "top": ranked[:TOP_KERNELS],
    }
    if note:
        summary["note"] = note
    return summary


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def ncu_kernels(raw_csv: str) -> list[dict[str, Any]]:
    """Kernels from `ncu --import R --csv --page raw`: one row per launch, a units row first."""
    start = raw_csv.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.DictReader(io.StringIO(raw_csv[start:])))
    units = rows[0] if rows and not (rows[0].get("ID") or "").strip() else {}
    kernels = []
    for row in rows[1 if units else 0 :]:
        if not (row.get("ID") or "").strip():
            continue
        kernel: dict[str, Any] = {"name": row.get("Kernel Name", "?"), "calls": 1}
        for metric, key in NCU_METRICS.items():
            value = _number(row.get(metric, ""))
            if value is None:
                continue
            if key == "duration_us":
                value *= DURATION_TO_US.get((units.get(metric) or "nsecond").strip(), 1e-3)
            kernel[key] = int(value) if key in COUNT_KEYS else round(value, 3)
        kernels.append(kernel)
    return kernels


def _read_trace(report: Path) -> dict[str, Any]:
    try:
        return json.loads(report.read_text())
    except (OSError, ValueError) as exc:
        raise ProfileError(f"the torch profiler's trace {report} cannot be read: {exc}") from None


def trace_kernels(trace: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Device kernels from a torch profiler chrome trace, per name; CPU ops when there are none.

    CPU op times are inclusive (an op's time includes the ops it calls).
    """
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    chosen, what = [e for e in events if e.get("cat") == "kernel"], KERNELS
    if not chosen:
        chosen, what = [e for e in events if e.get("cat") == "cpu_op"], CPU_OPS
    by_name: dict[str, dict[str, Any]] = {}
    for event in chosen:
        entry = by_name.setdefault(
            event.get("name", "?"), {"name": event.get("name", "?"), "calls": 0, "duration_us": 0.0}
        )
        entry["calls"] += 1
        entry["duration_us"] += float(event.get("dur") or 0.0)
    for entry in by_name.values():
        entry["duration_us"] = round(entry["duration_us"], 3)
    return list(by_name.values()), what
