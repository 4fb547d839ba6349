"""The reward service's HTTP behaviour with a fake judge: auth, refusals, the queue limit,
long polls, health. The real judge's end to end runs are in test_service_e2e.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from service_helpers import FakeJudge

from pytest_kernelboard.service.app import create_app
from pytest_kernelboard.service.runner import JobRunner
from pytest_kernelboard.service.store import JobStore

TOKEN = "t0ken-for-tests-0123456789"


def serve(
    state: Path,
    judge: FakeJudge,
    body: Callable[[TestClient], Awaitable[None]],
    *,
    token: str | None = None,
    max_queued: int = 100,
    max_body_bytes: int = 1 << 20,
) -> None:
    async def main() -> None:
        runner = JobRunner(JobStore(state), judge, max_queued=max_queued)
        app = create_app(runner, token=token, max_body_bytes=max_body_bytes)
        async with TestClient(TestServer(app)) as client:
            await body(client)
        runner.store.close()

    asyncio.run(main())


def job(*sources: str, leaderboard: str = "addone", mode: str = "test") -> dict:
    return {
        "leaderboard": leaderboard,
        "mode": mode,
        "candidates": [{"id": f"c{i}", "source": s} for i, s in enumerate(sources)],
    }


def test_a_job_is_judged_and_its_records_come_back_in_order(tmp_path: Path) -> None:
    judge = FakeJudge()

    async def body(client: TestClient) -> None:
        posted = await client.post("/v1/jobs", json=job("ok", "wrong", "ok"))
        assert posted.status == 202
        job_id = (await posted.json())["job"]
        assert posted.headers["Location"] == f"/v1/jobs/{job_id}"
        answer = await (await client.get(f"/v1/jobs/{job_id}?wait=30")).json()
        assert answer["state"] == "done" and answer["done"] == answer["total"] == 3
        for wait in ("soon", "-1", "601"):
            refused = await client.get(f"/v1/jobs/{job_id}?wait={wait}")
            assert refused.status == 400 and (await refused.json())["field"] == "wait"
        assert [r["id"] for r in answer["records"]] == ["c0", "c1", "c2"]
        assert [r["correct"] for r in answer["records"]] == [True, False, True]

    serve(tmp_path / "state", judge, body)
    assert judge.calls == [("addone", ["c0", "c1", "c2"], "test")]


def test_without_the_token_every_route_answers_401(tmp_path: Path) -> None:
    async def body(client: TestClient) -> None:
        for method, path in (("POST", "/v1/jobs"), ("GET", "/v1/health"), ("GET", "/v1/jobs/x")):
            for header in ({}, {"Authorization": "Bearer wrong-token-0123456789"}):
                answer = await client.request(method, path, json=job("ok"), headers=header)
                assert answer.status == 401, (method, path, header)
                assert answer.headers["WWW-Authenticate"].startswith("Bearer")
                assert "Bearer" in (await answer.json())["error"]
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert (await client.get("/v1/health", headers=good)).status == 200
        posted = await client.post("/v1/jobs", json=job("ok"), headers=good)
        assert posted.status == 202

    serve(tmp_path / "state", FakeJudge(), body, token=TOKEN)


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ([1, 2], "body"),
        ({"mode": "test", "candidates": [{"id": "a", "source": "x"}]}, "leaderboard"),
        ({"leaderboard": "addone", "mode": "fast", "candidates": []}, "mode"),
        ({"leaderboard": "addone", "candidates": []}, "candidates"),
        ({"leaderboard": "addone", "candidates": [{"id": "a"}]}, "candidates[0].source"),
        (
            {"leaderboard": "addone", "candidates": [{"id": "a", "source": "x", "lang": "rs"}]},
            "candidates[0].lang",
        ),
        (
            {"leaderboard": "addone", "candidates": [{"id": "a", "source": "x", "sorce": "y"}]},
            "candidates[0].sorce",
        ),
        (
            {
                "leaderboard": "addone",
                "candidates": [{"id": "a", "source": "x"}, {"id": "a", "source": "y"}],
            },
            "candidates[1].id",
        ),
        ({"leaderboard": "addone", "candidates": [{"id": "a", "source": "x"}], "x": 1}, "x"),
    ],
)
def test_a_bad_body_is_answered_400_naming_the_field(
    tmp_path: Path, document: object, field: str
) -> None:
    async def body(client: TestClient) -> None:
        answer = await client.post("/v1/jobs", json=document)
        assert answer.status == 400
        reply = await answer.json()
        assert reply["field"] == field and reply["error"].startswith(f"{field}: ")

    serve(tmp_path / "state", FakeJudge(), body)


def test_bodies_that_are_not_json_or_name_no_leaderboard(tmp_path: Path) -> None:
    async def body(client: TestClient) -> None:
        answer = await client.post("/v1/jobs", data=b"{not json")
        assert answer.status == 400 and (await answer.json())["field"] == "body"
        answer = await client.post("/v1/jobs", json=job("ok", leaderboard="nope"))
        assert answer.status == 404 and (await answer.json())["field"] == "leaderboard"
        assert (await client.get("/v1/jobs/0123")).status == 404
        assert (await client.get("/v1/health?x")).status == 200
        assert (await client.delete("/v1/health")).status == 405

    serve(tmp_path / "state", FakeJudge(), body)


def test_a_body_over_the_limit_answers_413(tmp_path: Path) -> None:
    async def body(client: TestClient) -> None:
        answer = await client.post("/v1/jobs", json=job("x" * 5000))
        assert answer.status == 413
        assert (await answer.json()) == {
            "error": "body: over this server's 4096 bytes",
            "field": "body",
        }

    serve(tmp_path / "state", FakeJudge(), body, max_body_bytes=4096)


def test_a_full_queue_answers_429_with_retry_after(tmp_path: Path) -> None:
    gate = threading.Event()  # the judge holds every record until the test lets it go

    async def body(client: TestClient) -> None:
        try:
            first = await client.post("/v1/jobs", json=job("ok", "ok", "ok"))
            assert first.status == 202
            refused = await client.post("/v1/jobs", json=job("ok", "ok"))
            assert refused.status == 429
            assert int(refused.headers["Retry-After"]) >= 1
            assert "3 of 4" in (await refused.json())["error"]
            fits = await client.post("/v1/jobs", json=job("ok"))
            assert fits.status == 202
            health = await (await client.get("/v1/health")).json()
            assert health["queue"] == {"jobs": 2, "candidates": 4, "limit": 4}
            too_big = await client.post("/v1/jobs", json=job(*["ok"] * 5))
            assert too_big.status == 400 and (await too_big.json())["field"] == "candidates"
        finally:
            gate.set()
        first_id = (await first.json())["job"]
        answer = await (await client.get(f"/v1/jobs/{first_id}?wait=30")).json()
        assert answer["state"] == "done"
        again = await client.post("/v1/jobs", json=job("ok", "ok"))
        assert again.status == 202

    serve(tmp_path / "state", FakeJudge(gate), body, max_queued=4)


def test_wait_long_polls_until_the_job_is_done(tmp_path: Path) -> None:
    gate = threading.Event()

    async def body(client: TestClient) -> None:
        job_id = (await (await client.post("/v1/jobs", json=job("ok", "ok"))).json())["job"]
        try:
            early = await (await client.get(f"/v1/jobs/{job_id}?wait=0.2")).json()
            assert early["state"] == "running" and early["done"] == 0 and early["records"] == []
            asyncio.get_running_loop().call_later(0.3, gate.set)
            late = await (await client.get(f"/v1/jobs/{job_id}?wait=30")).json()
            assert late["state"] == "done" and late["done"] == 2
        finally:
            gate.set()

    serve(tmp_path / "state", FakeJudge(gate), body)


def test_jobs_for_one_leaderboard_share_one_judge_call(tmp_path: Path) -> None:
    gate = threading.Event()
    judge = FakeJudge(gate)

    async def body(client: TestClient) -> None:
        try:
            ids = []
            for sources in (("ok",), ("ok", "wrong"), ("ok",)):
                posted = await client.post("/v1/jobs", json=job(*sources))
                ids.append((await posted.json())["job"])
                while not (await (await client.get("/v1/health")).json())["running"]:
                    await asyncio.sleep(0.01)  # the first job is with the judge before the rest
        finally:
            gate.set()
        for job_id in ids:
            answer = await (await client.get(f"/v1/jobs/{job_id}?wait=30")).json()
            assert answer["state"] == "done"
        health = await (await client.get("/v1/health")).json()
        assert health["queue"]["candidates"] == 0 and health["rate_per_minute"] > 0

    serve(tmp_path / "state", judge, body)
    # The first job started alone; the two queued behind it went to the judge together.
    assert [ids for _, ids, _ in judge.calls] == [["c0"], ["c0", "c1", "c0"]]


def test_a_job_done_early_in_a_batch_is_answered_at_once(tmp_path: Path) -> None:
    gates = {"hold-first": threading.Event(), "hold-last": threading.Event()}

    async def body(client: TestClient) -> None:
        try:
            await client.post("/v1/jobs", json=job("hold-first"))  # keeps the judge busy
            while not (await (await client.get("/v1/health")).json())["running"]:
                await asyncio.sleep(0.01)
            early = (await (await client.post("/v1/jobs", json=job("ok"))).json())["job"]
            late = (await (await client.post("/v1/jobs", json=job("hold-last"))).json())["job"]
            gates["hold-first"].set()  # the next batch: `early` and `late` together
            started = asyncio.get_running_loop().time()
            answer = await (await client.get(f"/v1/jobs/{early}?wait=30")).json()
            assert answer["state"] == "done"
            assert asyncio.get_running_loop().time() - started < 10  # not the 30 s wait
            pending = await (await client.get(f"/v1/jobs/{late}")).json()
            assert pending["state"] == "running" and pending["done"] == 0
        finally:
            for gate in gates.values():
                gate.set()

    judge = FakeJudge(gates=gates)
    serve(tmp_path / "state", judge, body)
    assert [ids for _, ids, _ in judge.calls] == [["c0"], ["c0", "c0"]]


def test_a_judge_that_raises_fails_the_job_with_its_message(tmp_path: Path) -> None:
    class Exploding(FakeJudge):
        def __call__(self, leaderboard, candidates, mode):
            yield from super().__call__(leaderboard, candidates[:1], mode)
            raise RuntimeError("GPU fell off the bus")

    async def body(client: TestClient) -> None:
        job_id = (await (await client.post("/v1/jobs", json=job("ok", "ok"))).json())["job"]
        answer = await (await client.get(f"/v1/jobs/{job_id}?wait=30")).json()
        assert answer["state"] == "failed" and answer["done"] == 1
        assert "GPU fell off the bus" in answer["error"]

    serve(tmp_path / "state", Exploding(), body)
