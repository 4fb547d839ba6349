"""Large cases on a GPU: judged frugally, within two copies of inputs and outputs (H100 test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

FIXTURES = Path(__file__).parent / "fixtures"
N = 400_000_000  # addone: x and out float32 in (3.2 GB), out back (1.6 GB): frugal
GiB = 1 << 30


class DeviceMemory:
    """The GPU's used memory, sampled every 50 ms from NVML while a block runs: its peak."""

    def __init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        index = int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0])
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.pynvml = pynvml
        self.baseline = self.used()
        self.peak = self.baseline
        self._stop = threading.Event()

    def used(self) -> int:
        return int(self.pynvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def __enter__(self) -> DeviceMemory:
        def sample() -> None:
            while not self._stop.is_set():
                self.peak = max(self.peak, self.used())
                time.sleep(0.05)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def big_addone(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(FIXTURES / "core", repo)
    task = repo / "leaderboards" / "addone" / "task.yml"
    text = re.sub(r'"size": \d+', f'"size": {N}', task.read_text())
    task.write_text(text.replace("benchmark_timeout: 60", "benchmark_timeout: 120"))
    return repo


def working_memory(repo: Path) -> tuple[int, int, int]:
    """Inputs, outputs and the reference's working memory for one call and its check (its
    clone of x, its own out, isclose's temporaries), measured here and then handed back."""
    from pytest_kernelboard.judge.reference_loader import LeaderboardModules
    from pytest_kernelboard.spec.task import load_task

    modules = LeaderboardModules(load_task(repo / "leaderboards" / "addone" / "task.yml"))
    data = modules.generate_input({"size": N, "seed": 1, "flag": False, "label": "big"})
    torch.cuda.synchronize()
    inputs = sum(t.untyped_storage().nbytes() for t in data)
    output = modules.ref_kernel((data[0], torch.empty_like(data[0])))
    outputs = output.untyped_storage().nbytes()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    modules.check(data, output)
    working = torch.cuda.max_memory_allocated() - base
    del data, output
    torch.cuda.empty_cache()
    return inputs, outputs, working


def test_a_large_case_is_judged_within_two_copies_of_its_data(big_addone: Path) -> None:
    inputs, outputs, working = working_memory(big_addone)
    bound = 2 * (inputs + outputs) + working + 2 * GiB
    with DeviceMemory() as memory:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "submissions/addone/alice/submission.py", "-q"]
            + ["-p", "no:cacheprovider", "--kb-mode", "benchmark", "--kb-results", "out.json"],
            cwd=big_addone,
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    doc = json.loads((big_addone / "out.json").read_text())
    statuses = [c["status"] for e in doc["evaluations"] for c in e["cases"]]
    assert set(statuses) == {"passed"}, statuses
    peak = memory.peak - memory.baseline
    print(
        f"peak {peak / GiB:.2f} GiB; inputs {inputs / GiB:.2f}, outputs {outputs / GiB:.2f}, "
        f"working {working / GiB:.2f}, bound {bound / GiB:.2f} GiB"
    )
    assert peak <= bound
