"""One GPU's judge for benchmarks/suite_sweep.py, and the handles the sweep drives it by.

    python benchmarks/sweep_lane.py ROOT MODE     (started by suite_sweep.py, one per GPU)

A lane is a process that imports torch and the batch judge once, then judges one problem at a
time: it reads a job per line on stdin ({"problem", "leaderboard", "id", "source", "lang",
"spread", "reference_workers"}) and answers it with one line ({"problem", "record"} or
{"problem", "error"}) from `judge_many` on the first GPU its CUDA_VISIBLE_DEVICES names (every
GPU named there for a multi-GPU problem's ranks, or, for a spread job, one judge process on
each). A problem then costs its judging, not a Python, torch and CUDA start-up: on the 2-core
CPU machine, KernelBench's first ten level 1 problems took 0.3 - 0.4 s each in a lane in test
mode (its first 2.9 s), and 6.5 - 8.6 s each as a fresh `kernelboard judge`. After each
problem the lane lets go of what it cached and checks that its CUDA context still works (the
leaderboards' own code runs in it); one that does not is replaced before the next problem.
What that code prints goes to the lane's log (stderr), never into its answers.

`Lane` is the sweep's handle on one: start it, judge a job within a wall-time cap (past it,
or when the lane dies, its whole process tree is killed and a fresh lane started), close it.
`CliLane` runs `kernelboard judge` once per problem instead, as a user would. `MemoryPeaks`
samples NVML in the sweep's own process (which never touches CUDA) for each GPU's peak while
a problem is judged there.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, Queue
from typing import IO, Any

from pytest_kernelboard.batch.reference_share import REFERENCE_WORKERS
from pytest_kernelboard.supervisor import proctree

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 300.0  # a lane's torch import and CUDA start-up, on a cold machine
SAMPLE_S = 0.05  # NVML's used memory, read this often while a problem is judged
READY = "ready"


@dataclass
class Answer:
    """A lane's answer to one job: the candidate's record, or why there is none."""

    record: dict[str, Any] | None = None
    error: str = ""
    timed_out: bool = False  # stopped by the sweep's cap
    wall_s: float = 0.0
    died: bool = False  # the lane's own process ended mid-job: the harness's, whatever the code


def child_env(gpus: list[int] | None) -> dict[str, str]:
    """The environment a lane, an import or a `kernelboard judge` gets: this checkout
    importable, and the GPUs it may use (NVML's numbering); None: no GPU at all."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA's numbering = NVML's
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus or ())
    return env


def kill_tree(process: subprocess.Popen) -> None:
    """Kill a process started in a session of its own and everything it started (sandboxed
    workers start sessions of their own, so its process group is not enough)."""
    snapshot = proctree.read_snapshot()
    for pid in snapshot.tree(process.pid) if snapshot is not None else ():
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


