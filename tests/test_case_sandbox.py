"""The sandbox of a multi-GPU case, on CPU (gloo): the layout a GPU case gets, tested in CI.

All ranks of one case share one set of namespaces of their own (worker/zygote.py): they see
each other's processes and meet on a loopback network that is theirs alone; no rank sees the
judge, another case's ranks, or any network interface but loopback (docs/security.md).
"""

from __future__ import annotations

import socket
import textwrap
import threading
from pathlib import Path

import pytest
from conftest import missing_system_tool

from pytest_kernelboard.channel.protocol import Op
from pytest_kernelboard.judge.distributed import RankGroup, start_group
from pytest_kernelboard.supervisor import forked, sandbox
from pytest_kernelboard.supervisor.pool import WorkerPool

# Each rank reports who it is and what it can see: its working folder (the stage slot it
# loaded from, different for every worker), the working folders of every process it can read
# in /proc, whether any of them is a pytest process (the judge), the network interfaces, and
# its PID in its namespace.
FACTS = textwrap.dedent(
    """
    import os, socket

    def facts(data):
        seen, judge_seen = [], False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as file:
                    cmdline = file.read()
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            judge_seen |= b"pytest" in cmdline and b"pytest_kernelboard.worker" not in cmdline
            if "kb-slot-" in cwd:
                seen.append(cwd)
        return {
            "slot": os.getcwd(),
            "seen": sorted(set(seen)),
            "judge_seen": judge_seen,
            "interfaces": sorted(name for _, name in socket.if_nameindex()),
            "pid": os.getpid(),
        }
    """
)


@pytest.fixture(scope="module", autouse=True)
def needs_case_sandbox():
    if not sandbox.enabled():
        missing_system_tool(
            f"the case sandbox needs bubblewrap ({sandbox.probe()})", "apt-get install bubblewrap"
        )
    if not forked.enabled():
        pytest.skip("KERNELBOARD_ZYGOTE=off: ranks start one by one, each on the host network")


@pytest.fixture(scope="module")
def stage(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("facts")
    (folder / "facts.py").write_text(FACTS)
    return folder


def case_facts(group: RankGroup) -> list[dict]:
    replies = group.request(Op.CALL, 60, per_rank=[{"data": None}] * group.world_size)
    return [reply.payload["output"] for reply in replies]


def test_the_ranks_of_a_case_see_each_other_and_only_each_other(stage):
    group = start_group(WorkerPool(), 3, False, stage, "facts", "facts", 60)
    try:
        facts = case_facts(group)
    finally:
        group.close()
    own = sorted(f["slot"] for f in facts)
    assert len(set(own)) == 3  # every rank has a folder of its own
    for rank in facts:
        assert rank["seen"] == own  # its peers' processes, and no one else's
        assert not rank["judge_seen"]
        assert rank["interfaces"] == ["lo"]  # a network of the case's own: loopback only
    assert len({f["pid"] for f in facts}) == 3  # one PID namespace: distinct PIDs


def test_two_cases_at_once_do_not_see_each_other(stage):
    groups: list[RankGroup] = []
    facts: list[list[dict]] = [[], []]

    def run(index: int) -> None:
        group = start_group(WorkerPool(), 2, False, stage, "facts", "facts", 60)
        groups.append(group)
        facts[index] = case_facts(group)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    finally:
        for group in groups:
            group.close()
    first, second = ({f["slot"] for f in case} for case in facts)
    assert len(first) == 2 and len(second) == 2 and not first & second
    for case, own in ((facts[0], first), (facts[1], second)):
        for rank in case:
            assert set(rank["seen"]) == own


def test_a_rank_cannot_reach_the_hosts_network(stage, tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "reach.py").write_text(
        textwrap.dedent(
            f"""
            import socket

            def reach(data):
                try:
                    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
                    return "reached"
                except OSError as exc:
                    return type(exc).__name__
            """
        )
    )
    group = start_group(WorkerPool(), 2, False, probe, "reach", "reach", 60)
    try:
        replies = group.request(Op.CALL, 60, per_rank=[{"data": None}] * 2)
    finally:
        group.close()
        listener.close()
    assert all(reply.payload["output"] != "reached" for reply in replies)
