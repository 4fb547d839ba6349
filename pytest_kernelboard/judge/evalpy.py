"""Problems whose contract lives in their own eval.py, run by GPU MODE's runner protocol.

A folder whose reference.py lacks the standard functions (`generate_input`, `ref_kernel`,
`check_implementation`) but whose task.yml names a main script (`config: {main: eval.py}`)
is judged by that script, as GPU MODE's runner does it: the task's files laid out flat in a
scratch folder, the cases written one per line as `k: v; k: v`, a pipe whose write end's
number is passed as POPCORN_FD, `python eval.py <mode> <casefile>`, and `key: value` lines read
back (`test.N.status`, `benchmark.N.mean` in nanoseconds, `check`, ...). The script is
participant-adjacent code: it runs like a worker (inside the worker sandbox, allow-listed
environment, its own process group, killed at the deadline), never inside the judge.
"""

from __future__ import annotations

import ast
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..spec.cases import BENCHMARK, TEST, Case, task_cases, with_run_seed
from ..spec.task import TaskSpec
from ..supervisor import gpu_view, sandbox, scratch
from ..supervisor.environment import cache_dirs, default_cache_dir, worker_environment
from .core import CaseOutcome
from .reference_loader import REQUIRED_FUNCTIONS
from .staging import stage

# GPU MODE's eval.py exit codes: 0 every case passed, 112 a case failed its check,
# 111 the runner gave no POPCORN_FD.
EXIT_PASSED, EXIT_FAILED, EXIT_NO_FD = 0, 112, 111
LOG_TAIL_CHARS = 2000
NS_PER_US = 1000.0


def main_script(task: TaskSpec) -> str | None:
    """The staged name of the task's own harness script (`config.main`), if task.yml lists it."""
    main = task.config.get("main") if isinstance(task.config, dict) else None
    names = {f.name for f in task.files}
    return main if isinstance(main, str) and main in names else None


