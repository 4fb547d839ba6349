"""Multi-GPU cases (`multi_gpu: true`): one worker per rank, judged and timed like one GPU.

For a case with `world_size: W` the judge starts W workers (through the same pool, hence the
same launcher, as single-GPU workers), pins worker r to GPU r, and has them join one process
group on loopback at a port the judge picks afresh for every group (nccl on GPUs, gloo on
CPU). GPU r is cuda:r as the judge numbers its GPUs: under `pytest -n` an xdist worker numbers
its own GPU first, and cuda:0..W-1 are the GPUs its item leased (plugin/xdist_gpus.py). Inputs
come from `generate_input(rank=r, **spec)` for every rank, in the judge. Every request goes to
all ranks at once; a rank that raises, dies or hangs fails the case, and all ranks are killed,
so the next case starts a fresh group.

Verification: GPU MODE's distributed references call their own `ref_kernel` (which runs
collectives) inside `check_implementation`. The judge therefore runs the reference on the same
inputs in a second, trusted rank group and, while it calls `check_implementation` for rank r,
`ref_kernel` returns that group's rank-r output. Every rank's output is checked.

Timing reuses measure.CaseTimer: its request function fans one timed call out to all ranks
(each starts with a barrier, worker/ranks.py); the call's time is the slowest rank's.

Communication ceiling: once a case is timed, trusted ranks (the reference's) time an all-reduce
of the bytes one rank reads, on the same GPUs and links, once per size and judge process: what
a communication-bound case cannot beat by much (stats/speed_of_light.py, docs/timing.md).
"""

from __future__ import annotations

import copy
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from ..channel.cloning import clone_data
from ..channel.protocol import ErrorKind, Op
from ..spec.cases import Case
from ..spec.task import TaskSpec
from ..stats.floors import clock_drop_flag, io_bytes
from ..stats.preroll import LAUNCH_ALLOWANCE_US, preroll_for
from ..stats.speed_of_light import COMM_KEY, comm_ceiling
from ..supervisor.client import Reply, WorkerProcess
from ..supervisor.failures import WorkerFailure, failure_of
from ..supervisor.pool import WorkerPool
from . import devices
from .core import STARTUP_TIMEOUT_S, CaseOutcome, Skip, SubmissionJudge, needs_cuda
from .measure import (
    CaseTimer,
    Measurement,
    Progress,
    TimingPlan,
)
from .reference_loader import LeaderboardModules
from .seeding import seed_everything
from .staging import stage

# gloo on CPU runs any world_size up to this many processes (CI has few cores).
CPU_MAX_WORLD_SIZE = 4
# A port taken between our probe and rank 0's bind is retried with a fresh one.
PORT_ATTEMPTS = 3
# A peer's death reaches a rank's collective (its sockets close) a moment before the process
# reads as exited; an error reply waits this long for a dying peer before it is the blame.
PEER_DEATH_GRACE_S = 0.5
# The communication ceiling's all-reduces: untimed ones first (NCCL sets up its channels and
# buffers for a size on its first calls), then the timed ones whose median is the ceiling.
CEILING_WARMUP = 3
CEILING_REPETITIONS = 10
# Ceilings measured in this judge process, by (backend, world_size, bytes): the host's links do
# not change within a run, so a size is measured once, whoever times a case of it next.
_ceilings: dict[tuple[str, int, int], dict[str, Any] | None] = {}


