"""A CPU core each GPU's judge keeps for timed calls alone.

A launch-bound call's time is its host time, and what else runs on its CPU is part of it. While
one candidate is timed, the candidates prepared ahead of it import, build and compile on the
host's CPUs, and the judge's own threads make inputs ahead. A worker that chose the fastest CPU
at the start of a case (worker/cpu_choice.py) kept its calls there whatever came to share it
afterwards: on H200 hosts, cases timed on one CPU read 107 - 187 µs, and one process timing the
same case again and again read 124 - 247 µs (docs/benchmarks.md, "Where the host-bound
verdicts' noise comes from").

So a batch judge chooses one core of its CPUs (the one whose probe reads fastest), runs none of
its own work there (the judge process and everything it starts keep to the others), and every
worker it starts runs its timed calls on that core's first CPU (worker/timing.py): the reference
and each candidate are timed on the same CPU, with nothing of the judge's beside them. A core's
SMT siblings are kept free with it: a sibling's work slows its calls as a shared CPU would.

The pytest plugin keeps no core: its xdist workers already spread over the CPUs, one judge each.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..channel.cage import PIN_VARIABLE
from ..channel.cpu_probe import probe_us
from ..supervisor import forked
from .cpu_sets import MIN_CPUS_PER_JUDGE, allowed_cpus, pin_process, split_cpus

# Set to 0 to keep no core: each case's timed calls go to the CPU its probe chose then.
VARIABLE = "KERNELBOARD_TIMING_CORE"
SYS_CPUS = Path("/sys/devices/system/cpu")
# Each core's probe: this many repetitions a round (about 20 µs each), in ROUNDS rounds taken
# across the cores in turn, so that a moment's load on one CPU does not decide; the best
# round's median counts. A 32-core host is probed in about 70 ms.
PROBE_REPS = 50
ROUNDS = 2


@dataclass(frozen=True)
class TimingCore:
    """Where a judge's timed calls run: `cpu`, and the core it belongs to, none of whose CPUs
    runs anything else of the judge's."""

    cpu: int
    core: frozenset[int]


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether judges keep a timing core: not where it is turned off, nor where timed calls are
    left to the scheduler's CPU (KERNELBOARD_PIN_CPU=0, channel/cage.py)."""
    return environ.get(VARIABLE) != "0" and environ.get(PIN_VARIABLE) != "0"


def parse_cpu_list(text: str) -> frozenset[int]:
    """A kernel CPU list ("0-3,8,10-11") as its CPUs."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


def core_of(cpu: int, sys_cpus: Path = SYS_CPUS) -> frozenset[int]:
    """`cpu` and its SMT siblings, as the kernel lists them; `cpu` alone where it does not."""
    try:
        return parse_cpu_list((sys_cpus / f"cpu{cpu}/topology/thread_siblings_list").read_text())
    except (OSError, ValueError):
        return frozenset({cpu})


def whole_cores(cpus: frozenset[int], sys_cpus: Path = SYS_CPUS) -> list[frozenset[int]]:
    """The cores all of whose CPUs lie in `cpus`, in CPU order (a core with a sibling outside
    `cpus` cannot be kept free)."""
    cores: dict[frozenset[int], None] = {}
    for cpu in sorted(cpus):
        core = core_of(cpu, sys_cpus) | {cpu}
        if core <= cpus:
            cores.setdefault(core, None)
    return list(cores)


def probe_cores(cores: list[frozenset[int]]) -> dict[frozenset[int], float]:
    """Each core's probe on its first CPU, in µs (the best of ROUNDS rounds), by core. The
    calling thread visits each CPU and is put back where it was."""
    home = os.sched_getaffinity(0)
    best = {core: float("inf") for core in cores}
    try:
        for _ in range(ROUNDS):
            for core in cores:
                try:
                    os.sched_setaffinity(0, {min(core)})
                except OSError:  # taken away since (a cgroup's cpuset shrank)
                    continue
                best[core] = min(best[core], probe_us(PROBE_REPS))
    finally:
        os.sched_setaffinity(0, home)
    return {core: us for core, us in best.items() if us < float("inf")}


def choose_cores(cpus: frozenset[int], judges: int, sys_cpus: Path = SYS_CPUS) -> list[TimingCore]:
    """One timing core for each of `judges` judges out of `cpus`, the fastest first; none (an
    empty list) where keeping them would leave a judge fewer than MIN_CPUS_PER_JUDGE others,
    where it is turned off, or where the platform has no CPU affinity."""
    if not enabled() or not hasattr(os, "sched_setaffinity") or judges < 1:
        return []
    cores = whole_cores(cpus, sys_cpus)
    if len(cores) < judges:
        return []
    speeds = probe_cores(cores)
    fastest = sorted(speeds, key=lambda core: (speeds[core], min(core)))[:judges]
    kept = frozenset().union(*fastest)
    if len(fastest) < judges or len(cpus - kept) < MIN_CPUS_PER_JUDGE * judges:
        return []
    return [TimingCore(min(core), core) for core in fastest]


def judge_cpus(
    cpus: frozenset[int], judges: int, sys_cpus: Path = SYS_CPUS
) -> tuple[list[TimingCore | None], list[frozenset[int]]]:
    """Each judge's timing core (None where none is kept) and the CPUs it and everything it
    starts run on: `cpus` less the kept cores, split between the judges (cpu_sets.py)."""
    cores = choose_cores(cpus, judges, sys_cpus)
    kept = frozenset().union(*(core.core for core in cores))
    return (cores or [None] * judges), split_cpus(cpus - kept, judges)


@contextmanager
def kept_here() -> Iterator[TimingCore | None]:
    """A timing core for the judge in this process: this process (every thread, and all it
    starts from now on) keeps to its other CPUs for the duration, then has them all back."""
    cpus = allowed_cpus()
    cores = choose_cores(cpus, 1)
    if not cores:
        yield None
        return
    pin_process(os.getpid(), cpus - cores[0].core)
    _pin_zygotes(cpus - cores[0].core)
    try:
        yield cores[0]
    finally:
        pin_process(os.getpid(), cpus)


def _pin_zygotes(cpus: frozenset[int]) -> None:
    """The zygote this judge started before it kept a core (launch.prestart_zygote), and every
    process of it, onto `cpus`: what it forks from now on inherits them. Listed again after
    each pass, for a process forked while the one before was pinned."""
    pinned: set[int] = set()
    while unpinned := set(forked.zygote_pids()) - pinned:
        for pid in unpinned:
            pin_process(pid, cpus)
        pinned |= unpinned
