"""Device memory at each benchmark case's peak, against the bound of issue 22.

    python benchmarks/memory_peak.py [--fixtures kernelbench|memory|all] [--json OUT]
    python benchmarks/memory_peak.py --repo DIR --submission PATH [--submission PATH ...]
                                     [--same-code] [--json OUT]

With no --repo, a throw-away repository of the test fixtures is judged: `kernelbench` (the
default) the seven KernelBench-shaped problems at KernelBench's sizes
(tests/fixtures/kernelbench_big) with their identical-code submissions, `memory` the four
leaderboards of 20-30 GB (tests/fixtures/memory) with their correct solutions.

For each benchmark case of each submission's leaderboard:
peak     the judge on that one case (`pytest <case> --kb-mode benchmark`, in a subprocess as a
         user runs it, the reference re-timed in the same run) while NVML is sampled every
         --interval seconds: the sum of usedGpuMemory over every process on the GPU that was
         not there before the run (the judge, its workers, the spare), the largest single
         process, and the device's used memory over its level before the run. A spike shorter
         than the interval can be missed.
I + O    the case's inputs and the reference's outputs (each storage counted once: an output
         that is one of the inputs' own tensors adds nothing), generated on the GPU.
W        working memory of one call: torch.cuda.max_memory_allocated during the call minus what
         was allocated before it and the new outputs; measured after one warm-up call (lazy
         state: built models, library workspaces), for the reference and, in a process of its
         own, for the submission (untrusted code never runs in this process). With --same-code
         (the kernelbench fixtures: ModelNew = Model) the submission is the reference's own
         code, so its working memory is the reference's and is not measured again.
bound    2 x (I + O) + max(W ref, W sub) + 2 GiB (issue 22); `within` when peak <= bound.
A case whose judge or measurement fails is reported with the reason, never a crash. The exit
status is 1 when any case failed or exceeded its bound. This process never touches CUDA, so it
adds nothing to what is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from pytest_kernelboard.judge.memory import TRACE_VARIABLE  # noqa: E402
from pytest_kernelboard.spec.cases import BENCHMARK, Case, task_cases  # noqa: E402
from pytest_kernelboard.spec.discovery import identify_submission, load_catalog  # noqa: E402
from pytest_kernelboard.spec.task import TaskSpec  # noqa: E402

GIB = 1 << 30
TIMELINE_STEP = 256 << 20  # a timeline sample is kept when the total moved this much
ALLOWANCE = 2 * GIB  # the bound's "+ 2 GiB": CUDA contexts, allocator slack, the spare worker
KB_FIXTURES = REPO / "tests" / "fixtures" / "kernelbench_big"
MEMORY_FIXTURES = REPO / "tests" / "fixtures" / "memory" / "leaderboards"
RESULT_MARK = "MEMORY_PEAK_RESULT "  # the line a measuring child prints its numbers on


# -- the fixtures' repository -------------------------------------------------------------------
@dataclass
class Target:
    submission: Path
    same_code: bool  # the submission is the reference's own code


def fixture_repo(dest: Path, which: str) -> list[Target]:
    """A repository of the fixtures under dest and the submissions to judge in it."""
    targets = []
    if which in ("kernelbench", "all"):
        # The importer runs each reference on small shapes: in a child, so no CUDA here.
        subprocess.run(
            [sys.executable, "-m", "pytest_kernelboard.cli", "import", "kernelbench"]
            + [str(KB_FIXTURES), "--level", "1", "--dest", str(dest / "leaderboards/kernelbench")],
            check=True,
            env=child_env(None),
            stdout=subprocess.DEVNULL,
        )
        shutil.copytree(KB_FIXTURES / "submissions", dest / "submissions", dirs_exist_ok=True)
        targets += [
            Target(path, same_code=True)
            for path in sorted((dest / "submissions").glob("kernelbench_*/*/submission.py"))
        ]
    if which in ("memory", "all"):
        shutil.copytree(MEMORY_FIXTURES, dest / "leaderboards" / "memory")
        for task in sorted(MEMORY_FIXTURES.glob("*/task.yml")):
            solution = sorted((task.parent / "solutions" / "correct").glob("*.py"))[0]
            path = dest / "submissions" / task.parent.name / "correct" / "submission.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(solution, path)
            targets.append(Target(path, same_code=False))
    (dest / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    return targets


def child_env(gpu: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if gpu is not None:
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's numbering = NVML's
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


# -- NVML sampling ------------------------------------------------------------------------------
@dataclass
class Peak:
    all_processes: int | None = None  # bytes, summed over the processes new since the start
    largest_process: int | None = None
    processes: int = 0  # how many new processes held memory at the peak
    device_delta: int = 0  # the device's used memory over its level at the start
    samples: int = 0
    per_process_available: bool = True
    left_behind: list[int] = field(default_factory=list)  # pids still on the GPU after the run
    at_peak: list[tuple[str, int]] = field(default_factory=list)  # (role, bytes) at the peak
    # (seconds since the start, [(role, bytes)]) at each sample whose total moved by 256 MiB or
    # more: which process held what as the case went through its phases
    timeline: list[tuple[float, list[tuple[str, int]]]] = field(default_factory=list)


class NvmlSampler:
    """Samples the GPU's processes every `interval` seconds in a thread, keeping the peaks."""

    def __init__(self, index: int, interval: float):
        self.interval = interval
        self.peak = Peak()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.handle = None
        try:
            import pynvml

            self.nvml = pynvml
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:  # no NVML: the cases are still judged and measured
            self.unavailable = f"{type(exc).__name__}: {exc}"

    def name_and_total(self) -> tuple[str, int | None]:
        if self.handle is None:
            return f"no NVML ({self.unavailable}): no peaks", None
        name = self.nvml.nvmlDeviceGetName(self.handle)
        name = name.decode() if isinstance(name, bytes) else name
        return name, self.nvml.nvmlDeviceGetMemoryInfo(self.handle).total

    def _processes(self) -> list[Any]:
        return list(self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle))

    def _used(self) -> int:
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used

    @contextlib.contextmanager
    def sampling(self) -> Iterator[Peak]:
        self.peak = Peak()
        if self.handle is None:
            yield self.peak
            return
        self._before = {p.pid for p in self._processes()}
        self._base_used = self._used()
        self._started = time.monotonic()
        self._roles: dict[int, str] = {}
        self._last_total = -1
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        try:
            yield self.peak
        finally:
            self._stop.set()
            self._thread.join()
            self._sample()  # one last look, for a run shorter than the interval
            self.peak.left_behind = self._lingering()

    def _lingering(self, grace_s: float = 10.0) -> list[int]:
        """Processes of the run still holding GPU memory after a grace period: they would
        crowd the next case, so the report names them."""
        deadline = time.monotonic() + grace_s
        while True:
            with contextlib.suppress(self.nvml.NVMLError):
                left = [p.pid for p in self._processes() if p.pid not in self._before]
                if not left or time.monotonic() > deadline:
                    return left
            time.sleep(0.5)

    def _role(self, pid: int) -> str:
        """`judge` (pytest), `worker` (the sandboxed child) or the program's name, with its
        pid: told from its command line, read once."""
        if pid not in self._roles:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                argv = ""
            if "pytest_kernelboard.worker" in argv:
                role = "worker"
            elif "pytest" in argv:
                role = "judge"
            else:
                role = Path(argv.split("\0")[0]).name or "?"
            self._roles[pid] = f"{role}:{pid}"
        return self._roles[pid]

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def _sample(self) -> None:
        peak = self.peak
        try:
            new = [p for p in self._processes() if p.pid not in self._before]
            used = self._used()
        except self.nvml.NVMLError:
            return
        peak.samples += 1
        peak.device_delta = max(peak.device_delta, used - self._base_used)
        sizes = [p.usedGpuMemory for p in new]
        if any(size is None for size in sizes):  # per-process numbers hidden (containers)
            peak.per_process_available = False
            return
        total = sum(sizes)
        held = [(self._role(p.pid), p.usedGpuMemory) for p in new]
        if abs(total - self._last_total) >= TIMELINE_STEP:
            self._last_total = total
            peak.timeline.append((round(time.monotonic() - self._started, 2), held))
        if peak.all_processes is None or total > peak.all_processes:
            peak.all_processes, peak.processes, peak.at_peak = total, len(sizes), held
        if sizes and (peak.largest_process is None or max(sizes) > peak.largest_process):
            peak.largest_process = max(sizes)


