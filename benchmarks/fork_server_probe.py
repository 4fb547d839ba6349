"""Can workers be forked from one sandboxed process that has imported torch once?

The README's test command is CPU-bound, and two thirds of its CPU is workers that each import
torch (benchmarks/test_command_cpu.py). This probe checks, inside the worker sandbox itself
(sandbox.bwrap_command), what a fork server would rely on:

- a process that has imported torch forks a child, and the child gives itself new user, mount,
  PID, network and IPC namespaces (no other worker is addressable by PID; its mounts are its
  own) and still runs torch;
- the cost of that against a fresh worker's start;
- whether the child can mount a /proc of its own (bwrap masks parts of its /proc, which Linux
  then refuses to mount again: without it, the child still lists its siblings).

    python benchmarks/fork_server_probe.py
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import ctypes, os, sys, time

started = time.perf_counter()
import torch
imported_s = time.perf_counter() - started

libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
CLONE_NEWNET, CLONE_NEWIPC = 0x40000000, 0x08000000
MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_NOEXEC = 16384, 1 << 18, 2, 4, 8


def isolate_and_run():
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
    if libc.unshare(flags) != 0:
        print("unshare:", os.strerror(ctypes.get_errno()), flush=True)
        os._exit(3)
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
    pid = os.fork()  # the new PID namespace starts with this child, as its PID 1
    if pid:
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    private = libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) == 0
    own_proc = libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0
    own_tmp = libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m") == 0
    result = (torch.ones(3) + 1).tolist()
    print(
        f"child: pid {os.getpid()}, mounts private {private}, own /proc {own_proc}, "
        f"own /tmp {own_tmp}, torch {result}",
        flush=True,
    )
    os._exit(0 if result == [2.0, 2.0, 2.0] else 4)


costs = []
for _ in range(5):
    before = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        isolate_and_run()
    _, status = os.waitpid(pid, 0)
    costs.append(time.perf_counter() - before)
    assert os.waitstatus_to_exitcode(status) == 0, status
print(f"import torch: {imported_s:.2f} s; fork + isolate + run, each: "
      + ", ".join(f"{c * 1e3:.0f} ms" for c in costs))
"""


def main() -> int:
    from pytest_kernelboard.worker import sandbox

    unavailable = sandbox.probe()
    if unavailable is not None:
        print(f"no worker sandbox here: {unavailable}", file=sys.stderr)
        return 2
    home, stage = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    try:
        (stage / "probe.py").write_text(CHILD)
        command = sandbox.bwrap_command(home, stage, [], [])
        run = subprocess.run([*command, sys.executable, str(stage / "probe.py")], text=True)
        return run.returncode
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
