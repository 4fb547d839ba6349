"""`kernelboard serve`: the batch judge behind HTTP, for training loops.

It listens on loopback unless told otherwise, and refuses another address without a token file;
it refuses to start where the worker sandbox cannot run unless told so explicitly, because every
candidate is untrusted code.
"""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
DEFAULT_MAX_QUEUE = 4096


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "serve",
        help="judge candidates over HTTP for training loops (the reward service)",
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help="address to listen on (default %(default)s: loopback only; any other address "
        "needs --token-file)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="port to listen on (default %(default)s; 0 picks a free port and prints it)",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="file holding the bearer token every request must carry (default: none, "
        "no token asked; required off loopback)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS|local",
        help="judge on every GPU of a Ray cluster ('local' starts one on this host; "
        "default: this host's own GPUs, without Ray)",
    )
    parser.add_argument(
        "--state",
        type=Path,
        metavar="DIR",
        help="folder of jobs and records, resumed on restart (default: a temporary folder)",
    )
    parser.add_argument(
        "--root",
        type=Path,
        metavar="DIR",
        help="repository whose leaderboards/ the jobs name (default: found from the current "
        "folder)",
    )
    parser.add_argument(
        "--max-queue",
        type=int,
        metavar="N",
        default=DEFAULT_MAX_QUEUE,
        help="candidates waiting at most; more are answered 429 (default %(default)s)",
    )
    parser.add_argument(
        "--keep-days",
        type=float,
        default=7.0,
        metavar="DAYS",
        help="forget finished jobs after this many days (default %(default)g)",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="judge without the worker sandbox where bubblewrap cannot run (as "
        "KERNELBOARD_SANDBOX=off): candidates then see this user's files (default: off, the "
        "sandbox is required)",
    )
    parser.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    from .server import serve  # aiohttp and the judge load only when serving

    return serve(args)
