"""The batch judge across a Ray cluster: one judge actor per GPU that Ray finds on its nodes.

Why Ray: the training stacks that call a reward function (verl, OpenRLHF, NeMo-RL, SkyRL) already
run on it, so a training run's own cluster can judge, and adding a machine is `ray start
--address=HEAD:6379` on it. Each actor holds one GPU (`num_gpus=1`; Ray sets its
CUDA_VISIBLE_DEVICES) and runs `judge_many` on its share of a batch; on a cluster without GPUs
there is one actor per `cpus_per_judge` CPUs, each a CPU judge. A batch is dealt round-robin
(candidate i to actor i mod J), every actor streams its records back as it judges them, and the
records are yielded in the order given. An actor that dies (its node was lost) hands its
unjudged candidates to another; a node added to the cluster gets actors at the next batch.

Every node needs this package installed and the repository at the same path as the caller's
(a shared filesystem, or the same checkout); an actor on a node without it says so and is left
out. The caller's KERNELBOARD_SANDBOX travels with the actors.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import KernelboardError
from ..spec.discovery import find_repo_root
from ..supervisor.sandbox import POLICY_VARIABLE

CPUS_PER_JUDGE_VARIABLE = "KERNELBOARD_RAY_CPUS_PER_JUDGE"
DEFAULT_CPUS_PER_JUDGE = 2  # the actor (the judge) and its worker process
ALL_START_S = 60.0  # at start-up, how long to wait for every actor (one may find no room)
START_TIMEOUT_S = 600.0  # how long to wait for at least one
_CARRIED_ENVIRONMENT = (POLICY_VARIABLE,)


class RayJudgesError(KernelboardError, RuntimeError):
    """Ray cannot judge: it is not installed, the cluster has no room, every actor died."""


def judge_many_on_ray(
    address: str,
    leaderboard: str,
    candidates: Iterable[Any],
    *,
    mode: str = "test",
    root: Path | None = None,
    cpus_per_judge: int | None = None,
) -> Iterator[dict[str, Any]]:
    """`judge_many` on every GPU of the Ray cluster at `address` ('local' starts one here,
    'auto' finds a running one): one record per candidate, in the order given, streamed. The
    actors live for this call; `RayJudges` keeps them across calls."""
    judges = RayJudges(address, root=root, cpus_per_judge=cpus_per_judge)
    try:
        yield from judges.judge(leaderboard, list(candidates), mode=mode)
    finally:
        judges.close()


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayJudgesError(
            "Ray is not installed here: pip install 'pytest-kernelboard[ray]'"
        ) from None
    return ray


class JudgeActor:
    """One judge on one GPU (or `cpus_per_judge` CPUs) of a Ray node; Ray makes it an actor."""

    def __init__(self, root: str, environment: dict[str, str]) -> None:
        os.environ.update(environment)
        self.root = Path(root)

    def where(self) -> dict[str, Any]:
        """Which node and GPUs this actor has, and why it cannot judge (None when it can)."""
        import ray

        problem = None
        if not (self.root / "leaderboards").is_dir():
            problem = (
                f"no repository at {self.root} on this node: check it out at the same path "
                "(or share the filesystem)"
            )
        return {"node": socket.gethostname(), "gpus": ray.get_gpu_ids(), "problem": problem}

    def judge(
        self, leaderboard: str, items: list[tuple[str, str, str]], mode: str
    ) -> Iterator[dict[str, Any]]:
        import ray

        from . import Candidate, judge_many

        # Ray made this actor's GPU the only one it sees: index 0 is it.
        gpus = [0] if ray.get_gpu_ids() else None
        candidates = [Candidate(id=i, source=s, lang=lang) for i, s, lang in items]
        # A plain loop, not `yield from`: Ray sends values into the generator it streams.
        records = judge_many(leaderboard, candidates, mode=mode, root=self.root, gpus=gpus)
        for record in records:  # noqa: UP028
            yield record


@dataclass
class _Share:
    """One actor's stream over some of a batch's candidates (their indices, in order)."""

    actor: Any
    indices: list[int]
    stream: Any
    position: int = 0


@dataclass
class _Member:
    actor: Any
    ready: Any  # the reference to its `where()`; resolved once it started
    node: str = "?"
    started: bool = False


class RayJudges:
    """Judge actors on a Ray cluster, kept across batches (`kernelboard serve --ray`)."""

    def __init__(
        self,
        address: str,
        *,
        root: Path | None = None,
        cpus_per_judge: int | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.ray = _ray()
        self.address = address
        found = root or find_repo_root(Path.cwd())
        if found is None:
            raise RayJudgesError(f"no leaderboards/ folder at or above {Path.cwd()}: pass root")
        self.root = found.resolve()
        self.cpus_per_judge = cpus_per_judge or int(
            os.environ.get(CPUS_PER_JUDGE_VARIABLE, DEFAULT_CPUS_PER_JUDGE)
        )
        self._owns_ray = not self.ray.is_initialized()
        if self._owns_ray:
            self.ray.init(
                address=address,
                include_dashboard=False,
                logging_level="WARNING",
                log_to_driver=True,
            )
        self._members: list[_Member] = []
        self._refused = 0  # actors whose node cannot judge: not started again
        self._environment = {k: os.environ[k] for k in _CARRIED_ENVIRONMENT if k in os.environ}
        self._grow()
        self._await_started(min(ALL_START_S, start_timeout_s), every=True)
        if not any(member.started for member in self._members):
            self._await_started(start_timeout_s, every=False)
        if not any(member.started for member in self._members):
            self.close()
            raise RayJudgesError(
                f"no judge actor started on the Ray cluster at {address} within "
                f"{start_timeout_s:g} s ({self._resources_line()})"
            )

    # -- the pool ----------------------------------------------------------------------------

    def capacity(self) -> dict[str, int]:
        gpus = int(self.ray.cluster_resources().get("GPU", 0))
        return {"gpus": gpus, "judges": sum(member.started for member in self._members)}

    def _target(self) -> tuple[int, dict[str, float]]:
        """How many actors the cluster holds now, and each one's resources."""
        resources = self.ray.cluster_resources()
        gpus = int(resources.get("GPU", 0))
        if gpus:
            return gpus, {"num_gpus": 1, "num_cpus": 1}
        cpus = int(resources.get("CPU", 0))
        return max(1, cpus // self.cpus_per_judge), {"num_cpus": self.cpus_per_judge}

    def _grow(self) -> None:
        """Start actors for GPUs (or CPUs) the cluster gained since the last batch."""
        target, options = self._target()
        remote = self.ray.remote(**options)(JudgeActor)
        for _ in range(target - len(self._members) - self._refused):
            actor = remote.remote(str(self.root), self._environment)
            self._members.append(_Member(actor=actor, ready=actor.where.remote()))

    def _await_started(self, timeout_s: float, *, every: bool) -> None:
        """Take in the actors that started (all of them, up to timeout_s, when `every`)."""
        waiting = {member.ready: member for member in self._members if not member.started}
        if not waiting:
            return
        deadline = time.monotonic() + timeout_s
        while waiting:
            left = max(0.0, deadline - time.monotonic())
            done, _ = self.ray.wait(
                list(waiting), num_returns=len(waiting) if every else 1, timeout=left
            )
            if not done:
                return
            for ref in done:
                member = waiting.pop(ref)
                self._take_in(member, ref)
            if not every or time.monotonic() >= deadline:
                return

    def _take_in(self, member: _Member, ref: Any) -> None:
        try:
            where = self.ray.get(ref)
        except self.ray.exceptions.RayError as exc:
            self._drop(member, f"did not start: {_first_line(exc)}")
            return
        member.node = where["node"]
        if where["problem"] is not None:
            self._refused += 1
            self._drop(member, where["problem"])
            return
        member.started = True

    def _drop(self, member: _Member, why: str) -> None:
        print(f"kernelboard: the judge actor on {member.node} is left out: {why}", file=sys.stderr)
        self._members.remove(member)
        try:
            self.ray.kill(member.actor)
        except Exception:  # noqa: BLE001 (it is gone already)
            pass

    def _resources_line(self) -> str:
        resources = self.ray.cluster_resources()
        return f"GPUs {resources.get('GPU', 0):g}, CPUs {resources.get('CPU', 0):g}"

    def close(self) -> None:
        for member in self._members:
            try:
                self.ray.kill(member.actor)
            except Exception:  # noqa: BLE001 (closing what is already gone)
                pass
        self._members = []
        if self._owns_ray and self.ray.is_initialized():
            self.ray.shutdown()

    # -- a batch -----------------------------------------------------------------------------

    def judge(
        self, leaderboard: str, candidates: Sequence[Any], *, mode: str = "test"
    ) -> Iterator[dict[str, Any]]:
        """One record per candidate, in the order given, as the actors stream them back."""
        items = [(c.id, c.source, c.lang) for c in candidates]
        if not items:
            return
        self._grow()
        self._await_started(0.0, every=True)
        judges = [member for member in self._members if member.started]
        if not judges:
            self._await_started(START_TIMEOUT_S, every=False)
            judges = [member for member in self._members if member.started]
        if not judges:
            raise RayJudgesError(f"no judge actor is alive on the Ray cluster at {self.address}")
        judges = judges[: len(items)]
        owner: dict[int, _Share] = {}
        shares = []
        for k, member in enumerate(judges):
            indices = list(range(k, len(items), len(judges)))
            shares.append(self._start_share(member, indices, items, leaderboard, mode, owner))
        try:
            for i in range(len(items)):
                while True:
                    share = owner[i]
                    try:
                        record = self.ray.get(next(share.stream))
                    except self.ray.exceptions.RayActorError as exc:
                        shares.append(self._reassign(share, exc, items, leaderboard, mode, owner))
                        continue
                    except StopIteration:
                        raise RayJudgesError(
                            f"the judge actor on {self._node(share)} stopped before "
                            f"candidate {items[i][0]!r}"
                        ) from None
                    except self.ray.exceptions.RayTaskError as exc:
                        cause = getattr(exc, "cause", None)
                        if isinstance(cause, KernelboardError):
                            raise cause from None
                        raise RayJudgesError(
                            f"the judge on {self._node(share)} failed: {_first_line(exc)}"
                        ) from None
                    share.position += 1
                    break
                yield record  # noqa: UP028
        finally:
            for share in shares:
                try:
                    self.ray.cancel(share.stream)
                except Exception:  # noqa: BLE001 (a stream that finished cannot be cancelled)
                    pass

    def _start_share(
        self,
        member: _Member,
        indices: list[int],
        items: list[tuple[str, str, str]],
        leaderboard: str,
        mode: str,
        owner: dict[int, _Share],
    ) -> _Share:
        batch = [items[i] for i in indices]
        stream = member.actor.judge.options(num_returns="streaming").remote(
            leaderboard, batch, mode
        )
        share = _Share(actor=member.actor, indices=indices, stream=stream)
        for i in indices:
            owner[i] = share
        return share

    def _reassign(
        self,
        share: _Share,
        exc: Exception,
        items: list[tuple[str, str, str]],
        leaderboard: str,
        mode: str,
        owner: dict[int, _Share],
    ) -> _Share:
        """The share's actor died: its candidates not yet judged go to another actor."""
        dead = next((m for m in self._members if m.actor is share.actor), None)
        if dead is not None:
            self._drop(dead, f"died: {_first_line(exc)}")
        self._grow()  # a replacement where the cluster still has room
        self._await_started(0.0, every=True)
        if not any(member.started for member in self._members):
            self._await_started(START_TIMEOUT_S, every=False)
        alive = [member for member in self._members if member.started]
        if not alive:
            raise RayJudgesError(
                f"every judge actor on the Ray cluster at {self.address} died "
                f"({self._resources_line()})"
            )
        # The least loaded one: it runs the share after the one it is judging now.
        counts = {id(member.actor): 0 for member in alive}
        for held in {id(s): s for s in owner.values()}.values():
            if id(held.actor) in counts:
                counts[id(held.actor)] += len(held.indices) - held.position
        target = min(alive, key=lambda member: counts[id(member.actor)])
        rest = share.indices[share.position :]
        return self._start_share(target, rest, items, leaderboard, mode, owner)

    def _node(self, share: _Share) -> str:
        member = next((m for m in self._members if m.actor is share.actor), None)
        return member.node if member is not None else "a lost node"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
