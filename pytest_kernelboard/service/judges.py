"""Which judge runs the server's jobs: the batch judge on this host's GPUs, or one judge actor per
GPU of a Ray cluster. Both stream one record per candidate in the order given."""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..batch.candidates import Candidate
from ..batch.fanout import GpuJudges
from ..batch.records import DEFAULT_EXCESSIVE_SPEEDUP
from ..spec.discovery import load_catalog, reload_catalog


class Judge(Protocol):
    """What the job runner needs of a judge."""

    description: str  # for the start-up line and /v1/health

    def __call__(
        self, leaderboard: str, candidates: Sequence[Candidate], mode: str
    ) -> Iterator[dict[str, Any]]:
        """One record per candidate, in the order given, as each is judged."""
        ...

    def knows(self, leaderboard: str) -> bool:
        """Whether the leaderboard exists (else the job is answered 404)."""
        ...

    def capacity(self) -> dict[str, int]:
        """{"gpus": ..., "judges": ...} for /v1/health."""
        ...

    def close(self) -> None: ...


class RepositoryJudge:
    """The common part: leaderboards are those of one repository checkout."""

    description = "judge"

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def knows(self, leaderboard: str) -> bool:
        # A leaderboard added while the server runs is found on the next job that names it.
        for load in (load_catalog, reload_catalog):
            catalog = load(self.root)
            if leaderboard in catalog.tasks or leaderboard in catalog.errors:
                return True
        return False

    def close(self) -> None:
        pass


WARM_FOR_S = 3600.0  # how long a set of warm judges (and its reference timing) serves jobs


class LocalJudge(RepositoryJudge):
    """The batch judge on this host: one judge process per GPU (one CPU judge on a machine
    without one), kept warm between jobs for the last leaderboard and mode judged. A job
    finds the judges' processes, workers and CUDA contexts started and the reference timed:
    a training loop's every step would otherwise pay for them again (on an H200, 10.8 to 13.9 s
    before a batch's first record). Another leaderboard or mode, a change to the
    leaderboard's files, or a judge that died starts a fresh set; so does an hour: the
    reference is timed again, as the GPU's state may have moved since."""

    description = "this host"

    def __init__(self, root: Path, max_age_s: float = WARM_FOR_S) -> None:
        super().__init__(root)
        self.max_age_s = max_age_s
        self._warm: tuple[tuple[str, str, str], GpuJudges] | None = None

    def __call__(
        self, leaderboard: str, candidates: Sequence[Candidate], mode: str
    ) -> Iterator[dict[str, Any]]:
        return self.judges_for(leaderboard, mode).judge(candidates)

    def judges_for(self, leaderboard: str, mode: str) -> GpuJudges:
        """The warm judges of this leaderboard and mode, started where there are none."""
        from ..batch.judge import check_mode, find_task, gpu_groups, visible_gpus

        check_mode(mode)
        task, root = find_task(leaderboard, self.root)  # an unknown one is refused here
        key = (leaderboard, mode, files_fingerprint(task.root))
        if self._warm is not None:
            warm_key, judges = self._warm
            young = time.monotonic() - judges.started_at < self.max_age_s
            if warm_key == key and judges.alive() and young:
                return judges
            self._warm = None
            judges.close()
        devices = visible_gpus()
        groups = gpu_groups(task, devices) if devices else [[]]
        judges = GpuJudges(leaderboard, mode, root, groups, DEFAULT_EXCESSIVE_SPEEDUP)
        self._warm = (key, judges)
        return judges

    def capacity(self) -> dict[str, int]:
        gpus = local_gpu_count()
        return {"gpus": gpus, "judges": max(gpus, 1)}

    def close(self) -> None:
        if self._warm is not None:
            self._warm[1].close()
            self._warm = None


def files_fingerprint(folder: Path) -> str:
    """What the leaderboard's files are now (names, sizes, modification times): a warm judge
    imported them when it started, so a change means a fresh one."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            stat = path.stat()
            digest.update(
                f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode()
            )
    return digest.hexdigest()


class RayJudge(RepositoryJudge):
    """One judge actor per GPU of a Ray cluster (batch/ray_judges.py), kept across jobs."""

    def __init__(self, root: Path, address: str) -> None:
        super().__init__(root)
        from ..batch.ray_judges import RayJudges

        self.pool = RayJudges(address, root=self.root)
        self.description = f"Ray cluster at {address}"

    def __call__(
        self, leaderboard: str, candidates: Sequence[Candidate], mode: str
    ) -> Iterator[dict[str, Any]]:
        return self.pool.judge(leaderboard, candidates, mode=mode)

    def capacity(self) -> dict[str, int]:
        return self.pool.capacity()

    def close(self) -> None:
        self.pool.close()


@functools.cache
def local_gpu_count() -> int:
    """CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies); 0 on a CPU build."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0