def free_port() -> int:
    """A loopback port the OS reports free now; never a fixed one, so runs cannot collide."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def backend_for(use_cuda: bool) -> str:
    return "nccl" if use_cuda else "gloo"


def ranks_available(use_cuda: bool) -> int:
    """How many ranks this machine can give a case: its visible GPUs, or the CPU cap."""
    if not use_cuda:
        return CPU_MAX_WORLD_SIZE
    import torch

    return torch.cuda.device_count()


def world_size_of(case: Case) -> int:
    return int(case.spec["world_size"])


class RankGroup:
    """`world_size` workers in one process group; any rank's failure stops them all."""

    def __init__(
        self,
        pool: WorkerPool,
        world_size: int,
        use_cuda: bool,
        trusted: dict[str, Any] | None = None,
    ):
        """trusted: the leaderboard's own modules, whose classes cross by name both ways."""
        self.world_size = world_size
        self.use_cuda = use_cuda
        self.port: int | None = None
        # The case's ranks share one sandbox of their own (WorkerProcess.case_ranks): its
        # own processes, loopback network, IPC and files, apart from the judge and every
        # other case; rank r's tensors cross on GPU r.
        self.workers: list[WorkerProcess] = WorkerProcess.case_ranks(
            world_size, launcher=pool.launcher
        )
        for worker in self.workers:
            worker.trusted = dict(trusted or {})

    @property
    def alive(self) -> bool:
        return all(w.alive for w in self.workers)

    def start(self, stage_dir: Path, module: str, entry: str, timeout_s: float) -> None:
        """Ping, import the module on every rank, then join the process group."""
        self.request(Op.PING, STARTUP_TIMEOUT_S)
        try:
            self.request(
                Op.LOAD,
                timeout_s,
                per_rank=[{"stage_dir": str(w.stage(stage_dir))} for w in self.workers],
                module=module,
                entry=entry,
            )
        except WorkerFailure as failure:
            failure.during_load = True  # deterministic: the same on every case
            raise
        self.port = free_port()
        self.request(
            Op.INIT_GROUP,
            STARTUP_TIMEOUT_S,
            per_rank=[{"rank": r} for r in range(self.world_size)],
            world_size=self.world_size,
            port=self.port,
            backend=backend_for(self.use_cuda),
            group_timeout_s=STARTUP_TIMEOUT_S,
        )

    def request(
        self,
        op: Op,
        timeout_s: float,
        per_rank: list[dict[str, Any]] | None = None,
        **common: Any,
    ) -> list[Reply]:
        """Send one request to every rank at once and wait for all replies.

        per_rank[r] adds rank r's own arguments (its input). On an error reply, a dead rank or
        the deadline, every rank is killed and a WorkerFailure names the rank.
        """
        started = time.perf_counter()
        host_copies = [False] * self.world_size  # whose CUDA tensors crossed as host copies
        for rank, worker in enumerate(self.workers):
            message = {"op": Op(op).value, **common, **(per_rank[rank] if per_rank else {})}
            try:
                # Through the rank's own transport (its device windows on GPU r), as any
                # worker's request: CUDA IPC does not cross the sandbox's PID namespace.
                host_copies[rank] = worker.outgoing(message)
                worker.send(message)
            except WorkerFailure as failure:  # handing over a device window failed
                self._fail(rank, failure)
            except (BrokenPipeError, ConnectionResetError, OSError):
                self._fail(rank, worker.died())
        replies: dict[int, Reply] = {}
        deadline = started + timeout_s
        while len(replies) < self.world_size:
            pending = {w.conn: r for r, w in enumerate(self.workers) if r not in replies}
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                waiting = ", ".join(str(r) for r in sorted(pending.values()))
                self.kill()
                failure = WorkerFailure.timed_out(timeout_s)
                failure.args = (
                    f"timed out after {timeout_s:g} s\nwaiting for rank(s) {waiting} of "
                    f"{self.world_size}; all ranks were stopped",
                )
                raise failure
            try:
                ready = wait(list(pending), timeout=min(remaining, 0.5))
            except OSError:
                ready = []
            for conn in ready:
                rank = pending[conn]
                try:
                    # Read like any worker's reply: framed, capped, allow-listed, checked.
                    reply = self.workers[rank].receive(op, deadline, timeout_s)
                except WorkerFailure as failure:
                    self._fail(rank, failure)
                if "error" in reply:
                    # A rank that died makes its peers fail in the collective: the death is
                    # the case's failure, not the error it caused.
                    dead = self._dead_peer(rank)
                    if dead is not None:
                        self._fail(dead, self.workers[dead].died())
                    note = self.workers[rank].log_note()
                    self._fail(rank, failure_of(reply, reply["error"] + note))
                self.workers[rank].incoming(reply, host_copies[rank])
                replies[rank] = Reply(reply, time.perf_counter() - started)
            for rank, worker in enumerate(self.workers):
                if rank not in replies and not worker.alive and worker.conn not in ready:
                    self._fail(rank, worker.died())
        return [replies[r] for r in range(self.world_size)]

    def _dead_peer(self, rank: int) -> int | None:
        """A rank other than `rank` that has died or dies within the grace, else None."""
        deadline = time.perf_counter() + PEER_DEATH_GRACE_S
        while True:
            for other, worker in enumerate(self.workers):
                if other != rank and not worker.alive:
                    return other
            if time.perf_counter() >= deadline:
                return None
            time.sleep(0.02)

    def _fail(self, rank: int, failure: WorkerFailure) -> None:
        self.kill()
        raise WorkerFailure(
            failure.status,
            f"rank {rank} of {self.world_size}: {failure}\n(all {self.world_size} ranks were "
            "stopped; the next case starts a new process group)",
            failure.kind,
            failure.exception,
            failure.module,
        )

    def transports(self) -> list[str]:
        """How the ranks reach each other, from NCCL's log ("P2P/CUMEM", "SHM", "NET/Socket");
        gloo's pairs are TCP on loopback. Empty where NCCL kept no log the judge can read."""
        if not self.use_cuda:
            return ["gloo/loopback"]
        found: set[str] = set()
        for worker in self.workers:
            found.update(nccl_transports(worker.nccl_log))
        return sorted(found)

    def kill(self) -> None:
        for worker in self.workers:
            worker.kill()

    def close(self) -> None:
        """Kill every rank: a process group's teardown can block at exit, and ranks keep
        nothing worth a grace period (profile mode does not run them)."""
        for worker in self.workers:
            worker.kill()
            shutil.rmtree(worker.home, ignore_errors=True)


