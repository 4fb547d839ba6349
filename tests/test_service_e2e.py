"""`kernelboard serve` end to end with the real batch judge on the fixture repository: the API
over a real socket, a SIGKILL mid-job and a restart, and the start-up refusals."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from service_helpers import BROKEN, CORRECT, WRONG, ServerProcess, call

from pytest_kernelboard.cli import main
from pytest_kernelboard.service.server import require_sandbox
from pytest_kernelboard.supervisor import sandbox

TOKEN = "e2e-token-0123456789abcdef"


def candidates(*sources: str) -> list[dict[str, str]]:
    return [{"id": f"cand-{i}", "source": source} for i, source in enumerate(sources)]


def verdicts(records: list[dict]) -> list[tuple]:
    return [(r["id"], r["status"], r["correct"], r["error_kind"]) for r in records]


def test_the_http_api_judges_a_mixed_job(core_repo: Path, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    server = ServerProcess(core_repo, tmp_path / "state", "--token-file", str(token_file))
    try:
        job = {
            "leaderboard": "addone",
            "mode": "test",
            "candidates": candidates(CORRECT, WRONG, BROKEN),
        }
        status, _, answer = call(f"{server.url}/v1/jobs", "POST", job)
        assert status == 401 and "Bearer" in answer["error"]
        status, _, answer = call(f"{server.url}/v1/jobs", "POST", {"leaderboard": "addone"}, TOKEN)
        assert status == 400 and answer["field"] == "candidates"
        status, _, answer = call(
            f"{server.url}/v1/jobs", "POST", {**job, "leaderboard": "x"}, TOKEN
        )
        assert status == 404
        status, _, answer = call(f"{server.url}/v1/jobs", "POST", job, TOKEN)
        assert status == 202
        job_id = answer["job"]
        while answer.get("state") not in ("done", "failed"):
            status, _, answer = call(f"{server.url}/v1/jobs/{job_id}?wait=60", token=TOKEN)
            assert status == 200
        assert answer["state"] == "done" and answer["done"] == answer["total"] == 3
        got = verdicts(answer["records"])
        assert got[0] == ("cand-0", "passed", True, None)
        assert got[1] == ("cand-1", "failed", False, "incorrect_numerical")
        assert got[2][:3] == ("cand-2", "error", False) and got[2][3] is not None
        status, _, health = call(f"{server.url}/v1/health", token=TOKEN)
        assert status == 200 and health["judges"] >= 1 and health["queue"]["candidates"] == 0
    finally:
        assert server.stop() == 0


@pytest.mark.runs_long
def test_a_server_killed_mid_job_finishes_it_after_a_restart(
    core_repo: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    sources = (CORRECT, WRONG, CORRECT, BROKEN, WRONG)
    job = {"leaderboard": "addone", "mode": "test", "candidates": candidates(*sources)}
    server = ServerProcess(core_repo, state)
    try:
        status, _, answer = call(f"{server.url}/v1/jobs", "POST", job)
        assert status == 202
        job_id = answer["job"]
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            _, _, answer = call(f"{server.url}/v1/jobs/{job_id}")
            if answer["done"] >= 1:
                break
            time.sleep(0.05)
    finally:
        server.kill()  # SIGKILL to the server and every worker it started
    killed_at = answer["done"]
    assert 1 <= killed_at < len(sources), "the kill must land in the middle of the job"

    server = ServerProcess(core_repo, state)
    try:
        _, _, answer = call(f"{server.url}/v1/jobs/{job_id}")
        assert answer["done"] >= killed_at  # what was finished before the kill is still there
        while answer["state"] not in ("done", "failed"):
            _, _, answer = call(f"{server.url}/v1/jobs/{job_id}?wait=60")
    finally:
        assert server.stop() == 0
    assert answer["state"] == "done"
    assert [r["id"] for r in answer["records"]] == [c["id"] for c in job["candidates"]]
    expected = ["passed", "failed", "passed", "error", "failed"]
    assert [r["status"] for r in answer["records"]] == expected
    on_disk = (state / "jobs" / job_id / "records.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in on_disk] == [c["id"] for c in job["candidates"]]


def test_serve_refuses_to_start_without_the_sandbox_unless_told(
    core_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(sandbox.POLICY_VARIABLE, "auto")
    monkeypatch.setattr(sandbox, "probe", lambda: "bwrap is not installed")
    assert main(["serve", "--port", "0", "--root", str(core_repo)]) == 2
    err = capsys.readouterr().err
    assert "untrusted code" in err and "bwrap is not installed" in err and "--no-sandbox" in err
    # Told explicitly, it goes on, says so, and every worker starts unsandboxed.
    assert require_sandbox(no_sandbox=True).startswith("sandbox: OFF")
    assert os.environ[sandbox.POLICY_VARIABLE] == "off"


def test_with_the_sandbox_every_worker_must_use_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.POLICY_VARIABLE, "auto")
    monkeypatch.setattr(sandbox, "probe", lambda: None)
    assert require_sandbox(no_sandbox=False) == "sandbox: on"
    assert os.environ[sandbox.POLICY_VARIABLE] == "require"


def test_serve_refuses_another_address_without_a_token(
    core_repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(sandbox.POLICY_VARIABLE, "off")
    serve = ["serve", "--port", "0", "--root", str(core_repo)]
    assert main([*serve, "--host", "0.0.0.0"]) == 2
    assert "pass --token-file" in capsys.readouterr().err
    short = tmp_path / "short"
    short.write_text("abc")
    assert main([*serve, "--token-file", str(short)]) == 2
    assert f"--token-file {short}: the token must be" in capsys.readouterr().err
    assert main([*serve, "--root", str(tmp_path)]) == 2
    assert "no leaderboards/ folder" in capsys.readouterr().err
