"""How a worker process comes to exist: forked from the judge's zygote, else started under bwrap
(or a launcher such as `ncu`) or plainly; a multi-GPU case's ranks together; the environment,
folders and socket it is handed. What the judge then says to it is `client.WorkerProcess`'s."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from ..channel.cage import LIMITS_VARIABLE, TIMING_CPU_VARIABLE, WARM_TIMING_VARIABLE
from . import forked, gpu_view, sandbox, scratch, shm_manager
from .environment import cache_dirs, default_cache_dir, worker_environment

NCCL_LOG_NAME = "nccl.log"
SEND_TIMEOUT_S = 120


@dataclass(frozen=True)
class Launcher:
    """A command the worker starts under: a profiler. It runs inside the sandbox with its
    target, because across the sandbox's namespaces Nsight Compute never reaches the process
    it launched (it waits for it forever). `tool_dir` is bound read-only there, `output_dir`
    writable (where the profiler writes its report)."""

    command: tuple[str, ...]
    tool_dir: Path
    output_dir: Path


class WorkerLaunch:
    """One worker's start: its home and output log, the socket pair, the environment handed to
    it, the stage slot and outbox a sandbox binds, then the process and the judge's end of the
    socket (`conn`) once started."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        launcher: Launcher | None = None,
        sandboxed: bool | None = None,
        host_network: bool = False,
        warm_timing: bool = False,
        device: int | None = None,
        timing_cpu: int | None = None,
    ):
        """The arguments are WorkerProcess's (supervisor/client.py). Nothing starts yet."""
        self.launcher = launcher
        self.host_network = host_network
        self.device = device
        self.sandboxed = sandbox.enabled() if sandboxed is None else sandboxed
        self.home = scratch.make_folder("kb-worker-")
        self.log_path = self.home / "output.log"
        self.stage_slot: Path | None = None  # where load() stages inside the sandbox
        self.outbox: Path | None = None  # a host folder the sandboxed worker may write to
        self.nccl_log: Path | None = None  # a rank's NCCL log, where the judge can read it
        self.parent_end, self.child_end = socket.socketpair()
        # A worker that stops reading cannot block the judge's send for longer than this.
        self.parent_end.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_TIMEOUT_S, 0)
        )
        env = worker_environment(os.environ, self.home, cache_dir or default_cache_dir())
        env[LIMITS_VARIABLE] = "sandboxed" if self.sandboxed else "plain"
        if warm_timing:
            env[WARM_TIMING_VARIABLE] = "1"
        if timing_cpu is not None:
            env[TIMING_CPU_VARIABLE] = str(timing_cpu)
        if device is None:
            see_own_gpu(env)
        self.env = env
        self.process: subprocess.Popen | forked.ForkedProcess | None = None
        self.conn: Connection | None = None

    def start(self) -> None:
        """One worker: forked from the zygote where sandboxed without a launcher, else started
        as a process of its own."""
        if self.sandboxed and self.launcher is None:
            self.process = self._forked()
        if self.process is None:
            self._start()
        self._connect()

    def _connect(self) -> None:
        """What follows the start, however the process was started."""
        self.child_end.close()
        # Only now: this imports torch (seconds), which the worker's own start-up overlaps.
        shm_manager.share_through_files()
        if self.sandboxed:
            shm_manager.shm_manager_dir()  # the manager's socket goes where the sandbox already binds
        self.conn = Connection(self.parent_end.detach())

    def _log_nccl_to(self, folder: Path) -> None:
        """NCCL's own log (which transport joins the ranks) into a file the judge can read,
        apart from the worker's output. At INFO at least, whatever level the judge's environment
        asks for (the record needs the transport lines, and the file keeps them out of the
        output); a NCCL_DEBUG_FILE of the judge's own environment wins, and the record then
        names no transport."""
        if "NCCL_DEBUG_FILE" in self.env:
            return
        level = self.env.get("NCCL_DEBUG", "").upper()
        self.nccl_log = folder / NCCL_LOG_NAME
        self.env.update(
            NCCL_DEBUG=level if level in ("INFO", "TRACE") else "INFO",
            NCCL_DEBUG_FILE=str(self.nccl_log),
        )

    def _zygote_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if k != LIMITS_VARIABLE}

    def _member(self, zygote: forked.Zygote) -> forked.Member:
        """This worker as the zygote forks it: its slot and outbox made in the zygote's pool."""
        self.stage_slot = Path(tempfile.mkdtemp(prefix="kb-slot-", dir=zygote.pool))
        self.outbox = Path(tempfile.mkdtemp(prefix="kb-exchange-", dir=zygote.pool))
        self.env["TMPDIR"] = str(self.outbox)
        if self.device is not None:
            self._log_nccl_to(self.outbox)
        return forked.Member(
            self.child_end.fileno(), -1, self.env, self.home, self.stage_slot, self.outbox
        )

    def _forget_pool_folders(self) -> None:
        for folder in (self.stage_slot, self.outbox):
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self.stage_slot = self.outbox = None

    def abandon(self) -> None:
        """A launch that never started: its socket pair closed, its home removed."""
        self.parent_end.close()
        self.child_end.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def _zygote(self) -> forked.Zygote | None:
        """The judge's zygote this worker is forked from (started on first use), by its folders,
        network and GPUs; None where there is none."""
        return forked.zygote_for(
            cache_dirs(self.env),
            shm_manager.shm_manager_folders(),
            self._zygote_env(),
            self.host_network,
        )

    def _forked(self) -> forked.ForkedProcess | None:
        """The worker forked from this judge's zygote (worker/zygote.py), in namespaces of its
        own, with its slot and outbox in the zygote's pool; None where there is no zygote."""
        zygote = self._zygote()
        if zygote is None:
            return None
        member = self._member(zygote)
        try:
            with open(self.log_path, "wb") as log:
                return zygote.spawn(dataclasses.replace(member, log_fd=log.fileno()))
        except forked.ZygoteUnavailable as exc:
            forked.give_up(zygote, str(exc))
            self._forget_pool_folders()
            return None

    def _start(self) -> None:
        """The worker started as a process of its own (under bwrap where sandboxed)."""
        launcher = self.launcher
        cage = self._cage() if self.sandboxed else []
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    *cage,
                    *(launcher.command if launcher else ()),
                    sys.executable,
                    "-m",
                    "pytest_kernelboard.worker.main",
                    str(self.child_end.fileno()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.home,
                pass_fds=(self.child_end.fileno(),),  # the only descriptor it inherits
                start_new_session=True,  # its own process group: a kill takes its children too
            )

    def _cage(self) -> list[str]:
        """The bwrap prefix; the submission is staged later into a slot bound from the start."""
        self.stage_slot = scratch.make_folder("kb-slot-")
        # The worker's own shm manager socket lands in its TMPDIR: a host folder the judge sees.
        self.outbox = scratch.make_folder("kb-exchange-")
        self.env["TMPDIR"] = str(self.outbox)
        caches = cache_dirs(self.env)
        # The judge's shm manager socket: in a folder made now, filled once torch starts it.
        exchange = [self.outbox, *shm_manager.shm_manager_folders()]
        tools = []
        if self.launcher is not None:
            tools.append(self.launcher.tool_dir)
            exchange.append(self.launcher.output_dir)
        gpus = gpu_view.narrow(self.env)  # its own GPUs' nodes alone, renamed to match
        return sandbox.bwrap_command(
            self.home, self.stage_slot, caches, exchange, self.host_network, tools, gpus=gpus
        )