def start_group(
    pool: WorkerPool,
    world_size: int,
    use_cuda: bool,
    stage_dir: Path,
    module: str,
    entry: str,
    load_timeout_s: float,
    trusted: dict[str, Any] | None = None,
) -> RankGroup:
    """A started group; a port taken between the probe and rank 0's bind gets a fresh one."""
    for attempt in range(PORT_ATTEMPTS):
        group = RankGroup(pool, world_size, use_cuda, trusted)
        try:
            group.start(stage_dir, module, entry, load_timeout_s)
            return group
        except WorkerFailure as failure:
            group.kill()
            if failure.kind is ErrorKind.PORT_TAKEN and attempt + 1 < PORT_ATTEMPTS:
                continue
            raise
    raise AssertionError("unreachable")


class ReferenceRanks:
    """Trusted ranks running a leaderboard's reference on the judge's inputs: the expected
    outputs. One per leaderboard and session (KernelboardState), shared by its judges."""

    def __init__(
        self, task: TaskSpec, pool: WorkerPool, use_cuda: bool, modules: LeaderboardModules
    ):
        self.task = task
        self.modules = modules  # whose classes the inputs may hold (they cross by name)
        self.pool = pool
        self.use_cuda = use_cuda
        self._group: RankGroup | None = None
        self._stage: Path | None = None

    def group(self, world_size: int) -> RankGroup:
        """The reference's ranks for this world_size, started (again) when needed."""
        group = self._group
        if group is None or not group.alive or group.world_size != world_size:
            if group is not None:
                group.close()
            self._stage = self._stage or stage(self.task, None)
            self._group = group = start_group(
                self.pool,
                world_size,
                self.use_cuda,
                self._stage,
                "reference",
                "ref_kernel",
                self.task.test_timeout,
                self.modules.trusted_modules(),
            )
        return group

    def outputs(self, pristine: list[Any]) -> list[Any]:
        """Every rank's reference output on (copies of) these inputs."""
        replies = self.group(len(pristine)).request(
            Op.CALL, self.task.test_timeout, per_rank=[{"data": copy.deepcopy(p)} for p in pristine]
        )
        return [copy.deepcopy(reply.payload["output"]) for reply in replies]

    def close(self) -> None:
        if self._group is not None:
            self._group.close()
            self._group = None
        if self._stage is not None:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None