# -- one case judged --------------------------------------------------------------------------
@dataclass
class CaseReport:
    leaderboard: str
    submission: str
    case: str
    status: str = "not run"
    message: str = ""
    speedup: float | None = None
    tied: bool | None = None
    judge_wall_s: float | None = None
    peak: Peak = field(default_factory=Peak)
    inputs: int | None = None
    outputs: int | None = None
    working_reference: int | None = None
    working_submission: int | None = None
    working_submission_note: str = ""
    measure_errors: list[str] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)  # judge/memory.py's trace lines

    @property
    def inputs_outputs(self) -> int | None:
        return None if self.inputs is None else self.inputs + self.outputs

    @property
    def bound(self) -> int | None:
        workings = (self.working_reference, self.working_submission)
        if self.inputs_outputs is None or None in workings:
            return None  # a measurement failed: no bound rather than a low one
        return 2 * self.inputs_outputs + max(workings) + ALLOWANCE

    @property
    def peak_bytes(self) -> int | None:
        """Per-process sum where NVML gives it, else the device's used memory over the start."""
        if self.peak.per_process_available and self.peak.all_processes is not None:
            return self.peak.all_processes
        return self.peak.device_delta if self.peak.samples else None

    @property
    def within(self) -> bool | None:
        if self.bound is None or self.peak_bytes is None:
            return None
        return self.peak_bytes <= self.bound

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(
            inputs_outputs=self.inputs_outputs,
            bound=self.bound,
            peak_bytes=self.peak_bytes,
            within=self.within,
        )
        return out


