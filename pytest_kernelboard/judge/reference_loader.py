"""A leaderboard's own modules (reference.py, task.py, utils.py), imported into the judge.

These are trusted repository files. Many leaderboards use the same module names, so each
leaderboard's modules live in a private table and are swapped into sys.modules only while
one of its functions runs.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..spec.task import TaskError, TaskSpec
from .staging import module_name, stage

REQUIRED_FUNCTIONS = ("generate_input", "ref_kernel", "check_implementation")


class LeaderboardModules:
    def __init__(self, task: TaskSpec):
        self.task = task
        self.folder: Path = stage(task, submission=None, prefix="kb-judge-")
        self.names = [module_name(f.name) for f in task.files if f.name.endswith(".py")]
        self._modules: dict[str, Any] = {}
        with self.active():
            try:
                self.reference = importlib.import_module("reference")
            except ImportError as exc:
                raise TaskError(task.path, f"cannot import reference.py: {exc}") from exc
        missing = [n for n in REQUIRED_FUNCTIONS if not callable(getattr(self.reference, n, None))]
        if missing:
            raise TaskError(task.path, f"reference.py lacks {', '.join(missing)}")

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make this leaderboard's modules the importable ones for the duration."""
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
        with self.active():
            return self.reference.generate_input(**spec)

    def ref_kernel(self, data: Any) -> Any:
        with self.active():
            return self.reference.ref_kernel(data)

    def check(self, data: Any, output: Any) -> tuple[bool, str]:
        """check_implementation, normalised: both (ok, message) and the older '' == ok form."""
        with self.active():
            verdict = self.reference.check_implementation(data, output)
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
