"""Judging on a local Ray cluster (CPU actors, as CI runs it) gives a local run's verdicts, through
the Python API and through `kernelboard serve --ray local`, and survives a lost actor."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_helpers import BROKEN, CORRECT, WRONG, ServerProcess, call

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
pytestmark = pytest.mark.runs_long  # each starts a local Ray cluster: 9 - 18 s

from pytest_kernelboard.batch import Candidate, judge_many  # noqa: E402
from pytest_kernelboard.batch.ray_judges import RayJudges, judge_many_on_ray  # noqa: E402

SOURCES = (CORRECT, WRONG, BROKEN, CORRECT)


def batch() -> list[Candidate]:
    return [Candidate(f"cand-{i}", source) for i, source in enumerate(SOURCES)]


def verdicts(records: list[dict]) -> list[tuple]:
    return [
        (r["id"], r["status"], r["correct"], r["error_kind"], sorted(r["flags"])) for r in records
    ]


def test_ray_local_gives_the_same_verdicts_as_a_local_run(core_repo: Path) -> None:
    local = verdicts(list(judge_many("addone", batch(), root=core_repo)))
    on_ray = verdicts(
        list(judge_many_on_ray("local", "addone", batch(), root=core_repo, cpus_per_judge=1))
    )
    assert on_ray == local
    assert [v[1] for v in local] == ["passed", "failed", "error", "passed"]
    assert not ray.is_initialized()  # the cluster it started is gone with the call


def test_a_lost_actor_hands_its_share_to_another(
    core_repo: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    judges = RayJudges("local", root=core_repo, cpus_per_judge=1)
    try:
        assert judges.capacity()["judges"] == 2  # two CPUs here, one per judge
        lost = judges._members[1]
        # The second actor (candidates 1 and 3) is lost while the batch starts: it dies long
        # before it could judge its share.
        ray.kill(lost.actor)
        records = list(judges.judge("addone", batch()))
    finally:
        judges.close()
    assert f"the judge actor on {lost.node} is left out: died" in capfd.readouterr().err
    assert [r["id"] for r in records] == [c.id for c in batch()]
    assert [r["status"] for r in records] == ["passed", "failed", "error", "passed"]


def test_serve_with_ray_local_answers_over_http(core_repo: Path, tmp_path: Path) -> None:
    server = ServerProcess(core_repo, tmp_path / "state", "--ray", "local")
    try:
        job = {
            "leaderboard": "addone",
            "candidates": [{"id": c.id, "source": c.source} for c in batch()],
        }
        status, _, answer = call(f"{server.url}/v1/jobs", "POST", job)
        assert status == 202
        job_id = answer["job"]
        while answer.get("state") not in ("done", "failed"):
            _, _, answer = call(f"{server.url}/v1/jobs/{job_id}?wait=60")
        _, _, health = call(f"{server.url}/v1/health")
    finally:
        assert server.stop() == 0
    assert answer["state"] == "done", answer.get("error")
    assert [r["status"] for r in answer["records"]] == ["passed", "failed", "error", "passed"]
    assert health["judge"].startswith("Ray cluster") and health["judges"] >= 1