def benchmark_nodes(repo: Path, submissions: list[Path], env: dict[str, str]) -> list[str]:
    """The benchmark items' node ids, as pytest collects them (one collection for all)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--kb-mode", "benchmark"]
        + [str(s.relative_to(repo)) for s in submissions],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    nodes = [line.strip() for line in done.stdout.splitlines() if "::benchmark[" in line]
    if not nodes:
        raise RuntimeError(f"collecting the benchmark cases found none:\n{done.stdout[-3000:]}")
    return nodes


def run_killable(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int | None, str]:
    """(exit status or None on timeout, stdout + stderr). On timeout the group gets SIGINT
    first, so pytest ends its session and stops its workers, then SIGKILL."""
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        output = ""
        for sig, wait_s in ((signal.SIGINT, 30.0), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            try:
                output, _ = process.communicate(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        return None, output


def judge_case(
    report: CaseReport,
    node: str,
    repo: Path,
    work: Path,
    env: dict[str, str],
    sampler: NvmlSampler,
    timeout: float,
    extra: list[str],
) -> None:
    results = work / "case-results.json"  # outside the repository: it may be the user's
    results.unlink(missing_ok=True)
    trace = work / "memory-trace.jsonl"  # the judge's own account, phase by phase
    trace.unlink(missing_ok=True)
    env = {**env, TRACE_VARIABLE: str(trace)}
    argv = [sys.executable, "-m", "pytest", node, "-q", "-rfEs", "--kb-mode", "benchmark"]
    argv += ["--kb-results", str(results), "--kb-remeasure-reference", *extra]
    started = time.monotonic()
    with sampler.sampling() as peak:
        rc, output = run_killable(argv, repo, env, timeout)
    report.judge_wall_s = time.monotonic() - started
    report.peak = peak
    if trace.exists():
        report.trace = [json.loads(line) for line in trace.read_text().splitlines() if line]
    if rc is None:
        report.status, report.message = "timeout", f"the judge ran past {timeout:.0f} s"
        return
    try:
        evaluations = json.loads(results.read_text())["evaluations"]
        (evaluation,) = [e for e in evaluations if not e["submission"].get("is_reference")]
        (case,) = [c for c in evaluation["cases"] if c["kind"] == BENCHMARK]
    except (OSError, ValueError, KeyError) as exc:
        report.status = "error"
        report.message = (
            f"no results ({type(exc).__name__}: {exc}); pytest said:\n" + (output[-2000:])
        )
        return
    report.status = case["status"]
    report.message = case.get("message") or ""
    report.speedup = case.get("speedup")
    report.tied = evaluation["summary"].get("tied_with_reference")
    if report.speedup is None:
        report.speedup = evaluation["summary"].get("speedup")


# -- in-process measurements, in a child ------------------------------------------------------
def stage(task: TaskSpec, submission: Path, dest: Path) -> Path:
    """The leaderboard's files side by side, as the judge lays them out for one evaluation."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in task.files:
        source = submission if entry.is_submission else task.root / entry.source
        shutil.copyfile(source, dest / entry.name)
    return dest


