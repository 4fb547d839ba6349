"""`kernelboard import kernelbench PATH --level N [--problems ...]`: KernelBench as leaderboards.

PATH holds `level1/`, `level2/`, ...; each problem file there (`24_LogSoftmax.py`) defines
module-level shape constants, `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()`. Each becomes `leaderboards/kernelbench/l<N>_<stem>/`:

- `problem.py`: the problem file, unmodified; `reference.py`: Model built under a fixed weights
  seed (seed, then construct: KernelBench's rule, which a submission's ModelNew follows too);
  `kernelbench_utils.py` (shared, one folder up): inputs, the model cache, the check at
  KernelBench's tolerance (atol = rtol = 1e-2).
- Test cases at shrunk shapes (the problem's large constants, integers and tuples of integers,
  divided by the largest scale the reference runs at), so they run on a CPU; one benchmark case
  at KernelBench's own sizes.
- A submission defines `ModelNew` (KernelBench's contract) or `custom_kernel(data)`.
- A degenerate reference (output all zeros, constant, or equal to an input on every test case)
  accepts trivial kernels: the import warns and records it in README.md and kernelbench.json.

Each problem is imported in its own short-lived process, forked from a server that has imported
torch once: what a problem allocates goes back to the system when it ends, a problem that hangs,
crashes or outgrows --memory-limit is stopped, and the rest of the level is still imported. A
scale is first tried on the meta device (shapes only, nothing allocated), so the import never
materialises KernelBench's published sizes (gigabytes each) to find the test shapes. One line per
problem on stderr says what was done; the exit status is the number of problems skipped.

`fast_p_over_problems` is KernelBench's fast_p over such leaderboards' evaluations.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import re
import resource
import shutil
import sys
import tempfile
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from ..stats.scoring import DEFAULT_FAST_P, fast_p_raw


def _utils() -> ModuleType:
    """kernelbench_utils, imported when an import needs it: it imports torch (seconds), which
    `kernelboard --help` and the other commands should not wait for."""
    from . import kernelbench_utils

    return kernelbench_utils


GROUP = "kernelbench"
UTILS_FILE = "kernelbench_utils.py"
# Tried in this order for the test cases: the most shrunk that runs. 1 (KernelBench's sizes) only
# where its inputs and outputs are within TEST_BYTES_LIMIT.
SCALES = (64, 32, 16, 8, 4, 2, 1)
TEST_CASES = 3
PROBLEM_RE = re.compile(r"^(\d+)_([\w-]+)$")  # level 4: 7_gpt2_bs32_seq256, 2_facebook-opt-1p3b_...
# A test case's inputs and outputs at most (measured on the meta device before anything runs):
# test cases run on a CPU, three per leaderboard and again for every submission.
TEST_BYTES_LIMIT = 256 * 2**20
MEMORY_LIMIT_GB = 2.5  # a problem's process at most (its RSS, torch's own pages included)
TIMEOUT_S = 120.0  # a problem's import at most
POLL_S = 0.05  # how often the parent reads the problem's memory
# An error of the meta device itself, not of the problem's shapes: such a scale is tried for real.
META_ONLY_RE = re.compile(r"\bmeta\b|data.dependent|symbolic|NotImplemented", re.I)
# What KernelBench's problems import beyond torch (pyproject.toml's `kernelbench` extra).
EXTRA_MODULES = ("einops",)
EXTRA_HINT = 'pip install -e ".[kernelbench]" installs what KernelBench\'s problems import'
# Level 4 builds Hugging Face models from downloaded weights: not within a CPU import's means.
LEVEL4_HINT = "level 4 needs transformers, Hugging Face downloads and the full models' memory"
EXIT_CANNOT_START = 125  # no such level or problem; otherwise the exit status is the skip count


class ImportError_(Exception):
    """A problem cannot be imported; the message names the file."""


@dataclass
class ImportedProblem:
    name: str
    folder: Path
    scale: int
    degenerate: str | None
    source: str = ""  # the problem file's stem
    test_shapes: dict[str, Any] = field(default_factory=dict)  # the constants the scale changed
    benchmark_shapes: dict[str, Any] = field(default_factory=dict)  # those constants' own values
    gentler: str = ""  # why a more shrunk scale was not taken ("" at the first scale)
    seconds: float = 0.0
    peak_rss: int = 0  # the problem's process at its peak (bytes, torch's pages included)


@dataclass
class SkippedProblem:
    source: str  # the problem file's stem
    reason: str
    seconds: float = 0.0
    peak_rss: int = 0


@dataclass
class ImportReport:
    level: int
    imported: list[ImportedProblem] = field(default_factory=list)
    skipped: list[SkippedProblem] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        degenerate = sum(1 for p in self.imported if p.degenerate)
        flagged = f" ({degenerate} flagged degenerate)" if degenerate else ""
        skipped = f" ({', '.join(s.source for s in self.skipped)})" if self.skipped else ""
        total = len(self.imported) + len(self.skipped)
        return (
            f"level {self.level}: {total} problems in {self.seconds:.1f} s: "
            f"{len(self.imported)} imported{flagged}, {len(self.skipped)} skipped{skipped}"
        )


def problem_files(root: Path, level: int, problems: Sequence[str] | None = None) -> list[Path]:
    """The level's problem files, by number; `problems` selects by stem or number."""
    folder = Path(root) / f"level{level}"
    if not folder.is_dir():
        raise ImportError_(f"{folder}: no such folder (PATH must hold level1/, level2/, ...)")
    files = {p.stem: p for p in folder.glob("*.py") if PROBLEM_RE.match(p.stem)}
    if not problems:
        chosen = list(files.values())
    else:
        chosen = []
        for wanted in problems:
            match = [
                p
                for stem, p in files.items()
                if stem == wanted or (wanted.isdigit() and stem.split("_")[0] == str(int(wanted)))
            ]
            if not match:
                raise ImportError_(f"{folder}: no problem {wanted!r}")
            chosen += match
    return sorted(set(chosen), key=lambda p: int(p.stem.split("_")[0]))


