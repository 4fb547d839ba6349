"""Which sandbox layouts let the ranks of one multi-GPU case work together.

    python benchmarks/probes/multirank_sandbox.py [--world-size W] [--cpu]

Runs the same two-part rank program (a collective over the group, then a CUDA IPC handle of a
tensor of rank 0 opened by every other rank, with no collective for the data) in each layout:

- plain:        W processes, no sandbox
- bwrap-case:   one bwrap holding all W ranks (own user, PID, IPC, UTS and network namespaces)
- nested-case:  the zygote's cage (sandbox.zygote_command), then one set of namespaces of its
                own for the case (worker/isolation.py) holding all W ranks
- nested-rank:  the zygote's cage, then namespaces of its own for each rank (host network)

and prints one line per layout: whether context creation, the collective and the IPC opening
worked, and the NCCL transport the log names (NCCL_DEBUG=INFO). --cpu uses gloo and skips IPC.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pytest_kernelboard.supervisor import sandbox  # noqa: E402
from pytest_kernelboard.supervisor.environment import NO_MULTICAST  # noqa: E402
from pytest_kernelboard.worker import isolation  # noqa: E402

TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- one rank ---------------------------------------------------------------------------------
def rank_main(rank: int, world_size: int, port: int, cuda: bool) -> None:
    report: dict = {"rank": rank}
    try:
        import torch
        import torch.distributed as dist

        if cuda:
            torch.cuda.set_device(rank)
            torch.zeros(1, device="cuda")
            report["context"] = "ok"
        dist.init_process_group(
            "nccl" if cuda else "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
        )
        device = f"cuda:{rank}" if cuda else "cpu"
        x = torch.full((1 << 22,), float(rank + 1), device=device)
        dist.all_reduce(x)
        expected = world_size * (world_size + 1) / 2
        report["collective"] = "ok" if float(x[0]) == expected else f"wrong {float(x[0])}"
        if cuda:
            from torch.multiprocessing.reductions import reduce_tensor

            shared = [None]
            if rank == 0:
                source = torch.arange(1024, dtype=torch.float32, device="cuda:0")
                shared = [reduce_tensor(source)]
            dist.broadcast_object_list(shared, src=0)
            if rank != 0:
                rebuild, args = shared[0]
                try:
                    opened = rebuild(*args)
                    ok = torch.equal(opened.cpu(), torch.arange(1024, dtype=torch.float32))
                    report["ipc"] = "ok" if ok else "wrong"
                except Exception as exc:  # noqa: BLE001 - the answer
                    report["ipc"] = f"{type(exc).__name__}: {exc}"[:200]
            dist.barrier()
            try:
                import torch.distributed._symmetric_memory as symm

                buffer = symm.empty(1024, device=f"cuda:{rank}")
                symm.rendezvous(buffer, dist.group.WORLD.group_name)
                report["symm_mem"] = "ok"
            except Exception as exc:  # noqa: BLE001
                report["symm_mem"] = f"{type(exc).__name__}: {exc}"[:160]
        dist.destroy_process_group()
    except Exception as exc:  # noqa: BLE001
        report["error"] = f"{type(exc).__name__}: {exc}"[:400]
    os.write(1, ("RANK " + json.dumps(report) + "\n").encode())  # one write: ranks interleave


def launch_ranks(world_size: int, cuda: bool, isolate_each: bool = False) -> int:
    """Start the ranks as children of this process and wait for them (the case's launcher)."""
    port = free_port()
    pids = []
    for rank in range(world_size):
        pid = os.fork()
        if pid == 0:
            try:
                if isolate_each:
                    isolate(
                        host_network=True, then=lambda r=rank: rank_main(r, world_size, port, cuda)
                    )
                else:
                    rank_main(rank, world_size, port, cuda)
            finally:
                os._exit(0)
        pids.append(pid)
    codes = [os.waitpid(pid, 0)[1] for pid in pids]
    return max(isolation.exit_code(c) for c in codes)


def isolate(host_network: bool, then) -> None:
    """worker/isolation.py's namespaces, an init (PID 1), then `then` in a child of it."""
    isolation.unshare_namespaces(host_network)
    init = os.fork()
    if init == 0:
        home = Path(tempfile.gettempdir()) / f"kb-probe-{os.getpid()}"
        isolation.set_up_namespace(sandbox.temporary_folders(), [], [home], 1 << 28)
        if not host_network:
            isolation.bring_up_loopback()
        child = os.fork()
        if child == 0:
            isolation.drop_privileges()
            then()
            os._exit(0)
        _, status = os.waitpid(child, 0)
        os._exit(isolation.exit_code(status))
    _, status = os.waitpid(init, 0)
    if isolation.exit_code(status):
        raise SystemExit(isolation.exit_code(status))


# -- the layouts --------------------------------------------------------------------------------
def run_layout(name: str, command: list[str], env: dict[str, str]) -> dict:
    started = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
        out, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        out, code = (exc.stdout or b"").decode() + (exc.stderr or b"").decode(), "timeout"
    ranks = [json.loads(line[5:]) for line in out.splitlines() if line.startswith("RANK {")]
    transports = sorted(set(re.findall(r"via (P2P/\S+|SHM/\S+|NET/\S+|P2P|SHM)", out)))
    return {
        "layout": name,
        "exit": code,
        "seconds": round(time.perf_counter() - started, 1),
        "ranks": ranks,
        "transports": transports,
        "tail": out.strip().splitlines()[-12:],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--inner", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--layouts", default="plain,bwrap-case,nested-case,nested-rank")
    args = parser.parse_args()
    cuda = not args.cpu
    if args.inner == "launch":
        raise SystemExit(launch_ranks(args.world_size, cuda))
    if args.inner == "nested-case":
        isolate(False, lambda: sys.exit(launch_ranks(args.world_size, cuda)))
        return
    if args.inner == "nested-rank":
        raise SystemExit(launch_ranks(args.world_size, cuda, isolate_each=True))

    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES") or k.startswith("NVIDIA")
    }
    env.update(NO_MULTICAST, NCCL_DEBUG="INFO", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    env.update(HOME=tempfile.gettempdir(), TMPDIR=tempfile.gettempdir())
    me = [sys.executable, str(Path(__file__).resolve()), "--world-size", str(args.world_size)]
    me += ["--cpu"] if args.cpu else []
    pool = Path(tempfile.mkdtemp(prefix="kb-probe-pool-"))
    home = Path(tempfile.mkdtemp(prefix="kb-probe-home-"))
    zygote = sandbox.zygote_command(pool, sandbox.zygote_binds(pool, [], [ROOT]))
    case_cage = sandbox.bwrap_command(home, ROOT, [], [ROOT])
    commands = {
        "plain": [*me, "--inner", "launch"],
        "bwrap-case": [*case_cage, *me, "--inner", "launch"],
        "nested-case": [*zygote, *me, "--inner", "nested-case"],
        "nested-rank": [
            *sandbox.zygote_command(
                pool, sandbox.zygote_binds(pool, [], [ROOT]), host_network=True
            ),
            *me,
            "--inner",
            "nested-rank",
        ],
    }
    results = [run_layout(n, commands[n], env) for n in args.layouts.split(",")]
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    for result in results:
        print(
            f"\n== {result['layout']}: exit {result['exit']} in {result['seconds']} s; "
            f"transports {result['transports']}"
        )
        for rank in result["ranks"]:
            print("   ", rank)
        if result["exit"] != 0 or len(result["ranks"]) < args.world_size:
            print("    " + "\n    ".join(result["tail"]))


if __name__ == "__main__":
    main()
