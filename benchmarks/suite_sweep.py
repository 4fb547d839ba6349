"""Judge a whole suite, imported as leaderboards, with its baseline submissions on this host's GPUs.

    python benchmarks/suite_sweep.py kernelbench KERNELBENCH [--levels 1 2 3] [OPTIONS]
    python benchmarks/suite_sweep.py gpumode PROBLEMS [--competition YAML ...] [OPTIONS]
    OPTIONS: [--out DIR] [--gpus 0,1,...|none] [--mode benchmark|test] [--cap S] [--limit N]
             [--only PATTERN ...] [--misses N] [--stop-after S] [--fresh] [--cli]
             [--candidate-workers K] [--reference-workers R] [--spread PATTERN ...]

kernelbench: KERNELBENCH is KernelBench's `KernelBench/` folder (level1/, level2/, ...). Each
level is imported with `kernelboard import kernelbench` in a process of its own, on the CPU
only (CUDA_VISIBLE_DEVICES empty: an import never shares a GPU with a timed case), and each
problem is judged as soon as its folder is written, with ModelNew = Model. Target: all but
--misses (default 2% of the problems judged) pass and tie with the reference: 245 of
KernelBench's 250 (levels 1-3).

gpumode: PROBLEMS is reference-kernels' `problems/` folder. Every competition YAML's problems
are imported with `kernelboard import gpumode` and judged with the folder's shipped
submission.py, or with the reference as custom_kernel where the shipped one imports a package
that is not installed here (or there is none). Target: every problem passes, is not run with
a reason that names the device, its architecture or its GPU count, or fails because its
shipped submission misses its own reference for a cause listed in UPSTREAM (named in the
target's line, never counted as passed).

Each GPU (--gpus, default every GPU NVML sees; `none` or no GPU: one CPU lane) gets a lane
(benchmarks/sweep_lane.py): one judge process, the batch judge (`judge_many`) in it, that
judges one problem at a time (each candidate's timed case in --candidate-workers fresh
workers, default 3, combined as the reference's five are: timed in one worker, identical code of
KernelBench L2 61 read 0.931x [0.912, 0.949] against its reference on an H200, in three 1.001x
[0.836, 1.197]) and is killed and started afresh when a problem passes --cap seconds, or, for a
GPU MODE folder, its task.yml's timeout for the mode times the candidate's and the reference's
workers in benchmark mode, where that is longer (`--cli` runs `kernelboard judge` per problem
instead, as a user would). Problems whose cases need several GPUs are judged
last, one at a time, with every GPU; so is each problem --spread names (a name or source
pattern, as --only), as a batch over every GPU: its candidate timed on one while the
reference's five workers are dealt across all of them (batch/fanout.py), for a problem too
long for one GPU's window (GPU MODE's eigh: 13 timed cases of up to 640 eigendecompositions of
512 x 512 in each of six workers).

Out (--out, default suite-sweep-SUITE/): rows.jsonl, one row per problem as it completes (a
sweep started again over the same folder judges only the problems without a row; --fresh
starts over; --stop-after S starts no problem after S seconds, to fit a window of time),
records/ (each problem's candidate record), lanes/ (each lane's log), the scratch repository
the suite is imported into (repo/), and at the end table.md. A row: status
(passed; failed or error: the candidate's first failure; timeout: a task timeout or --cap;
not_run: with the reason in words: what the judge says (needs N GPUs, needs X GiB at its peak,
needs CUDA), the hardware the leaderboard's code uses where it fails (AMD-only, needs sm_100
(Blackwell): pytest_kernelboard/judge/hardware.py), or why the import skipped it), tied,
speedup and its interval, the GPU's peak used memory while it was judged (NVML), wall time.
A problem that KernelBench's own evaluator fails, or whose shipped GPU MODE submission misses
its own reference, is listed with that cause (UPSTREAM).
The exit status is 0 when the target is met, 1 when not, 2 when the sweep cannot start.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sweep_lane import Answer, CliLane, Lane, MemoryPeaks, child_env  # noqa: E402

from pytest_kernelboard.batch.reference_share import (  # noqa: E402
    MIN_REFERENCE_WORKERS,
    REFERENCE_WORKERS,
    reference_workers_arg,
)
from pytest_kernelboard.importers.kernelbench import (  # noqa: E402
    leaderboard_name,
    problem_files,
)
from pytest_kernelboard.judge.evalpy import is_evalpy_task, main_script  # noqa: E402
from pytest_kernelboard.judge.hardware import (  # noqa: E402
    Device,
    hardware_note,
    leaderboard_sources,
)
from pytest_kernelboard.judge.staging import module_name  # noqa: E402
from pytest_kernelboard.spec.discovery import Catalog, reload_catalog  # noqa: E402
from pytest_kernelboard.spec.task import TaskSpec  # noqa: E402

DEFAULT_CAP_S = 300.0
MISSES_SHARE = 0.02  # the problems allowed to miss the target: 5 of KernelBench's 250
MODEL_NEW = '''"""KernelBench's baseline: ModelNew is the reference Model itself."""

