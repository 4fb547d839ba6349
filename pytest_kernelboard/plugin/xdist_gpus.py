"""One GPU per pytest-xdist worker: `pytest -n <GPUs>` judges single-GPU cases side by side.

Each xdist worker (PYTEST_XDIST_WORKER = gw0, gw1, ...) sets CUDA_VISIBLE_DEVICES to one of
the GPUs visible to the run, before anything in it touches CUDA; its submission workers inherit
it. Two timed cases then never share a GPU as long as there are no more xdist workers than GPUs
(with more, GPUs are shared round-robin and a warning says timings will interfere).
Multi-GPU cases need all their GPUs in one process: run them without -n.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path


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


def xdist_worker_index(environ: MutableMapping[str, str]) -> int | None:
    worker = environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def pin_xdist_worker(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Pin this xdist worker to one GPU; returns a warning when GPUs have to be shared."""
    environ = os.environ if environ is None else environ
    index = xdist_worker_index(environ)
    if index is None:
        return None
    gpus = visible_gpus(environ)
    if not gpus:
        return None
    environ["CUDA_VISIBLE_DEVICES"] = gpus[index % len(gpus)]
    workers = int(environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if workers > len(gpus):
        return (
            f"{workers} xdist workers share {len(gpus)} GPU(s): timings of cases on a shared GPU "
            f"interfere; use -n {len(gpus)}"
        )
    return None


def worker_results_path(path: Path, environ: MutableMapping[str, str] | None = None) -> Path:
    """Each xdist worker writes its own results file (run.json -> run.gw0.json), never one
    file from several processes."""
    environ = os.environ if environ is None else environ
    worker = environ.get("PYTEST_XDIST_WORKER")
    return path.with_name(f"{path.stem}.{worker}{path.suffix}") if worker else path
