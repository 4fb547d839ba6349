"""`kernelboard site build` and `kernelboard site serve`."""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import http.server
import sys
from pathlib import Path

from pytest_kernelboard.spec.discovery import find_repo_root
from pytest_kernelboard.spec.task import TaskError
from pytest_kernelboard.utc import parse_utc

from .build import BuildError, build_site
from .local import LocalRunError


def _root(args: argparse.Namespace) -> Path | None:
    if args.root:
        return Path(args.root)
    root = find_repo_root(Path.cwd())
    if root is None:
        print(
            "kernelboard site: no leaderboards/ folder here or above; pass --root", file=sys.stderr
        )
    return root


def _now(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return parse_utc(text)


def _build(args: argparse.Namespace) -> bool:
    root = _root(args)
    if root is None:
        return False
    try:
        stats = build_site(
            root,
            Path(args.out),
            now=_now(args.now),
            workers=args.workers,
            cache_dir=Path(args.cache) if args.cache else None,
            local=[Path(p) for p in args.local],
        )
    except (BuildError, TaskError, LocalRunError) as exc:
        print(f"kernelboard site build: {exc}", file=sys.stderr)
        return False
    print(
        f"built {args.out}: {stats['pages']} pages from {stats['runs']} runs "
        f"in {stats['total_s']:.2f} s (read {stats['load_s']:.2f} s, render {stats['render_s']:.2f} s)"
    )
    if stats["local"]:
        print(f"previewing {stats['local']} local runs, marked local and unranked (not filed)")
    if stats["skipped"]:
        print(f"warning: {stats['skipped']} records skipped (see above)", file=sys.stderr)
    return True


def cmd_build(args: argparse.Namespace) -> int:
    return 0 if _build(args) else 1


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args) -> None:  # noqa: A002 - signature from the base class
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def serve(
    directory: Path, host: str = "127.0.0.1", port: int = 8000
) -> http.server.ThreadingHTTPServer:
    """An HTTP server for a built site (not started; call serve_forever)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer((host, port), handler)


def cmd_serve(args: argparse.Namespace) -> int:
    if not args.no_build and not _build(args):
        return 1
    out = Path(args.out)
    if not (out / "index.html").is_file():
        print(
            f"kernelboard site serve: {out} holds no built site; run `kernelboard site build`",
            file=sys.stderr,
        )
        return 1
    server = serve(out, args.host, args.port)
    host, port = server.server_address[:2]
    print(f"serving {out} at http://{host}:{port}/  (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("site", help="build or serve the static leaderboard site")
    sub = parser.add_subparsers(dest="site_command", required=True, metavar="ACTION")
    for name, func, help_text in (
        ("build", cmd_build, "render leaderboards/ and results/ into a folder"),
        ("serve", cmd_serve, "build, then serve the site on 127.0.0.1"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--out", default="_site", help="output folder (default: _site)")
        p.add_argument("--root", help="repository root (default: found from the current folder)")
        p.add_argument("--now", help="build as if at this UTC time (ISO 8601); default: now")
        p.add_argument("--workers", type=int, help="processes to use (default: the CPU count)")
        p.add_argument(
            "--cache", help="keep highlighted code here between builds, e.g. .kb-cache/site"
        )
        p.add_argument(
            "--local",
            metavar="RUN.json",
            action="append",
            default=[],
            help="preview a local run (`pytest ... --kb-results RUN.json`) on the site, marked "
            "local and unranked; nothing is filed (repeatable)",
        )
        p.set_defaults(func=func)
        if name == "serve":
            p.add_argument(
                "--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)"
            )
            p.add_argument(
                "--port",
                type=int,
                default=8000,
                help="port to listen on (default: 8000; 0: any free)",
            )
            p.add_argument("--no-build", action="store_true", help="serve --out as it is")
