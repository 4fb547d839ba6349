"""`pytest -n <GPUs>`: one GPU per xdist worker, and multi-GPU cases on leased sets of them.

Each xdist worker (gw0, gw1, ...) has a GPU of its own: gw k takes the k-th of the GPUs visible
to the run (round-robin when there are more workers than GPUs, with a warning that timings then
interfere). Before anything in it touches CUDA it sets CUDA_VISIBLE_DEVICES to its own GPU
first, then the others in host order (`gpu_lease.process_view`), so its single-GPU cases run on
cuda:0 as before, and a case of W ranks runs on cuda:0..W-1: its own GPU and the lowest-numbered
others. Submission workers and ranks inherit that numbering.

Which GPUs an item may use is leased (`judge/gpu_lease.py`): the controller makes one folder of
lock files for the session and hands it, with the host's GPU list, to every worker through
xdist's `workerinput`; every item of a worker leases its own GPU, and a multi-GPU case the whole
set, for its setup, call and teardown (`items.ItemLeases`). Without -n nothing is pinned or
leased.

Which worker a session is comes from its own config (xdist's `workerinput`), never from the
PYTEST_XDIST_WORKER variable: a pytest that a test starts inside an xdist worker inherits that
variable without being a worker, and must write the results file it was asked for.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..judge import gpu_lease
from ..supervisor import scratch
from .items import ItemLeases

# The key of xdist's workerinput under which the controller hands out the lease folder.
LEASES_KEY = "kernelboard_gpu_leases"
GPUS_MARKER = "gpus(n): the item runs on n GPUs; under pytest -n it leases that many"


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
    worker: XdistWorker | None,
    environ: MutableMapping[str, str] | None = None,
    gpus: Sequence[str] | None = None,
) -> str | None:
    """Number this xdist worker's GPUs with its own first; returns a warning when GPUs have to
    be shared. gpus: the host's GPUs in host order (default: those `environ` shows)."""
    environ = os.environ if environ is None else environ
    if worker is None or worker.index is None:
        return None
    gpus = list(gpus) if gpus is not None else visible_gpus(environ)
    if not gpus:
        return None
    environ["CUDA_VISIBLE_DEVICES"] = ",".join(
        gpu_lease.process_view(gpus, worker.index % len(gpus))
    )
    if worker.count > len(gpus):
        return (
            f"{worker.count} xdist workers share {len(gpus)} GPU(s): timings of cases on a "
            f"shared GPU interfere; use -n {len(gpus)}"
        )
    return None


def configure(config: pytest.Config) -> str | None:
    """Set up this process's side before anything touches CUDA: the controller hands out a
    lease folder, a worker pins its GPUs and leases them for its items. Returns a warning
    when GPUs have to be shared."""
    config.addinivalue_line("markers", GPUS_MARKER)
    worker = xdist_worker(config)
    if worker is None:
        config.pluginmanager.register(LeaseFolder(), "kernelboard-gpu-lease-folder")
        return None
    shared: dict[str, Any] | None = config.workerinput.get(LEASES_KEY)  # type: ignore[attr-defined]
    warning = pin_xdist_worker(worker, gpus=shared["gpus"] if shared else None)
    try:
        leases = worker_leases(worker, shared)
    except ValueError as exc:  # a bad KERNELBOARD_GPU_LEASE_TIMEOUT_S
        raise pytest.UsageError(str(exc)) from None
    if leases is not None:
        config.pluginmanager.register(ItemLeases(leases), "kernelboard-gpu-leases")
    return warning


def worker_leases(worker: XdistWorker, shared: dict[str, Any] | None) -> gpu_lease.GpuLeases | None:
    """This worker's side of the session's lease folder; None where the controller made none
    (no GPUs) or the worker has no GPU index."""
    if not shared or worker.index is None or not shared.get("gpus"):
        return None
    gpus = list(shared["gpus"])
    return gpu_lease.GpuLeases(
        Path(shared["folder"]),
        gpus,
        worker.index % len(gpus),
        holder=worker.worker_id,
        timeout_s=gpu_lease.timeout_from_environment(),
    )


class LeaseFolder:
    """The controller's side: one folder of lock files for the session's workers, removed at
    the end. Made when xdist configures its first worker, and only on a host with GPUs: a run
    without -n makes none (and asks NVML nothing)."""

    def __init__(self) -> None:
        self.gpus: list[str] | None = None
        self.folder: Path | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.gpus is None:
            self.gpus = visible_gpus(os.environ)
        if not self.gpus:
            return
        if self.folder is None:
            self.folder = scratch.make_folder("kb-gpu-leases-")
        node.workerinput[LEASES_KEY] = {"folder": str(self.folder), "gpus": self.gpus}

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def worker_results_path(path: Path, worker: XdistWorker | None) -> Path:
    """Each xdist worker writes its own results file (run.json -> run.gw0.json), never one
    file from several processes."""
    return path.with_name(f"{path.stem}.{worker.worker_id}{path.suffix}") if worker else path
