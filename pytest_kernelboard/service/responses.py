"""Every answer that is not a success has one shape: {"error": "...", "field": "..."}."""

from __future__ import annotations

import json
from collections.abc import Mapping

from aiohttp import web


def json_response(
    status: int, document: object, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        status=status,
        body=json.dumps(document).encode(),
        content_type="application/json",
        headers=headers,
    )


def error_response(
    status: int,
    message: str,
    *,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> web.Response:
    document = {"error": message}
    if field is not None:
        document["field"] = field
    return json_response(status, document, headers)