def measure(
    who: str, stage_dir: Path, case: Case, env: dict[str, str], timeout: float
) -> dict[str, Any]:
    """{'inputs', 'outputs', 'working'} in bytes for one call of `who`, or {'error'}."""
    # task.yml's own arguments: a timed call's fresh input has the same shapes.
    request = json.dumps({"who": who, "stage": str(stage_dir), "args": dict(case.spec)})
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", request]
    rc, output = run_killable(argv, stage_dir, env, timeout)
    lines = [line for line in output.splitlines() if line.startswith(RESULT_MARK)]
    if lines:
        return json.loads(lines[-1][len(RESULT_MARK) :])
    reason = "timed out" if rc is None else f"exit status {rc}"
    return {"error": f"{who}: {reason}: {output[-1500:]}"}


def _storages(value: Any, into: dict[int, int]) -> dict[int, int]:
    """CUDA storages reachable from value (tensors in lists, tuples, dicts), by address."""
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_cuda:
            storage = value.untyped_storage()
            into[storage.data_ptr()] = storage.nbytes()
    elif isinstance(value, list | tuple):
        for item in value:
            _storages(item, into)
    elif isinstance(value, dict):
        for item in value.values():
            _storages(item, into)
    return into


def child_measure(request: dict[str, Any]) -> dict[str, Any]:
    """In the child: generate the case's input, call once to warm up, then measure one call."""
    import torch

    stage_dir = request["stage"]
    sys.path.insert(0, stage_dir)
    os.chdir(stage_dir)
    reference = importlib.import_module("reference")
    if request["who"] == "reference":
        kernel = reference.ref_kernel
    else:
        submission = importlib.import_module("submission")
        kernel = getattr(submission, "custom_kernel", None)
        if kernel is None and hasattr(submission, "ModelNew"):  # KernelBench's contract
            from pytest_kernelboard.importers.kernelbench_utils import model_kernel

            kernel = model_kernel(submission.ModelNew)
        if kernel is None:
            return {"error": "the submission defines neither custom_kernel nor ModelNew"}
    data = reference.generate_input(**request["args"])
    torch.cuda.synchronize()
    inputs = _storages(data, {})
    warm_up = kernel(data)  # lazy state (a built model, a library's workspace) is not one
    torch.cuda.synchronize()  # call's working memory
    del warm_up
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    output = kernel(data)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    new_outputs = {ptr: size for ptr, size in _storages(output, {}).items() if ptr not in inputs}
    outputs = sum(new_outputs.values())
    return {
        "inputs": sum(inputs.values()),
        "outputs": outputs,
        "working": max(0, peak - before - outputs),
    }


def run_child(raw: str) -> int:
    try:
        result = child_measure(json.loads(raw))
    except Exception as exc:  # reported to the parent, which reports the case
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


