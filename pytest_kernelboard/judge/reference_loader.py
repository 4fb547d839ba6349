"""A leaderboard's own modules (reference.py, task.py, utils.py), imported into the judge.

These are trusted repository files. Many leaderboards use the same module names, so each
leaderboard's modules live in a private table and are swapped into sys.modules only while
one of its functions runs, by one thread at a time (CODE_LOCK): sys.modules is the process's,
and a leaderboard's code may keep state of its own (a KernelBench problem's shape constants,
shrunk while a small case's input is made) or draw from torch's global generator.
"""

from __future__ import annotations

import importlib
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..spec.task import TaskError, TaskSpec
from .calibration import SharedCalibration
from .hardware import hardware_note, this_device
from .staging import module_name, stage

REQUIRED_FUNCTIONS = ("generate_input", "ref_kernel", "check_implementation")
# The leaderboard's frames shown when its code raises: the innermost ones matter most.
SHOWN_FRAMES = 6
# Held while any leaderboard's code runs in this process (a batch judges several candidates'
# correctness calls from threads side by side; their inputs, references and checks take turns).
CODE_LOCK = threading.RLock()


class LeaderboardError(Exception):
    """The leaderboard's own code (generate_input, ref_kernel, check_implementation) raised.

    The message shows where, in the leaderboard's own files (not the harness's frames), and
    `original` is what raised, for decisions by type (out of memory, no CUDA)."""

    def __init__(self, function: str, original: BaseException, where: str):
        self.function = function
        self.original = original
        what = traceback.format_exception_only(original)[-1].strip()
        super().__init__(f"{function} raised {what}" + (f"\n{where}" if where else ""))


class LeaderboardModules:
    def __init__(self, task: TaskSpec):
        self.task = task
        self.folder: Path = stage(task, submission=None, prefix="kb-judge-")
        self.names = [module_name(f.name) for f in task.files if f.name.endswith(".py")]
        self._modules: dict[str, Any] = {}
        # Which inputs ref_kernel writes on a case's own input, by case (None: it raised);
        # judge/core.py asks once per case where the inputs are too large to copy twice.
        self.reference_writes: dict[str, set[str] | None] = {}
        # Whether a case's input is large enough to be judged frugally, by case, once one
        # judge has made it (a batch checks only the others ahead, beside other candidates).
        self.frugal_cases: dict[str, bool] = {}
        # The outbound window a case's passed output needed, by case: a worker's window is
        # grown to it before a call of that case (judge/core.py, _expect_reply).
        self.reply_bytes: dict[str, int] = {}
        # How many calls a case's last timing made (warm-up included), by case: a batch makes
        # that many of a case's inputs ahead of its timing (judge/core.py, generate_ahead).
        self.timed_calls: dict[str, int] = {}
        self.input_bytes: dict[str, int] = {}  # a case's input, by case, as its check made it
        # The harness's cost as the reference's workers calibrated it, for candidates' workers.
        self.calibration = SharedCalibration()
        with self.active():
            try:
                self.reference = importlib.import_module("reference")
            except ImportError as exc:  # AMD's aiter, say: named as what the hardware needs
                note = hardware_note([str(exc)], (), this_device())
                why = f" ({note})" if note else ""
                raise TaskError(task.path, f"cannot import reference.py: {exc}{why}") from exc
        missing = [n for n in REQUIRED_FUNCTIONS if not callable(getattr(self.reference, n, None))]
        if missing:
            raise TaskError(task.path, f"reference.py lacks {', '.join(missing)}")

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make this leaderboard's modules the importable ones for the duration (this thread
        alone runs leaderboard code meanwhile)."""
        with CODE_LOCK:
            saved = {name: sys.modules.pop(name) for name in self.names if name in sys.modules}
            sys.modules.update(self._modules)
            sys.path.insert(0, str(self.folder))
            try:
                yield
            finally:
                sys.path.remove(str(self.folder))
                for name in self.names:
                    if name in sys.modules:
                        self._modules[name] = sys.modules.pop(name)
                sys.modules.update(saved)

    def trusted_modules(self) -> dict[str, Any]:
        """The leaderboard's own modules by import name, for pickling its classes by name."""
        return dict(self._modules)

    def generate_input(self, spec: dict[str, Any]) -> Any:
        return self._call("generate_input", lambda f: f(**spec))

    def ref_kernel(self, data: Any) -> Any:
        return self._call("ref_kernel", lambda f: f(data))

    def _call(self, function: str, call: Callable[[Callable[..., Any]], Any]) -> Any:
        """One of reference.py's functions; what it raises becomes a LeaderboardError that
        points at the leaderboard's own file and line."""
        with self.active():
            try:
                return call(getattr(self.reference, function))
            except Exception as exc:
                raise LeaderboardError(function, exc, self.where(exc)) from exc

    def where(self, exc: BaseException) -> str:
        """The traceback's frames in this leaderboard's files, as paths in the repository."""
        sources = {
            (self.folder / name).resolve(): _shown(path) for name, path in self.task.support_files()
        }
        lines = []
        for frame in traceback.extract_tb(exc.__traceback__):
            staged = Path(frame.filename).resolve()
            if not staged.is_relative_to(self.folder.resolve()):
                continue
            shown = sources.get(staged, self.task.root / staged.name)
            code = f": {frame.line.strip()}" if frame.line else ""
            lines.append(f"  {shown}:{frame.lineno} in {frame.name}{code}")
        return "\n".join(lines[-SHOWN_FRAMES:])

    def check(self, data: Any, output: Any) -> tuple[bool, str]:
        """check_implementation, normalised: both (ok, message) and the older '' == ok form."""
        verdict = self._call("check_implementation", lambda f: f(data, output))
        if isinstance(verdict, tuple) and len(verdict) == 2:
            ok, message = verdict
            return bool(ok), str(message or "")
        if isinstance(verdict, str):
            return verdict == "", verdict
        if isinstance(verdict, bool):
            return verdict, "" if verdict else "check_implementation returned False"
        raise TypeError(
            f"check_implementation returned {type(verdict).__name__}, expected (bool, str)"
        )


def _shown(path: Path) -> Path:
    """A leaderboard file as a participant finds it: relative to the working folder if inside."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path