class DistributedJudge(SubmissionJudge):
    """SubmissionJudge for multi_gpu leaderboards: the same verdicts, over a group of ranks."""

    def __init__(self, *args: Any, reference_ranks: ReferenceRanks | None = None, **kwargs: Any):
        """reference_ranks: shared expected-output ranks; without, the judge starts its own."""
        super().__init__(*args, **kwargs)
        self._group: RankGroup | None = None
        self._owns_reference = reference_ranks is None
        self.reference_ranks = reference_ranks or ReferenceRanks(
            self.task, self.pool, self.use_cuda, self.modules
        )

    # -- groups ----------------------------------------------------------------------------------
    def _require_ranks(self, world_size: int) -> None:
        have = ranks_available(self.use_cuda)
        if world_size > have:
            where = f"this host has {have}" if self.use_cuda else f"the CPU cap is {have} ranks"
            raise Skip(
                f"needs {world_size} GPUs; {where} (world_size={world_size}: a multi-GPU case "
                "never runs on fewer ranks than it asks for)"
            )

    def group(self, case: Case) -> RankGroup:
        """The submission's ranks for this case's world_size, started (again) when needed."""
        world_size = world_size_of(case)
        self._require_ranks(world_size)
        if self._load_failure is not None:
            raise self._load_failure
        group = self._group
        if group is not None and group.alive and group.world_size == world_size:
            return group
        if group is not None:
            group.close()
        self._group, self._calibration = None, None
        try:
            self._group = start_group(
                self.pool,
                world_size,
                self.use_cuda,
                self.stage_dir,
                self.module,
                self.entry,
                self.task.test_timeout,
                self.modules.trusted_modules(),
            )
        except WorkerFailure as failure:
            if getattr(failure, "during_load", False):
                self._load_failure = failure
            raise
        return self._group

    def close(self, grace_s: float = 5.0) -> None:
        if self._group is not None:
            self._group.close()
            self._group = None
        if self._owns_reference:
            self.reference_ranks.close()
        super().close(grace_s)

    def settle(self) -> None:
        """The judge's own GPU work on every rank's GPU is finished before the ranks run. Only
        the ranks' GPUs (cuda:0..W-1): under `pytest -n` the others this process sees are other
        workers' (plugin/xdist_gpus.py), and a synchronize would open a context on them."""
        if self.use_cuda:
            import torch

            group = self._group
            count = group.world_size if group is not None else torch.cuda.device_count()
            for index in range(count):
                torch.cuda.synchronize(index)

    # -- inputs and verdicts ------------------------------------------------------------------------
    def generate(self, case: Case, call_index: int = 0) -> list[Any]:
        """Every rank's input of the call: generate_input(rank=r, world_size=W, **spec)."""
        self._require_ranks(world_size_of(case))  # before any input lands on a missing GPU
        arguments = case.arguments(call_index)
        inputs = []
        for rank in range(world_size_of(case)):
            seed_everything(case.call_seed(call_index))
            try:
                inputs.append(self.modules.generate_input({**arguments, "rank": rank}))
            except Exception as exc:
                if needs_cuda(str(exc)):
                    raise Skip(f"needs CUDA: the reference's generate_input says: {exc}") from None
                raise
        return inputs

    @property
    def judges_reference(self) -> bool:
        """Whether this judge's own ranks run the reference (trusted code)."""
        return self.submission is None and self.entry == "ref_kernel"

    def check_ranks(self, pristine: list[Any], outputs: list[Any]) -> tuple[bool, str]:
        """check_implementation on every rank, its ref_kernel answered by the reference ranks."""
        world_size = len(pristine)
        if self.judges_reference:
            expected = outputs  # judging the reference itself: its ranks are the reference ranks
        else:
            expected = self.reference_ranks.outputs(pristine)
        for rank in range(world_size):
            with answered_reference(self.modules, expected[rank]):
                ok, message = self.modules.check(pristine[rank], outputs[rank])
            if not ok:
                return False, f"rank {rank} of {world_size}: {message}"
        return True, ""

    def _check_case(self, case: Case, timeout_s: float) -> CaseOutcome:
        pristine = self.generate(case)
        group = self.group(case)
        self.settle()
        replies = group.request(
            Op.CALL, timeout_s, per_rank=[{"data": copy.deepcopy(p)} for p in pristine]
        )
        outputs = [copy.deepcopy(r.payload["output"]) for r in replies]
        ok, message = self.check_ranks(pristine, outputs)
        return CaseOutcome("passed" if ok else "failed", message)

    # -- timing ----------------------------------------------------------------------------------
    def time_case(
        self, case: Case, plan: TimingPlan, timeout_s: float, progress: Progress | None = None
    ) -> Measurement:
        group = self.group(case)
        world_size = group.world_size
        if self._calibration is None and self.use_cuda:
            payloads = [
                r.payload
                for r in group.request(
                    Op.CALIBRATE,
                    STARTUP_TIMEOUT_S,
                    flush_bytes=plan.flush_bytes,
                    launch_allowance_us=LAUNCH_ALLOWANCE_US,
                )
            ]
            # The slowest rank's overheads: the call's time is the slowest rank's too.
            self._calibration = {
                key: max(p[key] for p in payloads)
                for key in ("empty_device_us", "wall_gap_us", "harness_dispatch_us", "preroll_us")
            }
            self._calibration["preroll_us"] = preroll_for(self._calibration)
        preroll_us = preroll_for(self._calibration)
        per_call: list[list[float]] = []  # every call's device time on each rank
        comm_bytes: list[int] = []  # the bytes one rank reads, from the first call

        def request_time(
            data: list[Any],
            flush_bytes: int,
            remaining_s: float,
            warm: bool = False,
            wake: bool = True,
        ) -> dict[str, Any]:
            # Ranks are timed cold: a warm call would have to run on every rank at once. Each
            # rank's worker spins its GPU awake after an idle gap (multi-rank cases are never
            # timed in turns, which alone turn `wake` off).
            self.settle()
            replies = [
                r.payload
                for r in group.request(
                    Op.TIME,
                    remaining_s,
                    per_rank=[{"data": clone_data(d)} for d in data],
                    flush_bytes=flush_bytes,
                    preroll_us=preroll_us,
                )
            ]
            per_call.append([r["device_us"] for r in replies])
            if not comm_bytes:  # as the bandwidth floor counts them: an output passed in is
                comm_bytes.append(  # written, not read
                    max(
                        io_bytes(d, r["output"], r.get("aliased_bytes"))[0]
                        for d, r in zip(data, replies, strict=True)
                    )
                )
            return {
                "output": [clone_data(r["output"]) for r in replies],  # the judge's own
                "device_us": max(r["device_us"] for r in replies),  # the slowest rank's
                "wall_us": max(r["wall_us"] for r in replies),
                "dispatch_us": max(r["dispatch_us"] for r in replies),
                "aliased_bytes": sum(r["aliased_bytes"] for r in replies),
            }

        timer = CaseTimer(
            self.generate,
            request_time,
            self.check_ranks,
            self.use_cuda,
            progress,
            parallel=world_size,
        )
        clocks_before = gpu_states(world_size) if self.use_cuda else None
        label = f"{self.task.name} {case.kind}[{case.id}] x{world_size}"
        measurement = timer.measure(case, plan, timeout_s, label, overhead=self._calibration)
        clocks_after = gpu_states(world_size) if self.use_cuda else None
        timed = per_call[len(per_call) - len(measurement.samples_us) :]
        measurement.details["ranks"] = rank_summary(timed, world_size, backend_for(self.use_cuda))
        measurement.details["ranks"]["transports"] = group.transports()
        if clocks_before is not None:
            measurement.details["clocks_per_gpu"] = {"before": clocks_before, "after": clocks_after}
            for index, (before, after) in enumerate(zip(clocks_before, clocks_after, strict=True)):
                drop = clock_drop_flag(before, after)
                if drop and index > 0:  # GPU 0's drop is already flagged by the CaseTimer
                    measurement.flags.append(f"GPU {index}: clocks dropped during the case: {drop}")
        if comm_bytes:
            try:
                ceiling = self.comm_ceiling(world_size, comm_bytes[0])
            except WorkerFailure as failure:  # the reference's ranks failed: the case stands
                first = (str(failure).splitlines() or [""])[0]
                measurement.flags.append(f"the communication ceiling was not measured: {first}")
                ceiling = None
            if ceiling is not None:
                measurement.details[COMM_KEY] = dict(ceiling)
        return measurement

    def comm_ceiling(self, world_size: int, nbytes: int) -> dict[str, Any] | None:
        """An all-reduce of `nbytes` over `world_size` ranks on this host (comm_ceiling's
        record), timed in trusted ranks: this judge's own when it judges the reference, else
        the reference's. Measured once per size in this process, after a case's timed calls
        and before the next case's (never inside a timed call)."""
        backend = backend_for(self.use_cuda)
        key = (backend, world_size, nbytes)
        if key not in _ceilings:
            if world_size < 2 or nbytes <= 0:
                return None  # nothing crosses a link
            group = self._group if self.judges_reference else None
            if group is None or not group.alive or group.world_size != world_size:
                group = self.reference_ranks.group(world_size)
            self.settle()
            replies = group.request(
                Op.CEILING,
                STARTUP_TIMEOUT_S,
                nbytes=nbytes,
                warmup=CEILING_WARMUP,
                repetitions=CEILING_REPETITIONS,
            )
            per_rank = [ceiling_samples(r.payload, rank) for rank, r in enumerate(replies)]
            slowest = [max(call) for call in zip(*per_rank, strict=True)]
            clock = "cuda_event" if self.use_cuda else "host"
            _ceilings[key] = comm_ceiling(nbytes, slowest, world_size, backend, clock)
        return _ceilings[key]

    def _profile(self, case: Case, timeout_s: float, profiler: Any, report: Path):
        raise Skip("profile mode does not profile multi-GPU cases yet; use benchmark mode")