def measure_case(
    report: CaseReport,
    task: TaskSpec,
    target: Target,
    case: Case,
    work: Path,
    env: dict[str, str],
    timeout: float,
) -> None:
    folder = work / f"{report.leaderboard}-{case.index}"
    ref_stage = stage(task, target.submission, folder / "reference")
    reference = measure("reference", ref_stage, case, env, timeout)
    if "error" in reference:
        report.measure_errors.append(reference["error"])
    else:
        report.inputs, report.outputs = reference["inputs"], reference["outputs"]
        report.working_reference = reference["working"]
    if target.same_code:
        report.working_submission = report.working_reference
        report.working_submission_note = "the reference's own code: its working memory"
        return
    sub_stage = stage(task, target.submission, folder / "submission")
    submission = measure("submission", sub_stage, case, env, timeout)
    if "error" in submission:
        report.measure_errors.append(submission["error"])
    else:
        report.working_submission = submission["working"]


# -- output ---------------------------------------------------------------------------------------
def gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GIB:.2f}"


def signed_gib(value: int | None) -> str:
    return "-" if value is None else f"{value / GIB:+.2f} GiB"


def device_delta(report: CaseReport) -> int | None:
    return report.peak.device_delta if report.peak.samples else None


def verdict(report: CaseReport) -> str:
    return {True: "within", False: "OVER", None: "?"}[report.within]


def describe(report: CaseReport) -> str:
    peak = report.peak
    timing = ""
    if report.speedup is not None:
        timing = f", speedup {report.speedup:.3f}" + (", tied" if report.tied else ", not tied")
    sub = gib(report.working_submission) + (" (= ref)" if report.working_submission_note else "")
    lines = [
        f"{report.leaderboard} {report.case}: {report.status}{timing}"
        + (f" ({report.judge_wall_s:.0f} s)" if report.judge_wall_s else ""),
        f"  peak {gib(report.peak_bytes)} GiB over {peak.processes} process(es), largest "
        f"{gib(peak.largest_process)} GiB, device {signed_gib(device_delta(report))} "
        f"({peak.samples} samples"
        + ("" if peak.per_process_available else "; per-process numbers hidden: device delta")
        + ")",
        f"  I+O {gib(report.inputs_outputs)} GiB (in {gib(report.inputs)}, out "
        f"{gib(report.outputs)}), working ref {gib(report.working_reference)} / sub {sub} GiB",
        f"  bound 2 x I+O + W + 2 = {gib(report.bound)} GiB: {verdict(report)}",
    ]
    if peak.at_peak:
        lines.append("  at the peak: " + ", ".join(f"{r} {gib(b)}" for r, b in peak.at_peak))
    for seconds, held in peak.timeline:
        lines.append(f"    {seconds:7.2f} s  " + ", ".join(f"{r} {gib(b)}" for r, b in held))
    if report.trace:
        lines.append(
            "  the judge's trace (GiB: allocated/reserved, segments size:allocated, windows,"
            " worker's peak):"
        )
        shown = report.trace if len(report.trace) <= 24 else report.trace[:18] + report.trace[-6:]
        lines += ["    " + trace_line(entry) for entry in shown]
    if peak.left_behind:
        lines.append(f"  warning: processes {peak.left_behind} still hold GPU memory after the run")
    if report.status not in ("passed", "not run") and report.message:
        lines.append("  judge: " + report.message.strip().replace("\n", "\n    ")[:1500])
    lines += ["  measurement: " + error[:1500] for error in report.measure_errors]
    return "\n".join(lines)


def trace_line(entry: dict[str, Any]) -> str:
    segments = " ".join(f"{gib(size)}:{gib(used)}" for size, used in entry["segments"])
    return (
        f"{entry['pid']} {entry['phase']:<16} {gib(entry['allocated'])}/{gib(entry['reserved'])}"
        f"  [{segments}]  win {gib(entry['windows'])}  worker {gib(entry['worker_peak'])}"
    )


