"""A batch judge starts its zygote before it imports torch itself, so that the zygote's torch
import runs beside its own (supervisor/launch.py, prestart_zygote), and its first worker is
forked from that zygote, not from a second one; a judge that keeps a timing core keeps the
zygote off it too (judge/timing_core.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, SANDBOX_INSTALL, missing_system_tool

from pytest_kernelboard.supervisor import sandbox

REPO = Path(__file__).resolve().parent.parent

# In a fresh Python (torch not yet imported): a batch judged on the CPU, noting whether torch
# was imported when each bwrap started, and the zygotes the judge had at the end.
JUDGE = """
import json, subprocess, sys
from pathlib import Path

started = []
real_init = subprocess.Popen.__init__

def noting(self, command, *args, **kwargs):
    if str(command[0]).endswith("bwrap"):
        started.append({"torch": "torch" in sys.modules, "zygote": "worker.zygote" in str(command)})
    real_init(self, command, *args, **kwargs)

subprocess.Popen.__init__ = noting
from pytest_kernelboard.batch import Candidate, judge_many
from pytest_kernelboard.supervisor import forked

good = "def custom_kernel(data):\\n    x, out = data\\n    return out.copy_(x + 1)\\n"
gpus = [int(g) for g in sys.argv[2].split(",") if g]
records = list(judge_many("addone", [Candidate("a", good), Candidate("b", good)],
                          mode="benchmark", root=Path(sys.argv[1]), gpus=gpus))
zygotes = [z for z in forked._zygotes.values() if z is not None]
print(json.dumps({"started": started, "zygotes": len(zygotes),
                  "statuses": [r["status"] for r in records]}))
"""


def needs_sandbox() -> None:
    if (reason := sandbox.probe()) is not None:
        missing_system_tool(
            f"needs the worker sandbox, unavailable here: {reason}", SANDBOX_INSTALL
        )


def has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.parametrize("gpus", ["", "0"], ids=["cpu", "gpu0"])
def test_the_zygote_starts_before_the_judge_imports_torch_and_is_the_one_used(tmp_path, gpus):
    needs_sandbox()
    if gpus and not has_cuda():
        pytest.skip("needs a GPU: judged on GPU 0, with the timing core kept")
    import shutil

    root = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", root)
    env = {**os.environ, "KERNELBOARD_SANDBOX": "require", "KERNELBOARD_ZYGOTE": "auto"}
    done = subprocess.run(
        [sys.executable, "-c", JUDGE, str(root), gpus],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    zygotes = [start for start in seen["started"] if start["zygote"]]
    assert zygotes == [{"torch": False, "zygote": True}], seen  # one, started before torch
    assert seen["zygotes"] == 1
    assert seen["statuses"] == ["passed", "passed"]


def test_a_judge_keeping_a_timing_core_keeps_its_zygote_off_it(monkeypatch):
    needs_sandbox()
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs: one kept, one for the rest")
    from pytest_kernelboard.judge import timing_core
    from pytest_kernelboard.supervisor import forked, launch

    monkeypatch.setenv("KERNELBOARD_SANDBOX", "require")
    monkeypatch.setenv("KERNELBOARD_ZYGOTE", "auto")
    kept = timing_core.TimingCore(0, frozenset({0}))
    monkeypatch.setattr(timing_core, "choose_cores", lambda cpus, judges: [kept])
    launch.prestart_zygote()
    assert forked.zygote_pids()  # bwrap at least; the zygote's Python may not have started yet
    with timing_core.kept_here() as core:
        assert core == kept and 0 not in os.sched_getaffinity(0)
        deadline = time.monotonic() + 60
        while not any(b"worker.zygote" in cmdline(pid) for pid in forked.zygote_pids()):
            assert time.monotonic() < deadline, "the zygote's Python never started"
            time.sleep(0.05)
        # bwrap's children and the zygote, forked before or after the pin: none on the core.
        assert all(0 not in os.sched_getaffinity(pid) for pid in forked.zygote_pids())


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