def _first_line(exc: BaseException, limit: int = 160) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load_problem(path: Path) -> ModuleType:
    name = f"kernelbench_problem_{zlib.crc32(str(path).encode())}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # Registered, as problem.py is in a leaderboard: model_kernel shrinks the shape constants of
    # Model's module while it builds and calls the model.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            top = exc.name.split(".")[0]
            if top in EXTRA_MODULES:
                hint = f" ({EXTRA_HINT})"
            elif top == "transformers":
                hint = f" ({LEVEL4_HINT})"
        raise ImportError_(f"{path}: cannot import: {_first_line(exc)}{hint}") from None
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if not hasattr(module, n)]
    if missing:
        raise ImportError_(f"{path}: not a KernelBench problem (lacks {', '.join(missing)})")
    return module


def leaderboard_name(level: int, stem: str) -> tuple[str, str]:
    """(folder, leaderboard name): l1_24_logsoftmax, kernelbench_l1_24_logsoftmax."""
    folder = f"l{level}_{stem}".lower()
    return folder, f"{GROUP}_{folder}"


def case_seeds(level: int, stem: str) -> tuple[int, list[int]]:
    """(weights seed, input seeds): fixed per problem, so cases are stable across imports."""
    base = zlib.crc32(f"kernelbench level{level} {stem}".encode())
    return base % 100_000 + 1, [(base // 7 + 1_000 * i) % 2_000_000 + 1 for i in range(4)]


# -- in the problem's own process -------------------------------------------------------------
def _nbytes(value: Any) -> int:
    torch = _utils().torch
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, list | tuple):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    return 0


@dataclass
class MetaProbe:
    """A scale tried on the meta device: tensors with shapes and no memory."""

    scale: int
    input_bytes: int | None = None  # get_inputs() at this scale (None: it failed on meta)
    io_bytes: int | None = None  # inputs + the reference's output (None: it failed on meta)
    error: str = ""
    meta_only: bool = False  # the error is the meta device's own (a .item(), no meta kernel)


def probe_on_meta(problem: ModuleType, scale: int) -> MetaProbe:
    """The inputs' and output's sizes at `scale`, from get_inputs() and the Model built and run on
    the meta device: shape errors show here, and KernelBench's published sizes cost nothing."""
    kbu = _utils()
    probe = MetaProbe(scale)
    try:
        with kbu.scaled(problem, scale), kbu.torch.device("meta"), kbu.torch.no_grad():
            init_inputs = list(problem.get_init_inputs())
            inputs = list(problem.get_inputs())
            probe.input_bytes = _nbytes(inputs)
            output = problem.Model(*init_inputs)(*inputs)
            probe.io_bytes = probe.input_bytes + _nbytes(output)
    except Exception as exc:
        probe.error = _first_line(exc)
        probe.meta_only = isinstance(exc, NotImplementedError) or bool(
            META_ONLY_RE.search(str(exc))
        )
    return probe


def run_reference(
    problem: ModuleType, kernel: Callable[[dict], Any], seed: int, weights: int, scale: int
) -> tuple[dict, Any]:
    data = _utils().make_input(problem, seed, weights, scale)
    return data, kernel(data)


def _megabytes(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n < 2**30 else f"{n / 2**30:.1f} GiB"


def choose_scale(
    problem: ModuleType, path: Path, kernel: Callable[[dict], Any], weights: int, seed: int
) -> tuple[int, tuple[dict, Any], str]:
    """The largest shrink of the shape constants at which the reference runs, its first test
    case's (data, output), and why any larger shrink was not taken ("" when none was tried).

    Each scale is sized on the meta device first; one whose inputs and outputs pass
    TEST_BYTES_LIMIT is never run. Only where no scale runs on the meta device for want of the
    meta device's own support (an operation without a meta kernel, a `.item()`) are the scales
    whose inputs fit tried for real."""
    probes: list[MetaProbe] = []  # in order, as far as they were needed
    failures: dict[int, str] = {}  # scale: why it did not run (the last attempt's reason)

    def attempt(scale: int) -> tuple[dict, Any] | None:
        try:
            return run_reference(problem, kernel, seed, weights, scale)
        except Exception as exc:  # shapes that no longer fit together: try a gentler shrink
            failures[scale] = _first_line(exc)
            return None

    def why_not() -> str:
        if not failures:
            return ""
        (first, reason), *rest = failures.items()
        return f"scale {first}: {reason}" + (
            f"; nor {', '.join(str(scale) for scale, _ in rest)}" if rest else ""
        )

    for scale in SCALES:
        probe = probe_on_meta(problem, scale)
        probes.append(probe)
        if probe.io_bytes is None:
            failures[scale] = f"{probe.error} (on the meta device)"
        elif probe.io_bytes > TEST_BYTES_LIMIT:  # a gentler shrink is larger still
            failures[scale] = (
                f"inputs and output {_megabytes(probe.io_bytes)}, over the test cases' "
                f"{_megabytes(TEST_BYTES_LIMIT)} (never allocated)"
            )
            break
        elif (first := attempt(scale)) is not None:
            return scale, first, why_not()
    # No scale ran: where the meta device itself failed (not the shapes), the scales whose inputs
    # fit (or, shrunk, are not known) are tried for real; the memory limit stands behind them.
    for probe in probes:
        if probe.io_bytes is not None or not probe.meta_only:
            continue
        known_fits = probe.input_bytes is not None and probe.input_bytes <= TEST_BYTES_LIMIT
        if known_fits or (probe.input_bytes is None and probe.scale > 1):
            if (first := attempt(probe.scale)) is not None:
                return probe.scale, first, why_not()
    raise ImportError_(
        f"{path}: the reference does not run at any test scale:\n"
        + "\n".join(
            f"    scale {scale}: {failures[scale]}" for scale in SCALES if scale in failures
        )
    )


def degenerate_reason(
    problem: ModuleType,
    kernel: Callable[[dict], Any],
    weights: int,
    seeds: Sequence[int],
    scale: int,
    first: tuple[dict, Any] | None = None,
) -> str:
    """Why the reference accepts trivial kernels ('' when it does not): its output is all zeros,
    constant, or equal to one of its inputs on every test case. `first` is the first seed's
    (data, output), already computed."""
    kbu = _utils()
    reasons: set[str] | None = None
    for index, seed in enumerate(seeds):
        if index == 0 and first is not None:
            data, out = first
        else:
            data, out = run_reference(problem, kernel, seed, weights, scale)
        found = set()
        if isinstance(out, kbu.torch.Tensor):
            flat = out.detach().flatten().float()
            if flat.numel() and not flat.any():
                found.add("its output is all zeros")
            elif flat.numel() > 1 and bool((flat == flat[0]).all()):
                found.add("its output is constant")
            for x in data["inputs"]:
                if isinstance(x, kbu.torch.Tensor) and x.shape == out.shape:
                    if kbu.check(out, x)[0]:
                        found.add("its output equals an input")
        reasons = found if reasons is None else reasons & found
        if not reasons:
            break
    return "; ".join(sorted(reasons or ()))


def import_problem(path: Path, level: int, dest: Path) -> ImportedProblem:
    """One problem as a leaderboard folder under dest, in this process: runs its reference at
    the test scale (never at KernelBench's sizes unless those are small)."""
    started = time.monotonic()
    problem = load_problem(path)
    weights, seeds = case_seeds(level, path.stem)
    kernel = _utils().model_kernel(problem.Model)  # one model, built once, for every seed
    scale, first, gentler = choose_scale(problem, path, kernel, weights, seeds[0])
    reason = degenerate_reason(problem, kernel, weights, seeds[:TEST_CASES], scale, first)
    del first, kernel
    imported = write_leaderboard(dest, level, path, problem, scale, reason)
    imported.gentler = gentler
    imported.seconds = time.monotonic() - started
    return imported


REFERENCE = '''"""KernelBench level {level}, problem {stem}, as a leaderboard.

Generated by `kernelboard import kernelbench`; problem.py is the problem file, unmodified.
"""

import problem
from kernelbench_utils import check, make_input, model_kernel

_reference = model_kernel(problem.Model)


def generate_input(seed: int, weights: int, scale: int):
    return make_input(problem, seed, weights, scale)


def ref_kernel(data):
    return _reference(data)


def check_implementation(data, output):
    return check(_reference(data), output)
'''

TASK_PY = '''"""Types of a KernelBench leaderboard."""

from typing import Any, TypedDict

# {"inputs": get_inputs() on the device, "init_inputs": get_init_inputs(), "weights": seed}
input_t = dict[str, Any]
output_t = Any


class TestSpec(TypedDict):
    seed: int
    weights: int
    scale: int
'''

CORRECT = '''"""Baseline in KernelBench's form: ModelNew is the reference Model itself."""

from problem import Model


class ModelNew(Model):
    pass
'''

WRONG = '''"""Wrong on purpose: every output element is off by one."""

from problem import Model


class ModelNew(Model):
    def forward(self, *args):
        return super().forward(*args) + 1.0
'''


class _TaskDumper(yaml.SafeDumper):
    """Multi-line strings (the description) as YAML blocks, as a person writes task.yml."""


_TaskDumper.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar(
        "tag:yaml.org,2002:str", text, style="|" if "\n" in text else None
    ),
)


def write_leaderboard(
    dest: Path, level: int, path: Path, problem: ModuleType, scale: int, reason: str
) -> ImportedProblem:
    kbu = _utils()
    folder_name, name = leaderboard_name(level, path.stem)
    folder = dest / folder_name
    weights, seeds = case_seeds(level, path.stem)
    (folder / "solutions" / "correct").mkdir(parents=True, exist_ok=True)
    (folder / "solutions" / "wrong").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, folder / "problem.py")
    (folder / "reference.py").write_text(REFERENCE.format(level=level, stem=path.stem))
    (folder / "task.py").write_text(TASK_PY)
    (folder / "solutions" / "correct" / "submission_model_new.py").write_text(CORRECT)
    (folder / "solutions" / "wrong" / "submission_off_by_one.py").write_text(WRONG)
    with kbu.scaled(problem, scale) as shrunk:
        pass
    warning = (
        f"\nWARNING: degenerate reference ({reason}): a trivial kernel passes this problem.\n"
        if reason
        else ""
    )
    description = (
        f"KernelBench level {level}, problem {path.stem} (problem.py).\n\n"
        "Define `class ModelNew(nn.Module)` (KernelBench's contract: built as "
        "ModelNew(*get_init_inputs()) under the same seed as Model, then called with "
        "get_inputs()), or `custom_kernel(data)` with data = {inputs, init_inputs, weights}.\n"
        f"Tolerance: atol = rtol = {kbu.ATOL} (KernelBench's).\n" + warning
    )
    task = {
        "name": name,
        "files": [
            {"name": "submission.py", "source": "@SUBMISSION@"},
            {"name": "task.py", "source": "task.py"},
            {"name": "problem.py", "source": "problem.py"},
            {"name": UTILS_FILE, "source": f"../{UTILS_FILE}"},
            {"name": "reference.py", "source": "reference.py"},
        ],
        "lang": "py",
        "description": description,
        "tolerance": f"atol {kbu.ATOL}, rtol {kbu.RTOL} (KernelBench)",
        # KernelBench's reference is a pure function: a drop-in kernel leaves its inputs alone.
        "read_only_inputs": True,
        "tests": [
            {"seed": seed, "weights": weights, "scale": scale} for seed in seeds[:TEST_CASES]
        ],
        "benchmarks": [{"seed": seeds[-1], "weights": weights, "scale": 1}],
        "ranking_by": "last",
    }
    header = (
        f"# KernelBench level {level}, {path.stem}: written by `kernelboard import kernelbench`.\n"
    )
    (folder / "task.yml").write_text(
        header + yaml.dump(task, Dumper=_TaskDumper, sort_keys=False, width=100)
    )
    metadata = {
        "source": f"level{level}/{path.name}",
        "level": level,
        "problem": int(path.stem.split("_")[0]),
        "test_scale": scale,
        "test_shapes": shrunk,
        "benchmark_shapes": kbu.shape_constants(problem),
        "degenerate": reason or None,
    }
    (folder / "kernelbench.json").write_text(json.dumps(metadata, indent=2) + "\n")
    readme = [
        f"# {name}",
        "",
        description,
        f"Test cases shrink the shape constants by {scale} ({shrunk}); the benchmark case keeps "
        f"KernelBench's sizes ({metadata['benchmark_shapes']}).",
    ]
    (folder / "README.md").write_text("\n".join(readme) + "\n")
    original = metadata["benchmark_shapes"]
    changed = {key: value for key, value in shrunk.items() if value != original.get(key)}
    return ImportedProblem(
        name,
        folder,
        scale,
        reason or None,
        source=path.stem,
        test_shapes=changed,
        benchmark_shapes={key: original[key] for key in changed},
    )