# NCCL's INFO line for each connection: "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read".
_VIA = re.compile(rb" via (P2P/[A-Za-z]+|P2P|SHM|NET/[A-Za-z]+|COLLNET/[A-Za-z]+)")
NCCL_LOG_READ_BYTES = 4 << 20  # a rank writes the log: the judge reads no more than this


def nccl_transports(log: Path | None) -> set[str]:
    """The transports NCCL's log names between ranks (an untrusted file: capped, pattern-read)."""
    if log is None:
        return set()
    try:
        with open(log, "rb") as file:
            text = file.read(NCCL_LOG_READ_BYTES)
    except OSError:
        return set()
    return {match.decode() for match in _VIA.findall(text)}


def ceiling_samples(payload: dict[str, Any], rank: int) -> list[float]:
    """A rank's timed all-reduces from its `ceiling` reply, checked: finite, non-negative
    numbers, one per repetition asked for."""
    samples = payload["samples_us"]
    if len(samples) != CEILING_REPETITIONS or not all(
        isinstance(s, int | float) and not isinstance(s, bool) and 0 <= s < float("inf")
        for s in samples
    ):
        raise WorkerFailure(
            "error",
            f"rank {rank}: the ceiling reply's samples_us are not "
            f"{CEILING_REPETITIONS} finite times",
        )
    return [float(s) for s in samples]