def prestart_zygote() -> None:
    """Start the zygote a single-GPU judge's first worker is forked from, now, in the
    background: its torch import (about 2 s) then runs beside the judge's own, where the first
    worker would start it only after (a batch judge imports torch to find its GPUs first).
    Nothing where workers are not forked from a zygote. The worker that comes later finds the
    same one: same folders, network and GPUs (WorkerLaunch._zygote)."""
    try:
        if not (sandbox.enabled() and forked.enabled()):
            return
        launch = WorkerLaunch()  # as the judge's pool makes its first worker; never started
    except Exception:  # a sandbox required but missing: the first worker's start says so
        return
    try:
        launch._zygote()
    finally:
        launch.abandon()


def start_case(world_size: int, launcher: Launcher | None = None) -> list[WorkerLaunch]:
    """The started ranks of one multi-GPU case, rank r's CUDA tensors on GPU r. Sandboxed, they
    are forked into one set of namespaces of their own (worker/zygote.py): what NCCL's fast
    transports and CUDA IPC between ranks need, apart from the judge and every other case.
    Where there is no zygote, each starts in a sandbox of its own on the host's network
    (collectives work; CUDA IPC between ranks does not)."""
    ranks = [WorkerLaunch(launcher=launcher, device=r) for r in range(world_size)]
    first = ranks[0]
    zygote = None
    if first.sandboxed and launcher is None:
        zygote = first._zygote()
    see_leased_gpus(ranks, world_size)
    if zygote is not None:
        try:
            with contextlib.ExitStack() as logs:
                members = [
                    dataclasses.replace(
                        rank._member(zygote),
                        log_fd=logs.enter_context(open(rank.log_path, "wb")).fileno(),
                    )
                    for rank in ranks
                ]
                processes = zygote.spawn_case(members)
            for rank, process in zip(ranks, processes, strict=True):
                rank.process = process
        except forked.ZygoteUnavailable as exc:
            forked.give_up(zygote, str(exc))
            for rank in ranks:
                rank._forget_pool_folders()
    for rank in ranks:
        if rank.process is None:
            if not rank.sandboxed:
                rank._log_nccl_to(rank.home)
            rank.host_network = rank.sandboxed
            rank._start()
        rank._connect()
    return ranks


def see_leased_gpus(ranks: list[WorkerLaunch], world_size: int) -> None:
    """Under `pytest -n` the judge sees its own GPU first, then the host's others
    (plugin/xdist_gpus.py), and leases the first `world_size` of them for a multi-GPU case
    (judge/gpu_lease.py): its ranks see those alone, so none can reach a GPU another judge is
    timing on. Rank r is still cuda:r. Without a numbering of the judge's own, nothing changes."""
    visible = ranks[0].env.get("CUDA_VISIBLE_DEVICES")
    if not visible:
        return
    leased = ",".join(visible.split(",")[:world_size])
    for rank in ranks:
        rank.env["CUDA_VISIBLE_DEVICES"] = leased


def see_own_gpu(env: dict[str, str]) -> None:
    """A single-GPU worker sees the judge's own GPU alone (the judge's cuda:0, first in its
    numbering). With more in view, a library that starts every GPU it sees (JAX does) leaves
    the current device on the last, and torch then refuses to hand cuda:0 tensors over DLPack
    ("Expected: 0. Current device: 3"). A judge whose thread works on another of its GPUs (a
    program's own torch.cuda.set_device) names that device to its workers by its own number,
    so they keep the judge's numbering; so does one that hides every GPU. `kernelboard judge
    --gpus 2` judges in a process that sees GPU 2 alone (batch/judge.py, judged_here)."""
    if _judge_device() != 0:
        return
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        env["CUDA_VISIBLE_DEVICES"] = "0"
    elif visible.strip():
        env["CUDA_VISIBLE_DEVICES"] = visible.split(",")[0].strip()


def _judge_device() -> int:
    """The judge's current CUDA device (0 until CUDA starts: torch's default)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return 0
    return int(torch.cuda.current_device())
