"""Which judge runs the server's jobs: the batch judge on this host's GPUs, or one judge actor per
GPU of a Ray cluster. Both stream one record per candidate in the order given."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..batch.candidates import Candidate
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


class LocalJudge(RepositoryJudge):
    """The batch judge on this host: every GPU, one CPU judge on a machine without one."""

    description = "this host"

    def __call__(
        self, leaderboard: str, candidates: Sequence[Candidate], mode: str
    ) -> Iterator[dict[str, Any]]:
        from ..batch import judge_many

        return judge_many(leaderboard, candidates, mode=mode, root=self.root)

    def capacity(self) -> dict[str, int]:
        gpus = local_gpu_count()
        return {"gpus": gpus, "judges": max(gpus, 1)}


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
