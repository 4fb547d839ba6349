"""The verl and OpenRLHF example clients score a small batch against a local `kernelboard serve`
(the real judge, test mode, a token)."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_helpers import CORRECT, WRONG, ServerProcess, load_example

FIXTURES = Path(__file__).parent / "fixtures"

TOKEN = "example-token-0123456789abcdef"


def fenced(source: str, tag: str = "python") -> str:
    return f"Here is my kernel.\n```{tag}\n{source}```\nIt adds one."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("example-clients")
    root = folder / "repo"
    shutil.copytree(FIXTURES / "core", root)
    (folder / "token").write_text(TOKEN)
    (folder / "token").chmod(0o600)
    process = ServerProcess(root, folder / "state", "--token-file", str(folder / "token"))
    try:
        yield process.url
    finally:
        process.stop()


@pytest.fixture
def client_environment(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELBOARD_URL", server)
    monkeypatch.setenv("KERNELBOARD_TOKEN", TOKEN)


def test_verl_compute_score_scores_a_batch(client_environment: None) -> None:
    verl = load_example("verl_reward")
    completions = [fenced(CORRECT), fenced(WRONG), "I could not write it."]
    scores = verl.compute_score_batch(
        data_sources=["kernels"] * 3,
        solution_strs=completions,
        ground_truths=["addone"] * 3,
        extra_infos=[{"mode": "test"}] * 3,
    )
    assert [s["score"] for s in scores] == [1.0, 0.0, 0.0]
    assert [s["correct"] for s in scores] == [1.0, 0.0, 0.0]
    assert [s["has_kernel"] for s in scores] == [1.0, 1.0, 0.0]
    one = verl.compute_score("kernels", fenced(CORRECT), "addone", {"mode": "test"})
    assert one["score"] == 1.0 and set(one) == set(scores[0])


def test_the_openrlhf_endpoint_scores_a_batch(client_environment: None) -> None:
    adapter = load_example("openrlhf_reward_server")
    client = load_example("kernelboard_reward").KernelboardClient()
    endpoint = adapter.make_server("127.0.0.1", 0, client, "test")
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    prompt = "Write custom_kernel for addone.\n"
    body = {
        "query": [prompt + fenced(WRONG), prompt + fenced(CORRECT, "py"), prompt + "no idea"],
        "prompts": [prompt] * 3,
        "labels": ["addone"] * 3,
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{endpoint.server_port}/get_reward",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as reply:
            answer = json.loads(reply.read())
        bad = urllib.request.Request(
            f"http://127.0.0.1:{endpoint.server_port}/get_reward",
            data=json.dumps({"query": ["x"], "labels": []}).encode(),
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bad, timeout=60)
        assert refused.value.code == 400
    finally:
        endpoint.shutdown()
    assert answer["rewards"] == [0.0, 1.0, 0.0] == answer["scores"]
    assert answer["extra_logs"]["correct"] == [0.0, 1.0, 0.0]
