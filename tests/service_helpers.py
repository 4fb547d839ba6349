"""Shared by the reward-service tests: a fake judge for pure HTTP behaviour, a server process."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_kernelboard.service.server import started_url
from pytest_kernelboard.supervisor import sandbox

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """An example file loaded by path, the way verl loads a custom reward function."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class FakeJudge:
    """Judges instantly (a source containing 'wrong' fails). `gate`, when given, holds every
    record until it is set, so tests can keep the queue full; `gates` holds the record of a
    candidate whose source is one of its keys until that gate is set."""

    description = "fake"

    def __init__(
        self,
        gate: threading.Event | None = None,
        gates: dict[str, threading.Event] | None = None,
    ) -> None:
        self.gate = gate
        self.gates = gates or {}
        self.calls: list[tuple[str, list[str], str]] = []

    def __call__(self, leaderboard: str, candidates: Sequence[Any], mode: str) -> Iterator[dict]:
        self.calls.append((leaderboard, [c.id for c in candidates], mode))
        for candidate in candidates:
            if self.gate is not None:
                self.gate.wait()
            if candidate.source in self.gates:
                self.gates[candidate.source].wait()
            ok = "wrong" not in candidate.source
            yield {
                "id": candidate.id,
                "status": "passed" if ok else "failed",
                "correct": ok,
                "speedup": None,
                "tied": None,
                "flags": [],
                "error_kind": None if ok else "incorrect_numerical",
                "message": "",
            }

    def knows(self, leaderboard: str) -> bool:
        return leaderboard == "addone"

    def capacity(self) -> dict[str, int]:
        return {"gpus": 0, "judges": 1}

    def close(self) -> None:
        pass


CORRECT = "def custom_kernel(data):\n    x, out = data\n    return out.copy_(x + 1)\n"
WRONG = "def custom_kernel(data):\n    x, out = data\n    out[:-1] = x[:-1] + 1\n    return out\n"
BROKEN = "def custom_kernel(data):\n    return undefined_name\n"


def sandbox_flags() -> list[str]:
    """What the rest of the suite does under the default policy: the sandbox where it runs."""
    if sandbox.policy() == "auto" and sandbox.probe() is not None:
        return ["--no-sandbox"]
    return []


class ServerProcess:
    """`kernelboard serve` in its own process group, so a test can SIGKILL all of it."""

    def __init__(self, root: Path, state: Path, *extra: str) -> None:
        command = [
            sys.executable,
            "-m",
            "pytest_kernelboard.cli",
            "serve",
            "--port",
            "0",
            "--root",
            str(root),
            "--state",
            str(state),
            *sandbox_flags(),
            *extra,
        ]
        self.log = open(state.parent / f"{state.name}-server.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
            cwd=root,
        )
        self.url = self._read_url()

    def _read_url(self) -> str:
        assert self.process.stdout is not None
        url = started_url(self.process.stdout)  # ends when the server exits without starting
        if url is None:
            self.kill()
            raise AssertionError(f"the server did not start; its log: {self.log.name}")
        return url

    def kill(self) -> None:
        """SIGKILL the server and every process it started (the judge's workers)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.log.close()

    def stop(self) -> int:
        os.killpg(self.process.pid, signal.SIGTERM)
        code = self.process.wait(timeout=60)
        self.log.close()
        return code


def call(
    url: str, method: str = "GET", body: Any = None, token: str | None = None, timeout: float = 300
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, decoded JSON) of one request."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())