def _defined_names(source: Path) -> set[str]:
    try:
        tree = ast.parse(source.read_text(errors="replace"))
    except (OSError, SyntaxError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def is_evalpy_task(task: TaskSpec) -> bool:
    """True when the folder does not fit the standard contract but ships its own eval.py.

    Read from the source (never imported), so a folder is classified before anything runs.
    """
    if task.lang != "py" or main_script(task) is None:
        return False
    reference = next((p for n, p in task.support_files() if n == "reference.py"), None)
    if reference is None:
        return True
    return not set(REQUIRED_FUNCTIONS) <= _defined_names(reference)


def case_line(spec: dict[str, Any]) -> str:
    """One case in GPU MODE's line format: `k: v; k: v` (their parser reads ints, else text)."""
    for key, value in spec.items():
        text = str(value)
        if any(ch in text for ch in ";\n") or ":" in key:
            raise ValueError(f"case value {key}={value!r} cannot be written as 'k: v; k: v'")
    return "; ".join(f"{key}: {value}" for key, value in spec.items())


def parse_report(text: str) -> dict[str, str]:
    """`key: value` lines -> dict (a later line for the same key wins)."""
    report: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            report[key.strip()] = value.strip()
    return report


@dataclass
class EvalRun:
    """What one eval.py run reported."""

    mode: str
    report: dict[str, str]
    returncode: int | None  # None: killed at the deadline
    log_tail: str
    elapsed_s: float
    timed_out: bool = False

    def process_failure(self) -> CaseOutcome | None:
        """The status a case without its own report gets from how the process ended."""
        if self.timed_out:
            return CaseOutcome("timeout", f"eval.py timed out after {self.elapsed_s:.0f} s")
        code = self.returncode
        if code in (EXIT_PASSED, EXIT_FAILED):
            return None
        if code == EXIT_NO_FD:
            what = "eval.py found no POPCORN_FD (exit 111)"
        elif code is not None and code < 0:
            what = f"eval.py was killed by {_signal_name(code)}"
        else:
            what = f"eval.py exited with code {code}"
        return CaseOutcome("crashed", what + self._log_note())

    def _log_note(self) -> str:
        return f"\n--- eval.py output (last lines) ---\n{self.log_tail}" if self.log_tail else ""

    def outcome(self, kind: str, index: int, use_cuda: bool) -> CaseOutcome:
        prefix = f"{kind}.{index}"
        status = self.report.get(f"{prefix}.status")
        message = self.report.get(f"{prefix}.error") or self.report.get(f"{prefix}.message", "")
        if status == "fail":
            return CaseOutcome("failed", message or f"eval.py reports {prefix} failed")
        if kind == BENCHMARK and f"{prefix}.mean" in self.report:
            try:
                timing = timing_record(self.report, prefix, use_cuda)
            except ValueError as exc:
                return CaseOutcome("error", f"eval.py reported an unreadable timing: {exc}")
            return CaseOutcome("passed", timing=timing)
        if kind == TEST and status == "pass":
            return CaseOutcome("passed")
        failure = self.process_failure()
        if failure is not None:
            return failure
        if self.report.get("check") == "fail" or self.returncode == EXIT_FAILED:
            return CaseOutcome("failed", message or f"eval.py reports check: fail ({prefix})")
        return CaseOutcome("error", f"eval.py reported nothing for {prefix}" + self._log_note())


def timing_record(report: dict[str, str], prefix: str, use_cuda: bool) -> dict[str, Any]:
    """eval.py's statistics (nanoseconds) as the results document's timing record (us)."""

    def us(key: str, default: float | None = None) -> float:
        raw = report.get(f"{prefix}.{key}")
        if raw is None:
            if default is None:
                raise ValueError(f"{prefix}.{key} missing")
            return default
        value = float(raw) / NS_PER_US
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{prefix}.{key}={raw!r}")
        return value

    mean = us("mean")
    std = us("std", 0.0)
    err = us("err", 0.0)
    runs = int(float(report.get(f"{prefix}.runs", "1")))
    return {
        "clock": "cuda_event" if use_cuda else "host",
        "n": max(runs, 1),
        "mean_us": mean,
        "median_us": mean,  # eval.py reports no median
        "std_us": std,
        "min_us": us("best", mean),
        "max_us": us("worst", mean),
        "ci95_us": [max(mean - 1.96 * err, 0.0), mean + 1.96 * err],
        "flags": ["timed by the problem's own eval.py (GPU MODE runner protocol); no median"],
    }


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class EvalPyRunner:
    """Runs one submission through the task's eval.py, one process per mode, inside the worker
    sandbox where the session has one (eval.py imports the submission)."""

    def __init__(
        self,
        task: TaskSpec,
        submission: Path | None,
        cache_dir: Path | None = None,
        sandboxed: bool | None = None,
    ):
        """sandboxed: None follows the session's policy (sandbox.enabled), as workers do."""
        self.task = task
        self.submission = submission
        self.cache_dir = cache_dir or default_cache_dir()
        self.sandboxed = sandbox.enabled() if sandboxed is None else sandboxed
        self.script = main_script(task) or "eval.py"

    def run(self, mode: str, specs: list[dict[str, Any]], timeout_s: float) -> EvalRun:
        folder = stage(self.task, self.submission, prefix="kb-evalpy-")
        home = scratch.make_folder("kb-evalpy-home-")
        try:
            case_file = folder / f"{mode}.txt"
            case_file.write_text("".join(case_line(s) + "\n" for s in specs))
            return self._run(folder, home, mode, case_file, timeout_s)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(home, ignore_errors=True)

    def _run(
        self, folder: Path, home: Path, mode: str, case_file: Path, timeout_s: float
    ) -> EvalRun:
        read_fd, write_fd = os.pipe()
        env = worker_environment(os.environ, home, self.cache_dir)
        env["POPCORN_FD"] = str(write_fd)
        log_path = home / "output.log"
        started = time.perf_counter()
        command = [sys.executable, self.script, mode, case_file.name]
        if self.sandboxed:  # the staged folder read-only, its scratch a tmpfs, the caches shared
            command = [
                *sandbox.bwrap_command(
                    home, folder, cache_dirs(env), workdir=folder, gpus=gpu_view.narrow(env)
                ),
                *command,
            ]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=folder,
                pass_fds=(write_fd,),  # the only descriptor it inherits
                start_new_session=True,  # its own process group: a kill takes its children too
            )
        os.close(write_fd)
        chunks: list[bytes] = []
        timed_out = False
        deadline = started + timeout_s
        try:
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    timed_out = True
                    break
                ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.5))
                if ready:
                    chunk = os.read(read_fd, 65536)
                    if not chunk:  # every writer closed: the script (and its children) is done
                        break
                    chunks.append(chunk)
            if not timed_out:
                try:
                    process.wait(timeout=max(deadline - time.perf_counter(), 0.1))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            os.close(read_fd)
            _kill_group(process)
        elapsed = time.perf_counter() - started
        tail = log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:].strip()
        return EvalRun(
            mode=mode,
            report=parse_report(b"".join(chunks).decode(errors="replace")),
            returncode=None if timed_out else process.returncode,
            log_tail=tail,
            elapsed_s=elapsed,
            timed_out=timed_out,
        )