# -- one process per problem ------------------------------------------------------------------
def _problem_process(job: dict[str, Any]) -> None:
    """The body of a problem's own process: import it, write its folder, and leave the outcome
    in job["result"] (JSON) for the parent."""
    sys.stdout = sys.stderr  # a problem's own prints stay off the command's output
    warnings.simplefilter("ignore")  # KernelBench's models warn at every build; the line says it
    started = time.monotonic()
    try:
        imported = import_problem(Path(job["path"]), job["level"], Path(job["dest"]))
        outcome: dict[str, Any] = {"imported": asdict(imported)}
    except ImportError_ as exc:
        outcome = {"skipped": str(exc).removeprefix(f"{job['path']}: ")}
    except BaseException as exc:  # anything the problem raises skips it, never the level
        outcome = {"skipped": f"failed: {_first_line(exc)}"}
    outcome["seconds"] = time.monotonic() - started
    outcome["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result = Path(job["result"])
    partial = result.with_suffix(".partial")
    partial.write_text(json.dumps(outcome, default=str))
    partial.replace(result)


def _tree_rss(pid: int) -> int:
    """The resident memory of pid and every process it started (bytes; 0 once it is gone)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    todo += [int(child) for child in children.read().split()]
        except (OSError, ValueError):
            continue
    return total


def _process_context() -> multiprocessing.context.BaseContext:
    """Processes forked from a server that imported torch once (seconds, paid once per process
    that imports): a problem's process starts in milliseconds, with nothing of the previous
    problem in it, and no thread pool of the parent's (the server never runs an operation)."""
    if sys.platform != "linux":  # no fork server (or no /proc): a fresh interpreter each
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([f"{__package__}.kernelbench_preload"])
    return context


def _run_in_process(
    context: multiprocessing.context.BaseContext,
    path: Path,
    level: int,
    dest: Path,
    workdir: Path,
    memory_limit: int,
    timeout_s: float,
) -> ImportedProblem | SkippedProblem:
    """One problem imported in its own process, which is stopped past memory_limit bytes or
    timeout_s seconds: either way the problem is skipped with the reason."""
    result = workdir / f"{path.stem}.json"
    job = {"path": str(path), "level": level, "dest": str(dest), "result": str(result)}
    process = context.Process(target=_problem_process, args=(job,), daemon=True)
    process.start()  # returns once the fork server has imported torch (the first time) and forked
    started = time.monotonic()
    stopped, peak = "", 0
    try:
        while process.is_alive():
            peak = max(peak, _tree_rss(process.pid))
            elapsed = time.monotonic() - started
            if peak > memory_limit:
                stopped = (
                    f"stopped: its process passed --memory-limit {memory_limit / 1e9:g} GB "
                    f"({peak / 1e9:.2f} GB after {elapsed:.1f} s)"
                )
            elif elapsed > timeout_s:
                stopped = f"stopped: still running after --timeout {timeout_s:g} s"
            if stopped:
                process.kill()
                break
            process.join(POLL_S)
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        exitcode = process.exitcode
        process.close()
    seconds = time.monotonic() - started
    if not stopped and result.exists():
        outcome = json.loads(result.read_text())
        peak = max(peak, outcome["peak_rss"])
        if "imported" in outcome:
            imported = ImportedProblem(**outcome["imported"])
            imported.folder, imported.seconds, imported.peak_rss = (
                Path(imported.folder),
                seconds,
                peak,
            )
            return imported
        return SkippedProblem(path.stem, outcome["skipped"], seconds, peak)
    if not stopped:
        stopped = f"its process died (exit status {exitcode}) before it was done"
    return SkippedProblem(path.stem, stopped, seconds, peak)


def _shapes(imported: ImportedProblem, limit: int = 6) -> str:
    def text(value: Any) -> str:  # a shape tuple came back from JSON as a list
        return repr(tuple(value)) if isinstance(value, list) else repr(value)

    pairs = [
        f"{key} {text(imported.benchmark_shapes.get(key))} -> {text(value)}"
        for key, value in imported.test_shapes.items()
    ]
    more = f", ... ({len(pairs) - limit} more)" if len(pairs) > limit else ""
    return ", ".join(pairs[:limit]) + more


def progress_line(
    index: int, total: int, elapsed: float, item: ImportedProblem | SkippedProblem
) -> str:
    """The line stderr gets for one problem: what was done with it."""
    where = f"[{index:>{len(str(total))}}/{total} {elapsed:6.1f} s]"
    cost = f"({item.seconds:.1f} s, {item.peak_rss / 1e9:.2f} GB)"
    if isinstance(item, SkippedProblem):  # the reason's first line, then any details below it
        first, _, details = item.reason.strip().partition("\n")
        return f"{where} {item.source}: skipped: {first} {cost}" + (
            "\n" + details if details else ""
        )
    shrink = (
        f"test shapes / {item.scale}: {_shapes(item)}"
        if item.test_shapes
        else f"test shapes at KernelBench's sizes (scale {item.scale}: nothing to shrink)"
        if item.scale > 1
        else "test shapes at KernelBench's sizes (small enough)"
    )
    if item.gentler:
        shrink += f" [more shrunk did not run: {item.gentler}]"
    flagged = (
        f", flagged degenerate ({item.degenerate}: a trivial kernel passes)"
        if item.degenerate
        else ""
    )
    return f"{where} {item.source}: imported as {item.folder.name}{flagged}; {shrink} {cost}"


def import_level(
    root: Path,
    level: int,
    problems: Sequence[str] | None,
    dest: Path,
    *,
    memory_limit_gb: float = MEMORY_LIMIT_GB,
    timeout_s: float = TIMEOUT_S,
    progress: Callable[[str], None] | None = None,
) -> ImportReport:
    """Write one leaderboard per selected problem under dest (leaderboards/kernelbench), each
    problem in its own process; a problem that cannot be imported, shrunk or run is skipped
    with the reason, and the others are still imported. progress gets one line per problem."""
    files = problem_files(root, level, problems)
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).with_name(UTILS_FILE), dest / UTILS_FILE)
    report = ImportReport(level)
    started = time.monotonic()
    context = _process_context()
    with tempfile.TemporaryDirectory(prefix="kb_import_") as work:
        for index, path in enumerate(files, 1):
            item = _run_in_process(
                context,
                path.resolve(),
                level,
                dest,
                Path(work),
                int(memory_limit_gb * 1e9),
                timeout_s,
            )
            if isinstance(item, ImportedProblem):
                report.imported.append(item)
            else:
                report.skipped.append(item)
            report.seconds = time.monotonic() - started
            if progress is not None:
                progress(progress_line(index, len(files), report.seconds, item))
    return report


