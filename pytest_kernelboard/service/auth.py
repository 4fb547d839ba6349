"""The bearer token: read from a file (never the command line, where `ps` shows it), checked on
every request in constant time."""

from __future__ import annotations

import hmac
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web

from ..errors import KernelboardError
from .responses import error_response

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class TokenError(KernelboardError, ValueError):
    """The token file cannot serve as one; the message names it."""


def read_token(path: Path) -> str:
    """The token in `path` (surrounding whitespace dropped); warns when others may read it."""
    try:
        token = path.read_text(encoding="utf-8").strip()
        mode = path.stat().st_mode
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"--token-file {path}: cannot read it ({exc})") from None
    if len(token) < 16 or any(ch.isspace() for ch in token):
        raise TokenError(
            f"--token-file {path}: the token must be one word of at least 16 characters "
            "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
        )
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        print(
            f"kernelboard serve: warning: {path} is readable by other users (chmod 600 it)",
            file=sys.stderr,
        )
    return token


def bearer_middleware(
    token: str,
) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def check_token(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            return error_response(
                401,
                "this server needs `Authorization: Bearer <token>` with the token it was "
                "started with",
                headers={"WWW-Authenticate": 'Bearer realm="kernelboard"'},
            )
        return await handler(request)

    return check_token
