"""task.yml -> TaskSpec: parse and validate one leaderboard definition.

Every problem is reported as a TaskError that names the file and the key or
case, so a maintainer never has to read a traceback from inside the harness.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..vocabulary import LANGS, RANKINGS
from .sidecar import read_sidecar
from .values import TaskError, parse_deadline

SUBMISSION_MARKER = "@SUBMISSION@"
DEFAULT_TIMEOUT_S = 180.0
DEFAULT_COMPILE_TIMEOUT_S = 600.0  # a cold nvcc build of a torch extension on a busy runner

# Keys of the GPU MODE format (their parser rejects anything else) ...
GPUMODE_KEYS = {
    "files",
    "lang",
    "description",
    "config",
    "templates",
    "tests",
    "benchmarks",
    "test_timeout",
    "benchmark_timeout",
    "ranked_timeout",
    "ranking_by",
    "seed",
    "multi_gpu",
    "gpus",
}
# ... plus our optional extensions, which a GPU MODE folder simply lacks.
EXTENSION_KEYS = {
    "name",  # leaderboard name when it should differ from the folder name
    "deadline",  # UTC, "YYYY-MM-DD[ HH:MM]"; submissions close after it
    "open_code",  # show submitted code on the site before the deadline
    "tolerance",  # free-form note shown on the site (the check itself lives in reference.py)
    "compile_timeout",  # seconds importing (building) a submission may take, before any case
    "read_only_inputs",  # a submission that writes into its input data fails (a pure function)
}
KNOWN_KEYS = GPUMODE_KEYS | EXTENSION_KEYS


@dataclass(frozen=True)
class FileEntry:
    """One file placed beside the submission for evaluation."""

    name: str  # module file name as imported, e.g. "reference.py"
    source: str  # path relative to task.yml, or SUBMISSION_MARKER

    @property
    def is_submission(self) -> bool:
        return self.source == SUBMISSION_MARKER


# A runner's folder named through its environment: "$NAME" or "${NAME}", then "/sub/path".
_VARIABLE_PATH = re.compile(r"^\$(?:\{(?P<braced>\w+)\}|(?P<bare>\w+))(?P<rest>/.*)?$")
STAGED_INCLUDE = "kb_include"  # where runner folders lie in the staged folder: kb_include/<index>


@dataclass(frozen=True)
class IncludeDir:
    """One entry of a `lang: cu` task's `config.include_dirs`: a folder of headers.

    Either a folder of the leaderboard (a relative path, checked when the task loads) or one
    on the runner (an absolute path, or `$NAME/...` with NAME from the judge's environment),
    looked up when a submission is staged: a runner without it fails that build, not the task.
    """

    index: int  # its place in the list
    entry: str  # as task.yml writes it
    variable: str | None = None  # the environment variable that names the runner's folder
    rest: str = ""  # below that variable's folder

    @property
    def key(self) -> str:
        return f"config.include_dirs[{self.index}]"

    @property
    def on_runner(self) -> bool:
        return self.variable is not None or os.path.isabs(self.entry)

    def staged_as(self) -> str:
        """Its place in the staged folder, relative: a folder inside the leaderboard keeps its
        path there; the others (the runner's, a group's beside it) go to kb_include/<index>."""
        relative = os.path.normpath(self.entry)
        if self.on_runner or relative.split(os.sep)[0] == os.pardir:
            return f"{STAGED_INCLUDE}/{self.index}"
        return relative

    def locate(self, task_path: Path, environ: Mapping[str, str] | None = None) -> Path:
        """The folder itself; a TaskError naming task.yml and the key when there is none."""
        if self.variable is not None:
            value = (os.environ if environ is None else environ).get(self.variable)
            if not value:
                raise TaskError(
                    task_path,
                    f"{self.key} ({self.entry!r}): the environment variable {self.variable} "
                    "is not set on this runner",
                )
            folder = Path(value + self.rest)
        else:
            folder = task_path.parent / self.entry
        if not folder.is_dir():
            raise TaskError(task_path, f"{self.key} ({self.entry!r}): folder {folder} not found")
        folder = folder.resolve()
        held = _leaderboard_in(folder, task_path.parent.resolve())
        if held:
            # It is copied where the submission reads it: it must not hand out a solution.
            raise TaskError(
                task_path,
                f"{self.key} ({self.entry!r}): the folder holds {held}, which a submission "
                "must not read; name a folder of headers alone",
            )
        return folder


def _leaderboard_in(folder: Path, root: Path) -> str | None:
    """What of a leaderboard (this one or another) a header folder would expose, if anything:
    its folder, its solutions/, a task.yml."""
    if root.is_relative_to(folder):
        return "the leaderboard itself"
    if folder.is_relative_to(root / "solutions"):
        return "the leaderboard's solutions"
    exposed = next((p for p in folder.rglob("*") if p.name in ("task.yml", "solutions")), None)
    return str(exposed.relative_to(folder)) if exposed else None


@dataclass(frozen=True)
class TaskSpec:
    """A validated leaderboard definition. Case values keep their YAML types."""

    name: str
    path: Path  # the task.yml
    lang: str
    description: str
    files: tuple[FileEntry, ...]
    tests: tuple[dict[str, Any], ...]
    benchmarks: tuple[dict[str, Any], ...]
    config: dict[str, Any] = field(default_factory=dict)
    templates: dict[str, str] = field(default_factory=dict)
    test_timeout: float = DEFAULT_TIMEOUT_S
    benchmark_timeout: float = DEFAULT_TIMEOUT_S
    ranked_timeout: float = DEFAULT_TIMEOUT_S
    ranking_by: str = "last"
    seed: int | None = None
    multi_gpu: bool = False
    gpus: tuple[str, ...] = ()
    deadline: dt.datetime | None = None
    open_code: bool = False
    tolerance: str | None = None
    compile_timeout: float = DEFAULT_COMPILE_TIMEOUT_S
    read_only_inputs: bool = False
    include_dirs: tuple[IncludeDir, ...] = ()  # lang: cu: config.include_dirs, checked

    @property
    def max_world_size(self) -> int:
        """The most GPUs one case of this leaderboard runs on (1 unless multi_gpu)."""
        if not self.multi_gpu:
            return 1
        return max(int(c["world_size"]) for c in (*self.tests, *self.benchmarks))

    @property
    def min_world_size(self) -> int:
        """The fewest GPUs one case of this leaderboard runs on (1 unless multi_gpu)."""
        if not self.multi_gpu:
            return 1
        return min(int(c["world_size"]) for c in (*self.tests, *self.benchmarks))

    @property
    def root(self) -> Path:
        """The leaderboard folder (where task.yml lives)."""
        return self.path.parent

    @property
    def submission_name(self) -> str:
        """The file name the submission is imported under (normally submission.py)."""
        return next(f.name for f in self.files if f.is_submission)

    def source_path(self, entry: FileEntry) -> Path:
        return (self.root / entry.source).resolve()

    def support_files(self) -> list[tuple[str, Path]]:
        """(name, absolute path) of every file except the submission."""
        return [(f.name, self.source_path(f)) for f in self.files if not f.is_submission]

    def is_closed(self, now: dt.datetime | None = None) -> bool:
        now = now or dt.datetime.now(dt.UTC)
        return self.deadline is not None and now >= self.deadline


def _timeout(
    raw: dict[str, Any], key: str, path: Path, default: float = DEFAULT_TIMEOUT_S
) -> float:
    value = raw.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise TaskError(path, f"key '{key}': expected a positive number of seconds, got {value!r}")
    return float(value)


def _cases(raw: dict[str, Any], key: str, path: Path, multi_gpu: bool) -> tuple[dict, ...]:
    cases = raw.get(key) or []
    if not isinstance(cases, list):
        raise TaskError(path, f"key '{key}': expected a list of cases, got {type(cases).__name__}")
    for index, case in enumerate(cases):
        if not isinstance(case, dict):
            raise TaskError(
                path, f"{key}[{index}]: a case must be a mapping of arguments, got {case!r}"
            )
        for name in case:
            if not isinstance(name, str) or not name.isidentifier():
                raise TaskError(
                    path, f"{key}[{index}]: argument name {name!r} is not an identifier"
                )
        if multi_gpu and "world_size" not in case:
            raise TaskError(
                path, f"{key}[{index}]: multi_gpu is true but the case has no world_size"
            )
        if multi_gpu:
            size = case["world_size"]
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                raise TaskError(
                    path,
                    f"{key}[{index}]: world_size must be a positive whole number of GPUs, "
                    f"got {size!r}",
                )
    return tuple(dict(case) for case in cases)


def _files(raw: dict[str, Any], path: Path) -> tuple[FileEntry, ...]:
    files = raw.get("files")
    if not isinstance(files, list) or not files:
        raise TaskError(path, "key 'files': expected a non-empty list of {name, source}")
    entries = []
    for index, item in enumerate(files):
        if not isinstance(item, dict) or not {"name", "source"} <= set(item):
            raise TaskError(path, f"files[{index}]: expected {{name, source}}, got {item!r}")
        entry = FileEntry(str(item["name"]), str(item["source"]))
        if not entry.is_submission and not (path.parent / entry.source).is_file():
            raise TaskError(
                path, f"files[{index}] ({entry.name}): source file {entry.source!r} not found"
            )
        entries.append(entry)
    if not any(e.is_submission for e in entries):
        raise TaskError(path, f"key 'files': no entry has source {SUBMISSION_MARKER!r}")
    return tuple(entries)


def load_task(path: Path | str, name: str | None = None) -> TaskSpec:
    """Read and validate a task.yml. `name` defaults to task.yml's `name`, else its folder."""
    path = Path(path).resolve()
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise TaskError(path, "file not found") from None
    except yaml.YAMLError as exc:
        raise TaskError(path, f"not valid YAML: {exc}") from None
    except ValueError as exc:  # a scalar YAML cannot construct, e.g. the date 2030-13-01
        raise TaskError(path, f"not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise TaskError(path, "expected a mapping of keys at the top level")

    unknown = sorted(set(raw) - KNOWN_KEYS)
    if unknown:
        raise TaskError(path, f"unknown key(s) {', '.join(map(repr, unknown))}")
    raw = {**raw, **read_sidecar(path.parent)}  # kernelboard.yml beside an unmodified task.yml
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise TaskError(path, "key 'description' is required")
    lang = raw.get("lang", "py")
    if lang not in LANGS:
        raise TaskError(path, f"key 'lang': expected one of {LANGS}, got {lang!r}")
    ranking_by = raw.get("ranking_by", "last")
    if ranking_by not in RANKINGS:
        raise TaskError(path, f"key 'ranking_by': expected one of {RANKINGS}, got {ranking_by!r}")
    multi_gpu = raw.get("multi_gpu", False)
    if not isinstance(multi_gpu, bool):
        raise TaskError(path, f"key 'multi_gpu': expected true or false, got {multi_gpu!r}")
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TaskError(path, f"key 'seed': expected an integer, got {seed!r}")
    gpus = raw.get("gpus") or []
    if not isinstance(gpus, list) or not all(isinstance(g, str) for g in gpus):
        raise TaskError(path, f"key 'gpus': expected a list of device names, got {gpus!r}")
    templates = raw.get("templates") or {}
    if not isinstance(templates, dict):
        raise TaskError(path, "key 'templates': expected a mapping of language to file")
    for language, source in templates.items():
        if not (path.parent / str(source)).is_file():
            raise TaskError(path, f"templates.{language}: file {source!r} not found")
    config = raw.get("config") or {}
    if not isinstance(config, dict):
        raise TaskError(path, "key 'config': expected a mapping")

    tests = _cases(raw, "tests", path, multi_gpu)
    if not tests:
        raise TaskError(path, "key 'tests': at least one correctness case is required")
    name = name or raw.get("name") or path.parent.name
    return TaskSpec(
        name=str(name),
        path=path,
        lang=lang,
        description=description,
        files=_files(raw, path),
        tests=tests,
        benchmarks=_cases(raw, "benchmarks", path, multi_gpu),
        config=config,
        templates={str(k): str(v) for k, v in templates.items()},
        test_timeout=_timeout(raw, "test_timeout", path),
        benchmark_timeout=_timeout(raw, "benchmark_timeout", path),
        ranked_timeout=_timeout(raw, "ranked_timeout", path),
        ranking_by=ranking_by,
        seed=seed,
        multi_gpu=multi_gpu,
        gpus=tuple(gpus),
        deadline=parse_deadline(raw["deadline"], path) if raw.get("deadline") else None,
        open_code=bool(raw.get("open_code", False)),
        tolerance=raw.get("tolerance"),
        compile_timeout=_timeout(raw, "compile_timeout", path, DEFAULT_COMPILE_TIMEOUT_S),
        read_only_inputs=_flag(raw, "read_only_inputs", path),
        include_dirs=_include_dirs(config, path) if lang == "cu" else (),
    )


def _flag(raw: dict[str, Any], key: str, path: Path) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise TaskError(path, f"key {key!r}: expected true or false, got {value!r}")
    return value


def _include_dirs(config: dict[str, Any], path: Path) -> tuple[IncludeDir, ...]:
    """config.include_dirs, checked: the leaderboard's own folders must be there now; the
    runner's are looked up when a submission is staged (IncludeDir.locate)."""
    entries = config.get("include_dirs") or []
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise TaskError(
            path, f"key 'config.include_dirs': expected a list of folders, got {entries!r}"
        )
    found = []
    for index, entry in enumerate(entries):
        variable = _VARIABLE_PATH.match(entry)
        if variable:
            name = variable.group("braced") or variable.group("bare")
            include = IncludeDir(index, entry, name, variable.group("rest") or "")
        else:
            include = IncludeDir(index, entry)
        if not include.on_runner:
            if os.path.normpath(entry) == ".":
                continue  # the staged folder itself, always on the include path
            include.locate(path)  # the leaderboard's own: there now, or the task fails to load
        found.append(include)
    return tuple(found)
