"""What `kernelboard serve` does: check that it may start, then listen until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from aiohttp import web

from ..errors import KernelboardError
from ..spec.discovery import find_repo_root
from ..supervisor import sandbox
from .app import RUNNER, create_app
from .auth import read_token
from .judges import Judge, LocalJudge, RayJudge
from .runner import JobRunner
from .store import JobStore

# The first line a started server prints (_listen): clients that start one read its URL there.
_STARTED = re.compile(r"kernelboard serve: (http://\S+)")


def started_url(output: Iterable[bytes | str]) -> str | None:
    """The URL in a starting server's output (its stdout, line by line); None if the output
    ends before the server says where it listens."""
    for line in output:
        found = _STARTED.search(line.decode() if isinstance(line, bytes) else line)
        if found:
            return found.group(1)
    return None


class ServeRefused(KernelboardError, RuntimeError):
    """The server will not start as asked; the message says what to change."""


def serve(args: argparse.Namespace) -> int:
    state = args.state
    store = None
    try:
        sandbox_line = require_sandbox(args.no_sandbox)
        token = read_token(args.token_file) if args.token_file else None
        if token is None and not is_loopback(args.host):
            raise ServeRefused(
                f"--host {args.host} is reachable from other machines and every job runs code: "
                "pass --token-file FILE"
            )
        if args.max_queue < 1:
            raise ServeRefused(f"--max-queue {args.max_queue}: expected at least 1")
        root = args.root or find_repo_root(Path.cwd())
        if root is None or not (root / "leaderboards").is_dir():
            raise ServeRefused(
                f"no leaderboards/ folder at or above {args.root or Path.cwd()}: pass --root"
            )
        if state is None:
            state = Path(tempfile.mkdtemp(prefix="kernelboard-serve-"))
        store = JobStore(state)
        judge: Judge = RayJudge(root, args.ray) if args.ray else LocalJudge(root)
    except (KernelboardError, sandbox.SandboxUnavailable) as exc:
        print(f"kernelboard serve: {exc}", file=sys.stderr)
        if store is not None:
            store.close()
        if state is not None and args.state is None:
            shutil.rmtree(state, ignore_errors=True)
        return 2
    runner = JobRunner(
        store, judge, max_queued=args.max_queue, keep_done_s=args.keep_days * 86400.0
    )
    app = create_app(runner, token=token)
    kept = "kept across restarts" if args.state else "temporary: pass --state DIR to keep it"
    try:
        asyncio.run(_listen(app, args.host, args.port, f"{sandbox_line}; state: {state} ({kept})"))
    except OSError as exc:  # the port is taken, the address is not this host's
        print(
            f"kernelboard serve: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr
        )
        return 2
    except KernelboardError as exc:  # the state folder does not read back
        print(f"kernelboard serve: {exc}", file=sys.stderr)
        return 2
    finally:
        judge.close()
        store.close()
        if args.state is None:
            shutil.rmtree(state, ignore_errors=True)
    return 0


def require_sandbox(no_sandbox: bool) -> str:
    """Refuse to serve untrusted code unsandboxed unless told so; the line says which it is."""
    if no_sandbox:
        os.environ[sandbox.POLICY_VARIABLE] = "off"
    if sandbox.policy() == "off":
        return "sandbox: OFF (candidates can read this user's files)"
    reason = sandbox.probe()
    if reason is not None:
        raise ServeRefused(
            f"every candidate is untrusted code and the worker sandbox cannot run here ({reason}); "
            f"install bubblewrap, or pass --no-sandbox ({sandbox.POLICY_VARIABLE}=off) to judge "
            "without it"
        )
    # A worker the sandbox cannot hold fails its candidate rather than run it bare.
    os.environ[sandbox.POLICY_VARIABLE] = "require"
    return "sandbox: on"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to any interface


async def _listen(app: web.Application, host: str, port: int, details: str) -> None:
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()  # starts the job runner: unfinished jobs resume
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        job_runner = app[RUNNER]
        capacity = job_runner.judge.capacity()
        print(
            f"kernelboard serve: http://{shown}:{bound_port} (judge: "
            f"{job_runner.judge.description}, {capacity['judges']} judge(s), "
            f"{capacity['gpus']} GPU(s); {details})",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        print("kernelboard serve: stopping (unfinished jobs resume on the next start)", flush=True)
    finally:
        await runner.cleanup()  # stops the job runner after the record being judged
