"""The PyGithub layer against a local server that speaks the few REST endpoints it uses."""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from pytest_kernelboard.pr.comment import MARKER
from pytest_kernelboard.pr.github import GitHubClient

REPO = "octo/board"
SHA = "a" * 40


class FakeGitHub:
    """Just enough of the REST API; every request is recorded."""

    def __init__(self):
        self.requests: list[dict] = []
        self.comments: dict[int, dict] = {}
        self.next_id = 100
        self.statuses: list[dict] = []
        self.runs: list[dict] = []
        self.base = ""

    def comment_json(self, cid):
        c = self.comments[cid]
        return {
            "id": cid,
            "body": c["body"],
            "url": f"{self.base}/repos/{REPO}/issues/comments/{cid}",
            "html_url": f"https://example.invalid/{cid}",
            "user": {"login": c["user"]},
        }

    def handle(self, method, path, query, body):
        m = re.fullmatch(rf"/repos/{REPO}/issues/(\d+)/comments", path)
        if m and method == "GET":
            items = [
                self.comment_json(c)
                for c in sorted(self.comments)
                if self.comments[c]["issue"] == int(m[1])
            ]
            return 200, items
        if m and method == "POST":
            cid = self.next_id
            self.next_id += 1
            self.comments[cid] = {
                "issue": int(m[1]),
                "body": body["body"],
                "user": "github-actions[bot]",
            }
            return 201, self.comment_json(cid)
        m = re.fullmatch(rf"/repos/{REPO}/issues/comments/(\d+)", path)
        if m and method == "PATCH":
            self.comments[int(m[1])]["body"] = body["body"]
            return 200, self.comment_json(int(m[1]))
        m = re.fullmatch(rf"/repos/{REPO}/statuses/([0-9a-f]{{40}})", path)
        if m and method == "POST":
            self.statuses.append({"sha": m[1], **body})
            return 201, {
                "id": len(self.statuses),
                "state": body["state"],
                "context": body.get("context"),
            }
        m = re.fullmatch(rf"/repos/{REPO}/pulls/(\d+)", path)
        if m and method == "GET":
            return 200, {
                "number": int(m[1]),
                "url": f"{self.base}/repos/{REPO}/pulls/{m[1]}",
                "state": "open",
                "user": {"login": "alice"},
                "author_association": "CONTRIBUTOR",
                "head": {"sha": SHA, "ref": "topic"},
                "base": {"sha": "b" * 40, "ref": "main"},
            }
        m = re.fullmatch(rf"/repos/{REPO}/actions/workflows/([^/]+)/runs", path)
        if m and method == "GET":
            actor = query.get("actor", [None])[0]
            runs = [r for r in self.runs if actor is None or r["actor"]["login"] == actor]
            return 200, {"total_count": len(runs), "workflow_runs": runs}
        return 404, {"message": "Not Found"}


@pytest.fixture
def server():
    fake = FakeGitHub()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self):
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            query = parse_qs(parts.query)
            fake.requests.append(
                {
                    "method": self.command,
                    "path": parts.path,
                    "query": query,
                    "body": body,
                    "auth": self.headers.get("Authorization"),
                }
            )
            status, payload = fake.handle(self.command, parts.path, query, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = _serve

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.base = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()


def client(fake):
    return GitHubClient(REPO, "test-token", api_url=fake.base, throttle=False)


def writes(fake):
    return [(r["method"], r["path"]) for r in fake.requests if r["method"] != "GET"]


def test_comment_is_created_then_updated_in_place(server):
    gh = client(server)
    server.comments[1] = {"issue": 7, "body": "unrelated human comment", "user": "bob"}

    action, cid = gh.upsert_comment(7, f"{MARKER}\nfirst body")
    assert action == "created"
    assert writes(server) == [("POST", f"/repos/{REPO}/issues/7/comments")]
    assert server.requests[-1]["body"] == {"body": f"{MARKER}\nfirst body"}
    assert server.requests[-1]["auth"] == "token test-token"

    action2, cid2 = gh.upsert_comment(7, f"{MARKER}\nsecond body")
    assert (action2, cid2) == ("updated", cid)
    assert writes(server)[-1] == ("PATCH", f"/repos/{REPO}/issues/comments/{cid}")
    assert server.comments[cid]["body"] == f"{MARKER}\nsecond body"
    assert server.comments[1]["body"] == "unrelated human comment"
    # one marked comment on the pull request, ever
    assert sum(MARKER in c["body"] for c in server.comments.values()) == 1

    action3, _ = gh.upsert_comment(7, f"{MARKER}\nsecond body")
    assert action3 == "unchanged"
    assert len(writes(server)) == 2


def test_marker_is_added_when_missing(server):
    gh = client(server)
    gh.upsert_comment(3, "plain")
    assert server.requests[-1]["body"]["body"].startswith(MARKER)


def test_commit_status_per_device(server):
    gh = client(server)
    gh.set_status(
        SHA, "kernelboard/H100", "success", "passed: 3/3 tests", "https://example.invalid/run"
    )
    gh.set_status(SHA, "kernelboard/A100", "failure", "x" * 300)
    assert writes(server) == [("POST", f"/repos/{REPO}/statuses/{SHA}")] * 2
    first, second = server.statuses
    assert first == {
        "sha": SHA,
        "state": "success",
        "context": "kernelboard/H100",
        "description": "passed: 3/3 tests",
        "target_url": "https://example.invalid/run",
    }
    assert second["state"] == "failure" and len(second["description"]) == 140
    assert "target_url" not in second


def test_pull_request_facts(server):
    facts = client(server).pull_request(7)
    assert (facts.author, facts.association, facts.head_sha) == ("alice", "CONTRIBUTOR", SHA)
    assert server.requests[-1]["path"] == f"/repos/{REPO}/pulls/7"


def test_count_recent_runs_uses_actor_and_window(server):
    server.runs = [
        {"id": 1, "actor": {"login": "alice"}},
        {"id": 2, "actor": {"login": "alice"}},
        {"id": 3, "actor": {"login": "bob"}},
    ]
    until = dt.datetime(2030, 5, 1, 12, 0, tzinfo=dt.UTC)
    count = client(server).count_recent_runs("alice", until, exclude_run_id=2)
    assert count == 1
    request = server.requests[-1]
    assert request["path"] == f"/repos/{REPO}/actions/workflows/evaluate.yml/runs"
    assert request["query"]["actor"] == ["alice"]
    assert request["query"]["created"] == ["2030-05-01T11:00:00Z..2030-05-01T12:00:00Z"]


def test_from_env_requires_token():
    with pytest.raises(RuntimeError):
        GitHubClient.from_env({"GITHUB_REPOSITORY": REPO})
    gh = GitHubClient.from_env({"GITHUB_REPOSITORY": REPO, "GITHUB_TOKEN": "t"})
    assert gh.repository == REPO