def _kill_group(process: subprocess.Popen) -> None:
    """Stop the script and everything it started (a leftover child may still hold the GPU)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:
        process.kill()
    process.wait()


@dataclass
class EvalPyJudge:
    """SubmissionJudge's interface for an eval.py-driven task: eval.py runs every case of a
    mode in one process (as GPU MODE runs it); each case's item reads its line of the report."""

    task: TaskSpec
    submission: Path | None
    use_cuda: bool
    mode: str = "test"  # the pytest run's --kb-mode
    seeds: dict[str, int] | None = None  # per-run seeds, as KernelboardState.seeds_for gives
    _runs: dict[str, EvalRun] = field(default_factory=dict)

    def _run(self, eval_mode: str, cases: list[Case], timeout_s: float) -> EvalRun:
        if eval_mode not in self._runs:
            runner = EvalPyRunner(self.task, self.submission)
            specs = [case.arguments(0) for case in cases]
            self._runs[eval_mode] = runner.run(eval_mode, specs, timeout_s)
        return self._runs[eval_mode]

    def _cases(self, kind: str) -> list[Case]:
        """Every case of the kind, with this run's seeds (leaderboard mode) applied."""
        return [with_run_seed(c, self.seeds) for c in task_cases(self.task) if c.kind == kind]

    def check_case(self, case: Case, timeout_s: float) -> CaseOutcome:
        run = self._run(TEST, self._cases(TEST), timeout_s)
        return self._stamped(run.outcome(TEST, case.index, self.use_cuda), run)

    def benchmark_case(self, case: Case, timeout_s: float, *_: Any, **__: Any) -> CaseOutcome:
        eval_mode = "leaderboard" if self.mode == "leaderboard" else "benchmark"
        run = self._run(eval_mode, self._cases(BENCHMARK), timeout_s)
        return self._stamped(run.outcome(BENCHMARK, case.index, self.use_cuda), run)

    def profile_case(self, *_: Any, **__: Any) -> CaseOutcome:
        return CaseOutcome("skipped", "profile mode does not drive a problem's own eval.py")

    @staticmethod
    def _stamped(outcome: CaseOutcome, run: EvalRun) -> CaseOutcome:
        outcome.duration_s = run.elapsed_s
        outcome.details["eval_py"] = {"mode": run.mode, "returncode": run.returncode}
        return outcome

    def close(self, grace_s: float = 5.0) -> None:
        self._runs.clear()