def table(reports: list[CaseReport]) -> str:
    header = (
        "leaderboard", "case", "status", "peak", "largest", "dev+", "I+O", "W ref", "W sub",
        "bound", "",
    )  # fmt: skip
    rows = [header] + [
        (
            r.leaderboard,
            r.case if len(r.case) <= 32 else r.case[:29] + "...",
            r.status,
            gib(r.peak_bytes),
            gib(r.peak.largest_process),
            gib(device_delta(r)),
            gib(r.inputs_outputs),
            gib(r.working_reference),
            gib(r.working_submission),
            gib(r.bound),
            verdict(r),
        )
        for r in reports
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    text = [
        "  ".join(
            cell.ljust(width) if i < 3 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    return "\n".join(["(GiB)"] + text)


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--fixtures", choices=("kernelbench", "memory", "all"), default="kernelbench"
    )
    parser.add_argument("--repo", type=Path, help="judge submissions of this repository instead")
    parser.add_argument("--submission", type=Path, action="append", default=[])
    parser.add_argument(
        "--same-code",
        action="store_true",
        help="the submissions are the reference's own code: do not measure their working memory",
    )
    parser.add_argument("--gpu", default="0", help="the GPU's index (NVML's = CUDA's PCI order)")
    parser.add_argument("--interval", type=float, default=0.1, help="NVML sampling, seconds")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per judged case")
    parser.add_argument("--cases", help="only cases whose leaderboard or id matches this regex")
    parser.add_argument(
        "--precision", type=float, help="the judge's --kb-precision (default: the judge's own)"
    )
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        return run_child(args.child)

    env = child_env(args.gpu)
    sampler = NvmlSampler(int(args.gpu), args.interval)
    gpu_name, gpu_total = sampler.name_and_total()
    size = "" if gpu_total is None else f", {gpu_total / GIB:.1f} GiB"
    print(f"GPU {args.gpu}: {gpu_name}{size}; NVML every {args.interval} s")
    with tempfile.TemporaryDirectory(prefix="memory-peak-") as tmp:
        work = Path(tmp)
        if args.repo is None:
            repo = work / "repo"
            targets = fixture_repo(repo, args.fixtures)
        else:
            repo = args.repo.resolve()
            if not args.submission:
                parser.error("--repo needs at least one --submission")
            targets = [Target(s.resolve(), args.same_code) for s in args.submission]
        reports = judge_all(repo, targets, work, env, sampler, args)
    print("\n" + table(reports))
    if args.json:
        document = {
            "gpu": {"index": args.gpu, "name": gpu_name, "total_bytes": gpu_total},
            "interval_s": args.interval,
            "allowance_bytes": ALLOWANCE,
            "cases": [r.as_json() for r in reports],
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}")
    bad = [r for r in reports if r.status != "passed" or r.within is not True]
    return 1 if bad else 0


def judge_all(
    repo: Path,
    targets: list[Target],
    work: Path,
    env: dict[str, str],
    sampler: NvmlSampler,
    args: argparse.Namespace,
) -> list[CaseReport]:
    catalog = load_catalog(repo)
    nodes = benchmark_nodes(repo, [t.submission for t in targets], env)
    extra = [] if args.precision is None else ["--kb-precision", str(args.precision)]
    reports = []
    for target in targets:
        ref = identify_submission(target.submission)
        task = catalog.get(ref.leaderboard)
        for case in task_cases(task):
            if case.kind != BENCHMARK:
                continue
            if args.cases and not re.search(args.cases, f"{task.name} {case.id}"):
                continue
            report = CaseReport(task.name, str(target.submission.relative_to(repo)), case.id)
            node = next(
                (
                    n
                    for n in nodes
                    if n.startswith(report.submission + "::")
                    and n.endswith(f"::benchmark[{case.id}]")
                ),
                None,
            )
            try:
                if node is None:
                    report.status, report.message = "error", "pytest did not collect this case"
                else:
                    judge_case(report, node, repo, work, env, sampler, args.timeout, extra)
                measure_case(report, task, target, case, work, env, args.timeout)
            except Exception as exc:  # one case's trouble is reported, the others still run
                report.measure_errors.append(f"{type(exc).__name__}: {exc}")
            print(describe(report), flush=True)
            reports.append(report)
    return reports


if __name__ == "__main__":
    sys.exit(main())