from problem import Model


class ModelNew(Model):
    pass
'''
REFERENCE_AS_KERNEL = '''"""The leaderboard's own reference as the submission."""

from reference import ref_kernel


def custom_kernel(data):
    return ref_kernel(data)
'''
# Problems that KernelBench's own evaluator fails, by leaderboard, with the cause.
UPSTREAM = {
    "kernelbench_l1_95_crossentropyloss": (
        "KernelBench's own evaluator fails it: it casts every input to the float precision "
        "(src/kernelbench/eval.py, _process_input_tensor), so cross_entropy's integer targets "
        "reach nll_loss as 'Float'; kernelboard keeps each input's dtype"
    ),
    "kernelbench_l3_35_lstm": (
        "its forward pass draws a fresh random initial state (torch.randn h0, c0) on every "
        "call, so no two calls agree; KernelBench's own harness fails it too"
    ),
    # GPU MODE's pmpp folders: their shipped submission.py against their own reference.
    "vectorsum": (
        "its shipped submission.py sums in float32 with one atomic add per block, in any order; "
        "on inputs of tens of millions of elements with generate_input's offset of up to "
        "+-100 its error (3e-5 of the sum on a timed call here) passes the reference's rtol of "
        "1e-5 on some seeds only. GPU MODE's eval.py checks its calls on the case's own seed only; "
        "kernelboard checks every timed call on a fresh one"
    ),
    "vectorsum_v2": (
        "its shipped submission.py adds each block's sum atomically into the output tensor "
        "that generate_input made with torch.empty, never zeroed: every sum starts from "
        "whatever that memory last held (a test case of 1,023 elements read -17677.71 against "
        "-17676.60). The v1 submission allocates its own torch.zeros"
    ),
    "conv2d_v2": (
        "its shipped submission.py leaves cuDNN's TF32 on (PyTorch's default; pmpp's conv2d "
        "submission turns it off), while the reference turns it off for itself: on a GPU with "
        "TF32 (sm_80 and up) the convolution misses the reference's rtol = atol = 1e-3 "
        "(differences of about 3e-3 here)"
    ),
}
# Fresh workers that time each candidate's timed case by default: in one, identical code of
# KernelBench L2 61 read 0.931x its reference (not tied) on an H200; in three it tied.
CANDIDATE_WORKERS = 3
# A line of `kernelboard import kernelbench` on stderr, one per problem.
IMPORT_LINE = re.compile(
    r"^\[\s*\d+/\d+\s+[\d.]+ s\] (?P<stem>[\w-]+): "
    r"(?:imported as (?P<folder>[\w-]+)\b.*|skipped: (?P<reason>.*))$"
)
IMPORT_COST = re.compile(r"\s*\([\d.]+ s, [\d.]+ GB\)$")  # the end of a skipped line
NO_GPU = Device("")
LOCAL_MODULES = {"submission", "task", "reference", "utils", "eval"}
# A not-run reason that names the device, its architecture or its GPU count (GPU MODE's target).
HARDWARE_REASON = re.compile(
    r"needs \d+ GPUs|needs sm_\d+|AMD-only|needs CUDA|GiB at its peak|this GPU|this machine"
)
# What a lane answers when the leaderboard itself does not load (its reference.py, its task.yml).
LEADERBOARD_ERRORS = ("TaskError", "UnknownLeaderboard")


# -- what is judged ----------------------------------------------------------------------------
@dataclass
class Problem:
    """One row of the sweep: a leaderboard and the candidate it is judged with."""

    key: str  # the leaderboard's name: the row's identity
    source: str  # where it comes from: level1/95_CrossEntropyLoss.py, amd/fp8-mm
    order: int = 0
    candidate: str = ""  # what is judged, in words
    candidate_id: str = ""
    source_text: str = ""
    world_size: int = 1
    fewest_gpus: int = 1  # its smallest case's world_size
    own_harness: str = ""  # the folder's own script that judges it (eval.py), if any
    not_run: str = ""  # decided before judging (the import skipped it)
    # What names the hardware its code may need: the devices it ranks on, its own sources.
    declared: tuple[str, ...] = ()
    sources: list[str] = field(default_factory=list)
    # The leaderboard's own timeouts by mode (task.yml), where known before judging.
    timeouts: dict[str, float] = field(default_factory=dict)
    spread: bool = False  # judged as a batch over every GPU of the sweep (--spread)

    def cap_s(
        self,
        mode: str,
        floor_s: float,
        candidate_workers: int = 1,
        reference_workers: int = REFERENCE_WORKERS,
    ) -> float:
        """How long this problem may be judged: --cap, or longer where its own task.yml gives
        a submission's run more (in benchmark mode each of the candidate's and the reference's
        workers gets as much): the cap catches a judge that hangs, not a slow run the judge's
        limits allow."""
        own = self.timeouts.get(mode, 0.0)
        runs = candidate_workers + reference_workers if mode == "benchmark" else 1
        return max(floor_s, own * runs)

    def hardware_note(self, error: str, device: Device) -> str | None:
        """judge/hardware.py's words for a failure of this problem's code on `device`."""
        texts = [error, self.source_text, *self.sources]
        return hardware_note(texts, self.declared, device)

    def job(self, reference_workers: int = REFERENCE_WORKERS) -> dict[str, Any]:
        return {
            "problem": self.key,
            "leaderboard": self.key,
            "id": self.candidate_id,
            "source": self.source_text,
            "lang": "cu" if self.candidate_id.endswith(".cu") else "py",
            "spread": self.spread,
            "reference_workers": reference_workers,
        }


def matches(problem: Problem, patterns: list[str]) -> bool:
    """Whether a pattern matches the problem's name or source, any case."""
    return any(
        fnmatch.fnmatch(text.lower(), pattern.lower())
        for pattern in patterns
        for text in (problem.key, problem.source)
    )


def selected(problems: list[Problem], only: list[str], limit: int | None) -> list[Problem]:
    """--only (patterns matching a problem's name or source, any case) and --limit."""
    if only:
        problems = [p for p in problems if matches(p, only)]
    return problems[:limit] if limit is not None else problems


class KernelBench:
    """KernelBench's levels: imported level by level in the background, each problem handed
    on as soon as its folder is written."""

    name = "kernelbench"

    def __init__(self, path: Path, levels: list[int]):
        self.path, self.levels = path, levels
        self.importers: list[subprocess.Popen] = []
        self.stopped = threading.Event()

    def stop(self) -> None:
        """Stop importing: the problems not imported yet get no row (the next sweep's)."""
        self.stopped.set()
        for importer in self.importers:
            importer.kill()

    def plan(self) -> list[Problem]:
        problems = []
        for level in self.levels:
            for file in problem_files(self.path, level):
                _, name = leaderboard_name(level, file.stem)
                problems.append(Problem(name, f"level{level}/{file.name}", order=len(problems)))
        return problems

    def prepare(
        self, problems: list[Problem], root: Path, ready: Callable[[Problem], None]
    ) -> None:
        """Import the problems' levels (in parallel) and call ready(problem) for each as it
        is written, or with `not_run` set where the import skipped it."""
        dest = root / "leaderboards" / "kernelbench"
        dest.mkdir(parents=True, exist_ok=True)
        by_level: dict[int, list[Problem]] = {}
        for problem in problems:
            by_level.setdefault(int(problem.source.split("/")[0][5:]), []).append(problem)
        threads = [
            threading.Thread(target=self._import_level, args=(level, chosen, dest, ready))
            for level, chosen in by_level.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _import_level(
        self, level: int, problems: list[Problem], dest: Path, ready: Callable[[Problem], None]
    ) -> None:
        by_stem = {Path(p.source).stem: p for p in problems}
        command = [sys.executable, "-m", "pytest_kernelboard.cli", "import", "kernelbench"]
        command += [str(self.path), "--level", str(level), "--dest", str(dest)]
        command += ["--problems", *by_stem]
        importer = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(None),  # on the CPU: never on a GPU that times a case
        )
        self.importers.append(importer)
        assert importer.stderr is not None
        for line in importer.stderr:
            found = IMPORT_LINE.match(line.rstrip("\n"))
            if found is None or found["stem"] not in by_stem:
                continue
            problem = by_stem.pop(found["stem"])
            if found["folder"]:
                problem.candidate, problem.candidate_id = "ModelNew = Model", "model_new.py"
                problem.source_text = MODEL_NEW
            else:
                problem.not_run = "not imported: " + IMPORT_COST.sub("", found["reason"])
            ready(problem)
        code = importer.wait()
        if self.stopped.is_set():
            return
        for problem in by_stem.values():  # the import ended before it
            problem.not_run = f"not imported: `kernelboard import kernelbench` exited {code} first"
            ready(problem)


class GpuMode:
    """reference-kernels' problems/: every competition YAML's problems, imported at once."""

    name = "gpumode"

    def __init__(self, path: Path, competitions: list[str]):
        self.path, self.competitions = path, competitions
        self.root: Path | None = None

    def import_into(self, root: Path) -> Catalog:
        """Import every competition (or those named) into root; its catalog of leaderboards."""
        (root / "leaderboards").mkdir(parents=True, exist_ok=True)
        for yml in self.competitions or [None]:
            command = [sys.executable, "-m", "pytest_kernelboard.cli", "import", "gpumode"]
            command += [str(self.path), "--root", str(root), "--replace"]
            command += ["--competition", yml] if yml else []
            done = subprocess.run(command, capture_output=True, text=True, env=child_env(None))
            if done.returncode != 0:
                raise SystemExit(f"suite_sweep: the import failed:\n{done.stderr.strip()}")
        return reload_catalog(root)

    def stop(self) -> None:
        pass

    def plan_from(self, catalog: Catalog) -> list[Problem]:
        """A problem per leaderboard, in folder order; one that does not load gets its row
        with the reason."""
        found: list[tuple[Path, Problem]] = []
        for name, task in catalog.tasks.items():
            problem = Problem(name, self.source(task.path), world_size=task.max_world_size)
            problem.fewest_gpus = task.min_world_size
            problem.own_harness = main_script(task) if is_evalpy_task(task) else ""
            problem.declared, problem.sources = task.gpus, leaderboard_sources(task)
            problem.timeouts = {"test": task.test_timeout, "benchmark": task.benchmark_timeout}
            choose_candidate(problem, task)
            found.append((task.path, problem))
        for name, error in catalog.errors.items():
            why = f"the leaderboard does not load: {error}"
            found.append((Path(error.path), Problem(name, self.source(error.path), not_run=why)))
        problems = [problem for _, problem in sorted(found, key=lambda item: str(item[0]))]
        for order, problem in enumerate(problems):
            problem.order = order
        return problems

    def source(self, task_yml: Path) -> str:
        """Where a leaderboard lies in the scratch repository: amd/fp8-mm."""
        folder = Path(task_yml).resolve().parent
        try:
            return str(folder.relative_to(catalog_root(self.root).resolve()))
        except ValueError:
            return str(folder)

    def prepare(
        self, problems: list[Problem], root: Path, ready: Callable[[Problem], None]
    ) -> None:
        for problem in problems:  # imported already (plan_from needs the catalog)
            ready(problem)


def catalog_root(root: Path | None) -> Path:
    return (root or Path.cwd()) / "leaderboards"


def missing_imports(source: str, local: set[str]) -> list[str]:
    """The top-level modules a Python source imports that are neither the leaderboard's own
    files nor installed here (read from its syntax; nothing of it runs)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return sorted(name for name in names - local if importlib.util.find_spec(name) is None)


def choose_candidate(problem: Problem, task: TaskSpec) -> None:
    """The folder's shipped submission, or the reference as custom_kernel where the shipped
    one imports a package this machine lacks (or there is none)."""
    folder = task.path.parent
    shipped = folder / ("submission.cu" if task.lang == "cu" else "submission.py")
    local = LOCAL_MODULES | {module_name(f.name) for f in task.files}
    local |= {p.stem for p in folder.glob("*.py")}
    why = "no shipped submission"
    if shipped.is_file():
        source = shipped.read_text()
        missing = missing_imports(source, local) if shipped.suffix == ".py" else []
        if not missing:
            problem.candidate, problem.candidate_id = f"shipped {shipped.name}", shipped.name
            problem.source_text = source
            return
        why = f"{shipped.name} imports {', '.join(missing)}, not installed"
    problem.candidate = f"reference as custom_kernel ({why})"
    problem.candidate_id, problem.source_text = "reference_as_kernel.py", REFERENCE_AS_KERNEL


# -- rows ----------------------------------------------------------------------------------------
def first_line(text: str, limit: int = 240) -> str:
    """A message's first line, without the "not run: " a row's status already says."""
    line = next((row.strip() for row in (text or "").splitlines() if row.strip()), "")
    line = line.removeprefix("not run: ")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def row_for(
    problem: Problem,
    answer: Answer | None,
    mode: str,
    peak: int | None = None,
    gpus: list[int] | None = None,
    device: Device = NO_GPU,
) -> dict[str, Any]:
    """The table's row: status, tied, speedup, peak memory, wall time and the reason. `device`
    is the GPU it was judged on, for the hardware a failure's code may need."""
    row: dict[str, Any] = {
        "problem": problem.key,
        "source": problem.source,
        "candidate": problem.candidate,
        "status": "not_run",
        "tied": None,
        "speedup": None,
        "speedup_ci95": None,
        "peak_gpu_bytes": peak,
        "wall_s": round(answer.wall_s, 1) if answer else 0.0,
        "gpus": gpus,
        "reason": problem.not_run,
        "upstream": UPSTREAM.get(problem.key),
    }
    if answer is None:
        return row
    record = answer.record
    if record is None:
        # A leaderboard that does not load is its own matter; anything else the lane raised
        # (or its death) is the harness's.
        # A problem stopped at --cap was running: its code works here, slowly or not, so no
        # hardware it names explains it; nor does it explain the lane's own death.
        note = (
            None if answer.timed_out or answer.died else problem.hardware_note(answer.error, device)
        )
        leaderboards = answer.error.startswith(LEADERBOARD_ERRORS)
        row["status"] = (
            "timeout" if answer.timed_out else "not_run" if leaderboards or note else "error"
        )
        row["reason"] = note or first_line(answer.error)
        row["message"] = answer.error
        return row
    row["judged"] = record["status"]
    row["duration_s"] = record["duration_s"]
    cases = record["cases"]
    row["cases"] = dict(Counter(case["status"] for case in cases))
    ran = [c for c in cases if c["status"] not in ("skipped", "not_run")]
    unrun = [c for c in cases if c["status"] in ("skipped", "not_run")]
    timed = [c for c in ran if c["kind"] == "benchmark" and c["status"] == "passed"]
    if record["status"] != "passed":
        row["status"] = "timeout" if record["error_kind"] == "timeout" else record["status"]
        row["reason"] = first_line(record["message"])
        row["message"] = record["message"]
        # The baseline of a problem written for other hardware: named, and not run.
        note = problem.hardware_note(record["message"], device)
        if note is not None:
            row["status"], row["reason"] = "not_run", f"{note}; {row['reason']}"
    elif not ran:
        row["reason"] = first_line(unrun[0]["message"]) if unrun else "no cases"
    elif mode == "benchmark" and not timed:
        benchmark = next((c for c in unrun if c["kind"] == "benchmark"), None)
        row["reason"] = "tests passed; benchmark not run: " + (
            first_line(benchmark["message"]) if benchmark else "no benchmark case"
        )
    else:
        row["status"] = "passed"
        row["tied"], row["speedup"] = record["tied"], record["speedup"]
        row["speedup_ci95"] = record.get("speedup_ci95")
        untimed = [c for c in timed if c.get("reference_error")]
        if unrun:
            row["reason"] = f"{len(unrun)} case(s) not run: {first_line(unrun[0]['message'])}"
        elif untimed:  # no speedup: the reference is the harness's to time
            case = untimed[0]
            row["reason"] = (
                f"the reference could not be timed on {case['id']}: "
                f"{first_line(case['reference_error'])}"
            )
        elif problem.own_harness and record["speedup"] is None:
            row["reason"] = (
                f"judged by its own {problem.own_harness} (its reference.py has no ref_kernel): "
                "it times the submission alone, so there is no speedup"
            )
    return row


def gib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**30:.1f} GiB"


def speedup_text(row: dict[str, Any]) -> str:
    if row.get("speedup") is None:
        return "—"
    bounds = row.get("speedup_ci95")
    interval = f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else ""
    return f"{row['speedup']:.3f}×{interval}"


def tied_text(row: dict[str, Any]) -> str:
    return {True: "yes", False: "no"}.get(row.get("tied"), "—")


def counts_line(rows: list[dict[str, Any]]) -> str:
    counts = Counter(row["status"] for row in rows)
    tied = sum(1 for row in rows if row["status"] == "passed" and row.get("tied"))
    parts = [f"{counts.pop('passed', 0)} passed ({tied} tied)"]
    parts += [f"{n} {status}" for status, n in sorted(counts.items())]
    return ", ".join(parts)


def markdown_table(rows: list[dict[str, Any]], header: list[str]) -> str:
    lines = [
        *header,
        "",
        "| problem | status | tied | speedup [95% CI] | peak GPU memory | wall | candidate | reason |",
    ]
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        reason = row.get("reason") or ""
        if row.get("upstream"):
            reason = (reason + "; " if reason else "") + f"upstream: {row['upstream']}"
        cells = [
            row["problem"],
            row["status"],
            tied_text(row),
            speedup_text(row),
            gib(row.get("peak_gpu_bytes")),
            f"{row['wall_s']:.1f} s",
            row.get("candidate") or "",
            reason.replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# -- the sweep ------------------------------------------------------------------------------------
@dataclass
class Sweep:
    """Problems handed to one lane per GPU as they become ready; rows written as they finish."""

    suite: Any
    out: Path
    mode: str
    cap_s: float
    gpus: list[int] | None  # None: one CPU lane
    cli: bool = False
    stop_after_s: float | None = None  # no problem is started after this many seconds
    candidate_workers: int = CANDIDATE_WORKERS  # fresh workers timing a candidate's timed case
    reference_workers: int = REFERENCE_WORKERS  # fresh workers timing a problem's reference
    total: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.terminated = threading.Event()  # SIGTERM: the problems in flight get no row
        self.lanes: list[Lane | CliLane] = []
        self.memory = MemoryPeaks()
        (self.out / "records").mkdir(parents=True, exist_ok=True)
        (self.out / "lanes").mkdir(parents=True, exist_ok=True)

    def device(self, gpus: list[int] | None) -> Device:
        """The first of these GPUs as NVML names it (a Device without a vendor on a CPU)."""
        found = self.memory.describe(gpus[0]) if gpus else None
        return Device("NVIDIA", *found) if found else NO_GPU

    def lane(self, gpus: list[int] | None, name: str) -> Lane | CliLane:
        kind = CliLane if self.cli else Lane
        lane = kind(
            self.out / "repo",
            self.mode,
            gpus,
            self.out / "lanes" / f"{name}.log",
            self.candidate_workers,
        )
        self.lanes.append(lane)
        return lane

    def stop(self) -> None:
        """--stop-after: start no more problems; those in flight finish and are written."""
        if not self.stopping.is_set():
            self.stopping.set()
            print(
                f"suite_sweep: --stop-after {self.stop_after_s:g} s reached: no problem is "
                "started from here; a sweep over the same --out judges the rest",
                flush=True,
            )
            self.suite.stop()

    def terminate(self) -> None:
        """Killed (SIGTERM): every lane's and importer's processes go with it; the rows
        written so far stay, and the problems in flight get none (their lanes' deaths are the
        sweep's own doing, and a sweep over the same --out judges them again)."""
        self.terminated.set()
        self.stopping.set()
        self.suite.stop()
        for lane in self.lanes:
            if isinstance(lane, Lane):
                lane.stop()

    def run(self, problems: list[Problem]) -> None:
        queue: Queue[Problem | None] = Queue()
        later: list[Problem] = []  # judged last, with every GPU: multi-GPU cases, --spread
        slots = [[gpu] for gpu in self.gpus] if self.gpus else [None]

        def ready(problem: Problem) -> None:
            problem.not_run = problem.not_run or self.too_few_gpus(problem)
            if problem.not_run:
                self.finish(problem, None, None, None)
            elif (problem.world_size > 1 or problem.spread) and self.gpus:  # a CPU lane: any
                later.append(problem)
            else:
                queue.put(problem)

        def work(gpus: list[int] | None, name: str) -> None:
            lane = self.lane(gpus, name)
            try:
                start_early(lane)  # while the suite is imported
                while (problem := queue.get()) is not None:
                    if not self.stopping.is_set():
                        self.judge(lane, problem, gpus)
            finally:
                lane.close()

        workers = [
            threading.Thread(target=work, args=(slot, f"gpu{slot[0]}" if slot else "cpu"))
            for slot in slots
        ]
        for worker in workers:
            worker.start()
        timer = threading.Timer(self.stop_after_s or 0.0, self.stop)
        timer.daemon = True
        if self.stop_after_s is not None:
            timer.start()
        self.suite.prepare(problems, self.out / "repo", ready)
        for _ in workers:
            queue.put(None)
        for worker in workers:
            worker.join()
        if later and not self.stopping.is_set():
            lane = self.lane(self.gpus, "all-gpus")
            try:
                for problem in sorted(later, key=lambda p: p.order):
                    if not self.stopping.is_set():
                        self.judge(lane, problem, self.gpus)
            finally:
                lane.close()
        timer.cancel()

    def too_few_gpus(self, problem: Problem) -> str:
        """Why a problem whose every case needs more GPUs than the sweep has is not run, or "":
        the judge would skip each case for it, after waiting for every GPU's lane."""
        if not self.gpus or problem.fewest_gpus <= len(self.gpus):
            return ""
        have = ",".join(map(str, self.gpus))
        return f"needs {problem.fewest_gpus} GPUs; this sweep has {len(self.gpus)} ({have})"

    def judge(self, lane: Lane | CliLane, problem: Problem, gpus: list[int] | None) -> None:
        self.memory.begin(gpus)
        try:
            answer = lane.judge(
                problem.job(self.reference_workers),
                problem.cap_s(
                    self.mode, self.cap_s, self.candidate_workers, self.reference_workers
                ),
            )
        except Exception as exc:  # the lane could not start: this row says so, the next retries
            answer = Answer(error=f"{type(exc).__name__}: {exc}")
        peak = self.memory.end(gpus)
        if not self.terminated.is_set():
            self.finish(problem, answer, peak, gpus)

    def finish(
        self,
        problem: Problem,
        answer: Answer | None,
        peak: int | None,
        gpus: list[int] | None,
    ) -> None:
        row = row_for(problem, answer, self.mode, peak, gpus, self.device(gpus))
        with self.lock:
            self.rows.append(row)
            with open(self.out / "rows.jsonl", "a") as rows:
                rows.write(json.dumps(row) + "\n")
            if answer is not None and answer.record is not None:
                path = self.out / "records" / f"{problem.key}.json"
                path.write_text(json.dumps(answer.record, indent=1))
            print(self.progress_line(row), flush=True)

    def progress_line(self, row: dict[str, Any]) -> str:
        done = len(self.rows)
        elapsed = time.monotonic() - self.started
        eta = elapsed / done * (self.total - done) if done else 0.0
        where = f"[{done}/{self.total} {clock(elapsed)}, ETA {clock(eta)}]"
        what = row["status"]
        if row["status"] == "passed" and row.get("speedup") is not None:
            what += f", {'tied' if row.get('tied') else 'not tied'}, {speedup_text(row)}"
        if row.get("reason"):
            what += f": {row['reason']}"
        cost = f"{row['wall_s']:.1f} s, {gib(row.get('peak_gpu_bytes'))}"
        lane = f"GPU {','.join(map(str, row['gpus']))}" if row.get("gpus") else "CPU"
        return f"{where} {row['problem']} ({cost}, {lane}): {what}; {counts_line(self.rows)}"


def start_early(lane: Lane | CliLane) -> None:
    """A lane's start-up (torch, CUDA) before its first problem, so no row's wall time holds
    it; one that cannot start is tried again at its first problem, whose row then says why."""
    if isinstance(lane, Lane):
        try:
            lane.start()
        except RuntimeError:
            pass


def clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s"


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    latest: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            latest[row["problem"]] = row
    return list(latest.values())


def chosen_gpus(text: str | None, memory: MemoryPeaks) -> list[int] | None:
    """--gpus: '0,1,...', 'none' (one CPU lane), or every GPU NVML sees (None: no GPU)."""
    if text is None:
        count = memory.count()
        return list(range(count)) if count else None
    if text.strip().lower() == "none":
        return None
    return [int(part) for part in text.split(",") if part.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", choices=("kernelbench", "gpumode"))
    parser.add_argument("path", type=Path, help="KernelBench/ (kernelbench) or problems/ (gpumode)")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3], help="kernelbench")
    parser.add_argument(
        "--competition", action="append", default=[], metavar="YAML", help="gpumode (default all)"
    )
    parser.add_argument("--out", type=Path, help="default suite-sweep-SUITE/")
    parser.add_argument(
        "--gpus", help="0,1,... or none (default every GPU; one CPU lane without any)"
    )
    parser.add_argument("--mode", choices=("benchmark", "test"), default="benchmark")
    parser.add_argument(
        "--cap", type=float, default=DEFAULT_CAP_S, help="per-problem wall-time cap, seconds"
    )
    parser.add_argument("--limit", type=int, help="the first N problems")
    parser.add_argument("--only", nargs="+", default=[], metavar="PATTERN", help="name or source")
    parser.add_argument(
        "--misses", type=int, help="kernelbench: rows that may miss (default 2%% of them)"
    )
    parser.add_argument(
        "--stop-after",
        type=float,
        metavar="S",
        help="start no problem after S seconds (those in flight finish); rerun to go on",
    )
    parser.add_argument("--fresh", action="store_true", help="forget earlier rows in --out")
    parser.add_argument(
        "--candidate-workers",
        type=int,
        default=CANDIDATE_WORKERS,
        metavar="K",
        help="time each candidate's timed case in K fresh workers, as the reference is "
        f"(default {CANDIDATE_WORKERS})",
    )
    parser.add_argument("--cli", action="store_true", help="`kernelboard judge` per problem")
    parser.add_argument(
        "--reference-workers",
        type=reference_workers_arg,
        default=REFERENCE_WORKERS,
        metavar="R",
        help=f"time each problem's reference in R fresh workers (default {REFERENCE_WORKERS}, "
        f"at least {MIN_REFERENCE_WORKERS})",
    )
    parser.add_argument(
        "--spread",
        nargs="+",
        default=[],
        metavar="PATTERN",
        help="judge these problems (name or source) last, each over every GPU: the candidate "
        "on one, the reference's workers dealt across all",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = (args.out or Path(f"suite-sweep-{args.suite}")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows_path = out / "rows.jsonl"
    if args.fresh:
        rows_path.unlink(missing_ok=True)
    earlier = read_rows(rows_path)
    if not args.path.is_dir():
        print(f"suite_sweep: {args.path}: no such folder", file=sys.stderr)
        return 2
    if args.suite == "kernelbench":
        suite: Any = KernelBench(args.path.resolve(), args.levels)
        planned = suite.plan()
    else:
        suite = GpuMode(args.path.resolve(), args.competition)
        suite.root = out / "repo"
        planned = suite.plan_from(suite.import_into(out / "repo"))
    planned = selected(planned, args.only, args.limit)
    for problem in planned:
        problem.spread = matches(problem, args.spread)
    done = {row["problem"] for row in earlier}
    todo = [p for p in planned if p.key not in done]
    sweep = Sweep(
        suite,
        out,
        args.mode,
        args.cap,
        None,
        cli=args.cli,
        stop_after_s=args.stop_after,
        candidate_workers=args.candidate_workers,
        reference_workers=args.reference_workers,
    )
    try:
        sweep.gpus = chosen_gpus(args.gpus, sweep.memory)
    except ValueError:
        print(f"suite_sweep: --gpus: expected 0,1,... or none, got {args.gpus!r}", file=sys.stderr)
        return 2
    sweep.total = len(todo)
    lanes = f"GPUs {','.join(map(str, sweep.gpus))}" if sweep.gpus else "one CPU lane"
    print(
        f"suite_sweep: {args.suite}, {len(planned)} problems ({len(planned) - len(todo)} done "
        f"in {rows_path} already), {args.mode} mode, {lanes}, cap {args.cap:g} s, out {out}",
        flush=True,
    )

    def killed(signum: int, _frame: Any) -> None:
        sweep.terminate()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, killed)
    if todo:
        sweep.run(todo)
    keys = {p.key for p in planned}
    rows = sorted(
        (r for r in read_rows(rows_path) if r["problem"] in keys),
        key=lambda r: next(p.order for p in planned if p.key == r["problem"]),
    )
    misses = args.misses if args.misses is not None else int(MISSES_SHARE * len(planned))
    verdict, met = target_verdict(args.suite, rows, len(planned), misses, args.mode)
    header = [
        f"# {args.suite} sweep: {counts_line(rows)}",
        "",
        f"`python benchmarks/suite_sweep.py {' '.join(argv or sys.argv[1:])}`: {args.mode} mode "
        f"on {lanes}; {clock(time.monotonic() - sweep.started)} this run.",
        "",
        verdict,
    ]
    (out / "table.md").write_text(markdown_table(rows, header))
    print(verdict)
    print(f"suite_sweep: {out / 'table.md'}")
    return 0 if met else 1


def target_verdict(
    suite: str, rows: list[dict[str, Any]], planned: int, misses: int, mode: str = "benchmark"
) -> tuple[str, bool]:
    """Whether the sweep met its target, in a line (test mode times nothing: no ties)."""
    if len(rows) < planned:
        return (
            f"Target: not judged: {planned - len(rows)} of {planned} problems have no row.",
            False,
        )
    if suite == "kernelbench":
        timed = mode == "benchmark"
        good = sum(1 for r in rows if r["status"] == "passed" and (r.get("tied") or not timed))
        need = planned - misses
        met = good >= need
        what = "pass and tie" if timed else "pass (test mode: no timing, no ties)"
        return (
            f"Target (all but {misses} {what}): {good} of {planned}, {need} needed: "
            f"{'met' if met else 'NOT met'}.",
            met,
        )
    # A shipped submission that misses its own reference for a cause listed in UPSTREAM (one
    # a GPU MODE user would recognise as the submission's) is named, not counted as a miss; an
    # error, a timeout or an unlisted failure is a miss whoever's it may be.
    upstream = [r["problem"] for r in rows if r["status"] == "failed" and r.get("upstream")]
    bad = [
        r
        for r in rows
        if r["status"] != "passed"
        and r["problem"] not in upstream
        and not (r["status"] == "not_run" and HARDWARE_REASON.search(r.get("reason") or ""))
    ]
    met = not bad
    named = f"; {len(upstream)} fail upstream, each with its cause: {', '.join(upstream)}"
    return (
        "Target (each passes, is not run for the device, its architecture or GPU count, or "
        "fails for a cause listed upstream): "
        f"{'met' if met else 'NOT met: ' + ', '.join(r['problem'] for r in bad)}"
        f"{named if upstream else ''}.",
        met,
    )


if __name__ == "__main__":
    sys.exit(main())