class Lane:
    """One persistent lane process on `gpus` (None: a CPU lane)."""

    def __init__(
        self, root: Path, mode: str, gpus: list[int] | None, log: Path, candidate_workers: int = 1
    ):
        self.root, self.mode, self.gpus, self.log = root, mode, gpus, log
        self.candidate_workers = candidate_workers
        self.process: subprocess.Popen | None = None
        self.lines: Queue[str | None] = Queue()
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        self.lines = Queue()
        with open(self.log, "a") as log:
            log.write(f"--- lane start {self.starts} on GPUs {self.gpus} ---\n")
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), str(self.root), self.mode]
                + [str(self.candidate_workers)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=child_env(self.gpus),
                text=True,
                bufsize=1,
                start_new_session=True,  # killed as a whole at the cap
            )
        reader = threading.Thread(
            target=self._read, args=(self.process.stdout, self.lines), daemon=True
        )
        reader.start()
        first = self._next(START_TIMEOUT_S)
        if first is None or json.loads(first).get("type") != READY:
            self.stop()
            raise RuntimeError(f"the lane on GPUs {self.gpus} did not start (see {self.log})")

    @staticmethod
    def _read(stream: IO[str], lines: Queue[str | None]) -> None:
        """This process's answers into its own queue (None at its end), never a successor's."""
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _next(self, timeout_s: float) -> str | None:
        """The next answer line; None when the process ended; TimeoutError past timeout_s."""
        try:
            return self.lines.get(timeout=timeout_s)
        except Empty:
            raise TimeoutError from None

    def judge(self, job: dict[str, Any], cap_s: float) -> Answer:
        if self.process is None:
            self.start()
        assert self.process is not None and self.process.stdin is not None
        started = time.monotonic()
        try:
            self.process.stdin.write(json.dumps(job) + "\n")
            self.process.stdin.flush()
            line = self._next(cap_s)
        except TimeoutError:
            self.stop()
            return Answer(
                error=f"still being judged after --cap {cap_s:g} s: stopped (the lane's judge "
                "and workers killed)",
                timed_out=True,
                wall_s=time.monotonic() - started,
            )
        except OSError:  # its stdin closed: it died between jobs
            line = None
        wall = time.monotonic() - started
        if line is None:
            try:  # its output closes a moment before it can be reaped
                code: int | None = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            self.stop()
            return Answer(
                error=f"the lane's process died ({exit_words(code)}); see {self.log}",
                wall_s=wall,
                died=True,
            )
        answer = json.loads(line)
        if not answer.get("healthy", True):  # its CUDA context broke: the next job gets a new one
            self.stop()
        return Answer(answer.get("record"), answer.get("error", ""), wall_s=wall)

    def stop(self) -> None:
        """Kill the lane with everything it started (nothing to do once it has exited)."""
        if self.process is not None:
            if self.process.poll() is None:
                kill_tree(self.process)
            self.process = None

    def close(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()


class CliLane:
    """`kernelboard judge LEADERBOARD FILE` once per problem, as a user runs it."""

    def __init__(
        self, root: Path, mode: str, gpus: list[int] | None, log: Path, candidate_workers: int = 1
    ):
        self.root, self.mode, self.gpus, self.log = root, mode, gpus, log
        self.candidate_workers = candidate_workers
        self.folder = Path(tempfile.mkdtemp(prefix="kb-sweep-cli-"))

    def judge(self, job: dict[str, Any], cap_s: float) -> Answer:
        folder = Path(tempfile.mkdtemp(dir=self.folder))
        candidate = folder / job["id"]
        candidate.write_text(job["source"])
        out = folder / "record.jsonl"
        command = [sys.executable, "-m", "pytest_kernelboard.cli", "judge", job["leaderboard"]]
        command += [str(candidate), "--mode", self.mode, "--root", str(self.root)]
        command += ["--out", str(out)] + (["--gpus", self.visible(job)] if self.gpus else [])
        command += ["--candidate-workers", str(self.candidate_workers)]
        command += ["--reference-workers", str(job.get("reference_workers", REFERENCE_WORKERS))]
        started = time.monotonic()
        with open(self.log, "a") as log:
            log.write(f"--- {job['problem']}: {' '.join(command)}\n")
            log.flush()
            process = subprocess.Popen(
                command, stdout=log, stderr=log, env=child_env(self.gpus), start_new_session=True
            )
            try:
                process.wait(timeout=cap_s)
            except subprocess.TimeoutExpired:
                kill_tree(process)
                return Answer(
                    error=f"still being judged after --cap {cap_s:g} s: stopped",
                    timed_out=True,
                    wall_s=time.monotonic() - started,
                )
        wall = time.monotonic() - started
        lines = out.read_text().splitlines() if out.exists() else []
        if lines:
            return Answer(json.loads(lines[0]), wall_s=wall)
        tail = _last_line(self.log)
        return Answer(error=f"kernelboard judge exited {process.returncode}: {tail}", wall_s=wall)

    def visible(self, job: dict[str, Any]) -> str:
        """--gpus for a job: its lane's first GPU, or all of them for a spread one."""
        return ",".join(map(str, range(len(self.gpus or ()) if job.get("spread") else 1)))

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def exit_words(code: int | None) -> str:
    """A process's exit status in words: a signal by name, SIGKILL's usual senders named."""
    if code is None:
        return "its output closed; it had not exited 10 s later"
    if code >= 0:
        return f"exit {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if name == "SIGKILL":
        return "killed by SIGKILL: the kernel's out-of-memory killer or a memory limit, most often"
    return f"killed by {name}"


def _last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def nvml_numbers(cuda_indices: list[int], environ: dict[str, str] | None = None) -> list[int]:
    """NVML's numbers for this process's cuda:<i>: NVML counts every GPU of the host and
    ignores CUDA_VISIBLE_DEVICES (KernelBench's evaluator run with CUDA_VISIBLE_DEVICES=2 beside
    other work read GPU 0's peak). Entries that are not numbers (UUIDs) are left as given."""
    listed = [d.strip() for d in (environ or os.environ).get("CUDA_VISIBLE_DEVICES", "").split(",")]
    listed = [d for d in listed if d]
    if not listed or not all(d.isdigit() for d in listed):
        return list(cuda_indices)
    return [int(listed[i]) for i in cuda_indices]


class MemoryPeaks:
    """Each GPU's used device memory at its peak while a problem is judged on it, read from
    NVML every SAMPLE_S seconds (a spike shorter than that can be missed). Without NVML or a
    GPU, every peak is None."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.handles: dict[int, Any] = {}
        self.peaks: dict[int, int] = {}
        self.lock = threading.Lock()
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
        except Exception:  # no NVML (a CPU machine): no peaks
            return
        threading.Thread(target=self._sample, daemon=True).start()

    def describe(self, gpu: int) -> tuple[str, str] | None:
        """(name, architecture) of an NVIDIA GPU: ('NVIDIA H100 80GB HBM3', 'sm_90')."""
        if self.nvml is None:
            return None
        handle = self.nvml.nvmlDeviceGetHandleByIndex(gpu)
        name = self.nvml.nvmlDeviceGetName(handle)
        major, minor = self.nvml.nvmlDeviceGetCudaComputeCapability(handle)
        return (name.decode() if isinstance(name, bytes) else name), f"sm_{major}{minor}"

    def count(self) -> int:
        """How many GPUs NVML sees (0 without NVML)."""
        return self.nvml.nvmlDeviceGetCount() if self.nvml is not None else 0

    def _used(self, gpu: int) -> int:
        if gpu not in self.handles:
            self.handles[gpu] = self.nvml.nvmlDeviceGetHandleByIndex(gpu)
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handles[gpu]).used)

    def _sample(self) -> None:
        while True:
            with self.lock:
                for gpu in list(self.peaks):
                    try:
                        self.peaks[gpu] = max(self.peaks[gpu], self._used(gpu))
                    except Exception:
                        pass
            time.sleep(SAMPLE_S)

    def begin(self, gpus: list[int] | None) -> None:
        if self.nvml is None or not gpus:
            return
        with self.lock:
            for gpu in gpus:
                self.peaks[gpu] = self._used(gpu)

    def peak_so_far(self, gpus: list[int] | None) -> int | None:
        """The largest of the GPUs' peaks since begin (bytes), still watching; None without
        NVML."""
        if self.nvml is None or not gpus:
            return None
        with self.lock:
            return max(self.peaks.get(gpu, 0) for gpu in gpus)

    def end(self, gpus: list[int] | None) -> int | None:
        """The largest of the GPUs' peaks since begin (bytes), None without NVML."""
        if self.nvml is None or not gpus:
            return None
        with self.lock:
            for gpu in gpus:
                self.peaks[gpu] = max(self.peaks.get(gpu, 0), self._used(gpu))
            return max(self.peaks.pop(gpu) for gpu in gpus)


# -- the lane process itself ---------------------------------------------------------------------
def settle(torch: Any, cuda: bool) -> bool:
    """Let go of the last problem (its models, the allocator's cache) and say whether this
    process's CUDA context still runs a kernel (an illegal access in a leaderboard's own code
    breaks it for good)."""
    gc.collect()
    if not cuda:
        return True
    try:
        torch.cuda.empty_cache()
        torch.ones(1, device="cuda").add_(1).item()
        return True
    except Exception as exc:
        print(f"the CUDA context broke: {exc}", file=sys.stderr, flush=True)
        return False


def serve(root: Path, mode: str, candidate_workers: int = 1) -> None:
    """Answer jobs from stdin until it closes. The answers go to the real stdout; everything
    else printed in this process (the leaderboards' own code runs here) to stderr."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import torch

    from pytest_kernelboard.batch import Candidate, judge_many
    from pytest_kernelboard.evaluation.progress import Progress
    from pytest_kernelboard.spec.discovery import load_catalog, reload_catalog

    class Logged(Progress):
        """The judge's lines (each timed case, the reference's workers) into the lane's log."""

        def case_timed(self, label: str, line: str) -> None:
            print(f"{label}: {line}", file=sys.stderr, flush=True)

    gpus = [0] if torch.cuda.is_available() else None  # every visible GPU: a multi-GPU case's
    if gpus:
        torch.cuda.init()
    # A spread job: one judge process per visible GPU, the reference's workers dealt across them.
    every_gpu = list(range(torch.cuda.device_count())) if gpus else None
    answers.write(json.dumps({"type": READY}) + "\n")
    for line in sys.stdin:
        job = json.loads(line)
        answer: dict[str, Any] = {"problem": job["problem"]}
        print(f"--- {job['problem']} ({job['leaderboard']})", file=sys.stderr, flush=True)
        try:
            # The sweep writes leaderboards while lanes judge: a name the cached catalog does
            # not have (or read half-written) is looked up again.
            if job["leaderboard"] not in load_catalog(root).tasks:
                reload_catalog(root)
            candidate = Candidate(job["id"], job["source"], job.get("lang", "py"))
            records = list(
                judge_many(
                    job["leaderboard"],
                    [candidate],
                    mode=mode,
                    root=root,
                    gpus=every_gpu if job.get("spread") else gpus,
                    progress=Logged(),
                    candidate_workers=candidate_workers,
                    reference_workers=job.get("reference_workers", REFERENCE_WORKERS),
                )
            )
            answer["record"] = records[0]
        except Exception as exc:  # the leaderboard does not load, the judge raised: a row says
            answer["error"] = f"{type(exc).__name__}: {exc}"
        answer["healthy"] = settle(torch, gpus is not None)
        answers.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