def import_kernelbench(
    root: Path, level: int, problems: Sequence[str] | None, dest: Path, **limits: Any
) -> list[ImportedProblem]:
    """Write one leaderboard per selected problem under dest (leaderboards/kernelbench); raises
    ImportError_ naming every problem skipped (import_level reports them and goes on)."""
    report = import_level(root, level, problems, dest, **limits)
    if report.skipped:
        raise ImportError_(
            "; ".join(f"level{level}/{s.source}.py: {s.reason}" for s in report.skipped)
        )
    return report.imported


# -- fast_p ------------------------------------------------------------------------------------
def fast_p_over_problems(
    evaluations: Sequence[dict[str, Any]], thresholds: Sequence[float] = DEFAULT_FAST_P
) -> dict[str, float]:
    """KernelBench's fast_p over problems: the share of problems whose submission is correct
    AND faster than p times the PyTorch reference (speedup > p), the speedup being measured
    against the reference in the same harness. One evaluation (a results-file entry with a
    `summary`) per problem; a problem not correct, or correct but not timed, counts as a miss."""
    correct = [e["summary"]["status"] == "passed" for e in evaluations]
    speedups = [e["summary"].get("speedup") for e in evaluations]
    return fast_p_raw(correct, speedups, thresholds)  # raw: as published numbers count


