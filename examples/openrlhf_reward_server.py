"""An OpenRLHF remote reward endpoint in front of `kernelboard serve`.

OpenRLHF posts `{"query": [...], "prompts": [...], "labels": [...]}` to `--remote_rm_url` and
reads `{"rewards": [...]}` back (newer versions also read "scores" and "extra_logs"). Here a
query is the prompt followed by the model's response, the response holds the kernel in a fenced
block, and a label names the leaderboard. Start it beside the training run:

    python examples/openrlhf_reward_server.py --port 5000 \\
        --kernelboard-url http://GPU-HOST:8765 --token-file token.txt --mode benchmark
    # then: --remote_rm_url http://127.0.0.1:5000/get_reward

Rewards follow kernelboard_reward.reward (docs/agents.md, "The reward policy").
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelboard_reward import JobFailed, KernelboardClient, score_completions  # noqa: E402

PATH = "/get_reward"


def rewards_for(request: dict[str, Any], client: KernelboardClient, mode: str) -> dict[str, Any]:
    """OpenRLHF's request -> its answer: one reward per query."""
    queries = request.get("query")
    if not isinstance(queries, list):
        raise ValueError("'query' must be a list of strings")
    prompts = request.get("prompts") or [""] * len(queries)
    labels = request.get("labels")
    if not isinstance(labels, list) or len(labels) != len(queries):
        raise ValueError("'labels' must name each query's leaderboard")
    items = []
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        response = query[len(prompt) :] if prompt and query.startswith(prompt) else query
        items.append((label, response))
    scored = score_completions(items, mode=mode, client=client)
    rewards = [score for score, _ in scored]
    return {
        "rewards": rewards,
        "scores": rewards,
        "extra_logs": {
            "correct": [float(bool(r and r.get("correct"))) for _, r in scored],
            "speedup": [float((r or {}).get("speedup") or 0.0) for _, r in scored],
        },
    }


def make_server(host: str, port: int, client: KernelboardClient, mode: str) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
            if self.path != PATH:
                self._answer(404, {"error": f"POST {PATH}"})
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                answer = rewards_for(json.loads(self.rfile.read(length)), client, mode)
            except (ValueError, TypeError) as exc:
                self._answer(400, {"error": str(exc)})
            except JobFailed as exc:
                self._answer(502, {"error": str(exc)})
            else:
                self._answer(200, answer)

        def _answer(self, status: int, document: dict[str, Any]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # one line per request would drown the training log

    return ThreadingHTTPServer((host, port), Handler)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--kernelboard-url", help="default: KERNELBOARD_URL or 127.0.0.1:8765")
    parser.add_argument("--token-file", type=Path, help="the kernelboard server's token")
    parser.add_argument("--mode", default="benchmark", choices=("test", "benchmark"))
    args = parser.parse_args(argv)
    token = args.token_file.read_text().strip() if args.token_file else None
    client = KernelboardClient(args.kernelboard_url, token)
    server = make_server(args.host, args.port, client, args.mode)
    print(f"OpenRLHF reward endpoint: http://{args.host}:{server.server_port}{PATH}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
