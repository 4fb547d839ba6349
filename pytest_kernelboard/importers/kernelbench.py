"""`kernelboard import kernelbench PATH --level N [--problems ...]`: KernelBench as leaderboards.

PATH holds `level1/`, `level2/`, ...; each problem file there (`24_LogSoftmax.py`) defines
module-level shape constants, `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()`. Each becomes `leaderboards/kernelbench/l<N>_<stem>/`:

- `problem.py`: the problem file, unmodified; `reference.py`: Model built under a fixed weights
  seed (seed, then construct: KernelBench's rule, which a submission's ModelNew follows too);
  `kernelbench_utils.py` (shared, one folder up): inputs, the model cache, the check at
  KernelBench's tolerance (atol = rtol = 1e-2).
- Test cases at shrunk shapes (the problem's large constants divided by the largest scale the
  reference runs at), so they run on a CPU; one benchmark case at KernelBench's own sizes.
- A submission defines `ModelNew` (KernelBench's contract) or `custom_kernel(data)`.
- A degenerate reference (output all zeros, constant, or equal to an input on every test case)
  accepts trivial kernels: the import warns and records it in README.md and kernelbench.json.

`fast_p_over_problems` is KernelBench's fast_p over such leaderboards' evaluations.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import sys
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
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
SCALES = (64, 16, 4, 1)  # tried in this order for the test cases: the most shrunk that runs
TEST_CASES = 3
PROBLEM_RE = re.compile(r"^(\d+)_(\w+)$")


class ImportError_(Exception):
    """A problem cannot be imported; the message names the file."""


@dataclass
class ImportedProblem:
    name: str
    folder: Path
    scale: int
    degenerate: str | None


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


def load_problem(path: Path) -> ModuleType:
    name = f"kernelbench_problem_{zlib.crc32(str(path).encode())}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ImportError_(f"{path}: cannot import: {type(exc).__name__}: {exc}") from None
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


def run_reference(problem: ModuleType, seed: int, weights: int, scale: int) -> tuple[dict, Any]:
    kbu = _utils()
    data = kbu.make_input(problem, seed, weights, scale)
    return data, kbu.model_kernel(problem.Model)(data)


def choose_scale(problem: ModuleType, path: Path, weights: int, seed: int) -> int:
    """The largest shrink of the shape constants at which the reference still runs."""
    errors = []
    for scale in SCALES:
        try:
            run_reference(problem, seed, weights, scale)
            return scale
        except Exception as exc:  # shapes that no longer fit together: try a gentler shrink
            errors.append(f"scale {scale}: {type(exc).__name__}: {exc}")
    raise ImportError_(f"{path}: the reference does not run:\n" + "\n".join(errors))


def degenerate_reason(problem: ModuleType, weights: int, seeds: Sequence[int], scale: int) -> str:
    """Why the reference accepts trivial kernels ('' when it does not): its output is all zeros,
    constant, or equal to one of its inputs on every test case."""
    kbu = _utils()
    reasons: set[str] | None = None
    for seed in seeds:
        data, out = run_reference(problem, seed, weights, scale)
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
    return "; ".join(sorted(reasons or ()))


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
    return ImportedProblem(name, folder, scale, reason or None)


def import_kernelbench(
    root: Path, level: int, problems: Sequence[str] | None, dest: Path
) -> list[ImportedProblem]:
    """Write one leaderboard per selected problem under dest (leaderboards/kernelbench)."""
    files = problem_files(root, level, problems)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(_utils().__file__), dest / UTILS_FILE)
    imported = []
    for path in files:
        problem = load_problem(path)
        weights, seeds = case_seeds(level, path.stem)
        scale = choose_scale(problem, path, weights, seeds[0])
        reason = degenerate_reason(problem, weights, seeds[:TEST_CASES], scale)
        imported.append(write_leaderboard(dest, level, path, problem, scale, reason))
    return imported


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
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    try:
        imported = import_kernelbench(args.path, args.level, args.problems, args.dest)
    except ImportError_ as exc:
        print(f"kernelboard import kernelbench: {exc}", file=sys.stderr)
        return 2
    for item in imported:
        print(f"{item.name}: {item.folder} (test shapes / {item.scale})")
        if item.degenerate:
            print(
                f"warning: {item.name}: degenerate reference ({item.degenerate}); "
                "a trivial kernel passes it",
                file=sys.stderr,
            )
    return 0