def gpu_states(world_size: int) -> list[dict[str, Any] | None]:
    """NVML clocks of the GPUs the ranks run on (rank r on cuda:r)."""
    return [devices.gpu_state(rank) for rank in range(world_size)]


def rank_summary(per_call: list[list[float]], world_size: int, backend: str) -> dict[str, Any]:
    """Per-rank device times of the timed calls; rank 0's mean is what GPU MODE would report."""
    by_rank = [[round(call[r], 4) for call in per_call] for r in range(world_size)]
    slowest = [0] * world_size
    for call in per_call:
        slowest[call.index(max(call))] += 1
    means = [sum(samples) / len(samples) if samples else None for samples in by_rank]
    return {
        "world_size": world_size,
        "backend": backend,
        "samples_us": by_rank,
        "mean_us": means,
        "rank0_mean_us": means[0],
        "slowest_calls": slowest,  # how often each rank was the slowest (its time counted)
    }


# One check at a time answers for the reference: two judges of one process sharing a
# leaderboard's modules (cases judged at once in threads) would otherwise each restore the
# other's stand-in, and a check would then call the real ref_kernel, collectives and all.
_answering = threading.Lock()


@contextmanager
def answered_reference(modules: LeaderboardModules, expected: Any) -> Iterator[None]:
    """While check_implementation runs, the reference's ref_kernel returns `expected`."""
    with _answering:
        reference = modules.reference
        original = reference.ref_kernel
        reference.ref_kernel = lambda data: copy.deepcopy(expected)
        try:
            yield
        finally:
            reference.ref_kernel = original


def make_judge(
    task: TaskSpec,
    modules: LeaderboardModules,
    submission: Path | None,
    use_cuda: bool,
    pool: WorkerPool | None = None,
    entry: str = "custom_kernel",
    reference_ranks: ReferenceRanks | None = None,
) -> SubmissionJudge:
    """The judge for a leaderboard: one worker, or one worker per rank for multi_gpu ones."""
    if not task.multi_gpu:
        return SubmissionJudge(task, modules, submission, use_cuda, pool, entry=entry)
    return DistributedJudge(
        task, modules, submission, use_cuda, pool, entry=entry, reference_ranks=reference_ranks
    )