def run_fast_p(evaluations: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """fast_p over the KernelBench problems of a run, per author (None without any):
    {author: {"problems": n, "fast_p": {"0": share, "0.5": share, ...}}}."""
    by_author: dict[str, list[dict[str, Any]]] = {}
    for evaluation in evaluations:
        if evaluation["submission"].get("is_reference"):
            continue
        if not evaluation["leaderboard"]["name"].startswith(f"{GROUP}_"):
            continue
        by_author.setdefault(evaluation["submission"]["author"] or "", []).append(evaluation)
    if not by_author:
        return None
    return {
        author: {
            "problems": len(chosen),
            "fast_p": {
                key.removeprefix("fast_"): share
                for key, share in fast_p_over_problems(chosen).items()
            },
        }
        for author, chosen in sorted(by_author.items())
    }


# -- command line ------------------------------------------------------------------------------
def register(import_subparsers: Any) -> argparse.ArgumentParser:
    """Register `kernelbench` under the `kernelboard import` command group."""
    parser = import_subparsers.add_parser(
        "kernelbench", help="turn KernelBench problem files into leaderboards"
    )
    parser.add_argument("path", type=Path, help="folder holding level1/, level2/, ...")
    parser.add_argument(
        "--level", type=int, required=True, help="KernelBench level to import (reads PATH/levelN/)"
    )
    parser.add_argument(
        "--problems", nargs="+", metavar="STEM|N", help="file stems or numbers (default: all)"
    )
    parser.add_argument(
        "--dest",
        type=Path,
        default=Path("leaderboards") / GROUP,
        help="where the leaderboard folders go (default: leaderboards/kernelbench)",
    )
    parser.add_argument(
        "--memory-limit",
        type=float,
        default=MEMORY_LIMIT_GB,
        metavar="GB",
        help=f"stop and skip a problem whose process holds more (default {MEMORY_LIMIT_GB:g})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=TIMEOUT_S,
        metavar="S",
        help=f"stop and skip a problem still importing after S seconds (default {TIMEOUT_S:g})",
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """The exit status is the number of problems skipped (0: all imported), EXIT_CANNOT_START
    when PATH has no such level or problem."""

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        report = import_level(
            args.path,
            args.level,
            args.problems,
            args.dest,
            memory_limit_gb=args.memory_limit,
            timeout_s=args.timeout,
            progress=progress,
        )
    except ImportError_ as exc:
        print(f"kernelboard import kernelbench: {exc}", file=sys.stderr)
        return EXIT_CANNOT_START
    for item in report.imported:
        print(f"{item.name}: {item.folder} (test shapes / {item.scale})")
        if item.degenerate:
            print(
                f"warning: {item.name}: degenerate reference ({item.degenerate}); "
                "a trivial kernel passes it",
                file=sys.stderr,
            )
    print(f"kernelboard import kernelbench: {report.summary()}", file=sys.stderr)
    return min(len(report.skipped), EXIT_CANNOT_START - 1)
