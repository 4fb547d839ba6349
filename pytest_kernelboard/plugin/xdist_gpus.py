"""One GPU per pytest-xdist worker: `pytest -n <GPUs>` judges single-GPU cases side by side.

Each xdist worker (gw0, gw1, ...) sets CUDA_VISIBLE_DEVICES to one of
the GPUs visible to the run, before anything in it touches CUDA; its submission workers inherit
it. Two timed cases then never share a GPU as long as there are no more xdist workers than GPUs
(with more, GPUs are shared round-robin and a warning says timings will interfere).
Multi-GPU cases need all their GPUs in one process: run them without -n.

Which worker a session is comes from its own config (xdist's `workerinput`), never from the
PYTEST_XDIST_WORKER variable: a pytest that a test starts inside an xdist worker inherits that
variable without being a worker, and must write the results file it was asked for.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def visible_gpus(environ: MutableMapping[str, str]) -> list[str]:
    """The GPUs this run may use: CUDA_VISIBLE_DEVICES's entries, else every GPU NVML sees."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [entry.strip() for entry in listed.split(",") if entry.strip()]
    try:  # NVML counts GPUs without creating a CUDA context in this process
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(index) for index in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return []


@dataclass(frozen=True)
class XdistWorker:
    """This session's place among pytest-xdist's workers."""

    worker_id: str  # "gw0", "gw1", ...
    count: int

    @property
    def index(self) -> int | None:
        digits = self.worker_id[2:]
        return int(digits) if self.worker_id.startswith("gw") and digits.isdigit() else None


def xdist_worker(config: Any) -> XdistWorker | None:
    """The worker this session is, or None where it is not an xdist worker."""
    workerinput = getattr(config, "workerinput", None)
    if not workerinput:
        return None
    return XdistWorker(workerinput["workerid"], int(workerinput.get("workercount") or 1))


def pin_xdist_worker(
    worker: XdistWorker | None, environ: MutableMapping[str, str] | None = None
) -> str | None:
    """Pin this xdist worker to one GPU; returns a warning when GPUs have to be shared."""
    environ = os.environ if environ is None else environ
    if worker is None or worker.index is None:
        return None
    gpus = visible_gpus(environ)
    if not gpus:
        return None
    environ["CUDA_VISIBLE_DEVICES"] = gpus[worker.index % len(gpus)]
    if worker.count > len(gpus):
        return (
            f"{worker.count} xdist workers share {len(gpus)} GPU(s): timings of cases on a "
            f"shared GPU interfere; use -n {len(gpus)}"
        )
    return None


def worker_results_path(path: Path, worker: XdistWorker | None) -> Path:
    """Each xdist worker writes its own results file (run.json -> run.gw0.json), never one
    file from several processes."""
    return path.with_name(f"{path.stem}.{worker.worker_id}{path.suffix}") if worker else path
