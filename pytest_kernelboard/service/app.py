"""The HTTP routes of `kernelboard serve` (aiohttp).

    POST /v1/jobs          {"leaderboard", "mode", "candidates"} -> 202 {"job": id, "total": n}
    GET  /v1/jobs/<id>     {"state", "done", "total", "records": [...]}; ?wait=S long-polls
    GET  /v1/health        judges, GPUs, queue depth, judging rate

Refusals: 400 names the field, 401 without the token, 404 an unknown job or leaderboard,
413 a body over the size limit, 429 a full queue (with Retry-After).
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback

from aiohttp import web

from .auth import Handler, bearer_middleware
from .jobs import BadJob, parse_job
from .responses import error_response, json_response
from .runner import JobRunner, QueueFull

MAX_WAIT_S = 600.0  # one long poll; a client polls again for longer
MAX_BODY_BYTES = 64 << 20  # about 60 candidates of the largest source a job may hold
RUNNER = web.AppKey("runner", JobRunner)
BODY_LIMIT = web.AppKey("body_limit", int)


def create_app(
    runner: JobRunner, *, token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES
) -> web.Application:
    """The application; it starts the runner (resuming the state folder) and stops it."""
    middlewares = [_explained_errors]
    if token is not None:
        middlewares.append(bearer_middleware(token))
    app = web.Application(client_max_size=max_body_bytes, middlewares=middlewares)
    app[RUNNER] = runner
    app[BODY_LIMIT] = max_body_bytes
    app.router.add_post("/v1/jobs", post_job)
    app.router.add_get("/v1/jobs/{job}", get_job)
    app.router.add_get("/v1/health", health)

    async def start(app: web.Application) -> None:
        await app[RUNNER].start()

    async def stop(app: web.Application) -> None:
        await app[RUNNER].stop()

    app.on_startup.append(start)
    app.on_cleanup.append(stop)
    return app


async def post_job(request: web.Request) -> web.Response:
    runner = request.app[RUNNER]
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError) as exc:
        return error_response(400, f"body: not JSON ({exc})", field="body")
    try:
        job_request = parse_job(body, max_candidates=runner.max_queued)
    except BadJob as exc:
        return error_response(400, str(exc), field=exc.field)
    if not await asyncio.to_thread(runner.judge.knows, job_request.leaderboard):
        return error_response(
            404,
            f"leaderboard: no leaderboard {job_request.leaderboard!r} in this server's repository",
            field="leaderboard",
        )
    try:
        job = await runner.submit(job_request)
    except QueueFull as exc:
        return error_response(429, str(exc), headers={"Retry-After": str(exc.retry_after)})
    return json_response(
        202, {"job": job.id, "total": job.total}, headers={"Location": f"/v1/jobs/{job.id}"}
    )


async def get_job(request: web.Request) -> web.Response:
    runner = request.app[RUNNER]
    job = runner.get(request.match_info["job"])
    if job is None:
        return error_response(404, f"no job {request.match_info['job']!r} on this server")
    try:
        wait_s = float(request.query.get("wait", "0"))
    except ValueError:
        wait_s = -1.0
    if not 0.0 <= wait_s <= MAX_WAIT_S:
        return error_response(400, f"wait: expected seconds from 0 to {MAX_WAIT_S:g}", field="wait")
    view = await runner.view(job, wait_s)
    # The records go out as they were written to the state folder, never re-encoded.
    head = json.dumps({**view.header(), "records": []}).encode()
    body = head[: -len(b"]}")] + b",".join(view.records) + b"]}"
    return web.Response(body=body, content_type="application/json")


async def health(request: web.Request) -> web.Response:
    return json_response(200, request.app[RUNNER].health())


@web.middleware
async def _explained_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """aiohttp's own refusals (no such route, wrong method, body too large) and anything
    unforeseen answer JSON like every other error."""
    try:
        return await handler(request)
    except web.HTTPRequestEntityTooLarge:
        limit = request.app[BODY_LIMIT]
        return error_response(413, f"body: over this server's {limit} bytes", field="body")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason, headers=_allow(exc))
    except Exception as exc:  # noqa: BLE001 (the client gets a line, the log the traceback)
        traceback.print_exc(file=sys.stderr)
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")


def _allow(exc: web.HTTPException) -> dict[str, str] | None:
    allow = exc.headers.get("Allow")
    return {"Allow": allow} if allow else None
