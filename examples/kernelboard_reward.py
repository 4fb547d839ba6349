"""A reward from `kernelboard serve`: a model's completion in, a scalar out.

Standard library only, so it drops into any training environment. The two adapters beside it
(verl_reward.py, openrlhf_reward_server.py) are thin layers over `score_completions`.

- `extract_source`: the kernel in a completion: its last fenced code block in Python or CUDA
  (```python / ```py / untagged -> "py"; ```cuda / ```cu / ```cpp / ```c++ -> "cu").
- `KernelboardClient`: POST /v1/jobs, then long-polls GET /v1/jobs/<id> until the job is done;
  a full queue (429) is retried after its Retry-After.
- `RewardPolicy` / `reward`: the record -> reward policy (docs/agents.md, "The reward policy"):
  anything but a passed, correct record scores 0; a correct one scores `correct` plus
  `speedup_weight` per doubling of speed (speedup capped at `max_speedup`, the total floored at
  `floor`, so a correct kernel always beats a wrong one); each flag subtracts its penalty, and a
  flag in `untrusted_speedup` also voids the speed bonus. Nothing goes below 0.

Configuration from the environment: KERNELBOARD_URL (default http://127.0.0.1:8765),
KERNELBOARD_TOKEN or KERNELBOARD_TOKEN_FILE, KERNELBOARD_MODE (default "benchmark").
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:8765"
_FENCE = re.compile(r"```[ \t]*([^\n`]*)\n(.*?)```", re.DOTALL)
_LANG_TAGS = {
    "": "py",
    "python": "py",
    "py": "py",
    "python3": "py",
    "cuda": "cu",
    "cu": "cu",
    "cpp": "cu",
    "c++": "cu",
}


def extract_source(completion: str) -> tuple[str, str] | None:
    """(source, lang) of the completion's last Python or CUDA fenced block; None without one."""
    found = None
    for match in _FENCE.finditer(completion):
        tag = match.group(1).strip().lower().split()[0] if match.group(1).strip() else ""
        lang = _LANG_TAGS.get(tag)
        if lang is not None and match.group(2).strip():
            found = (match.group(2), lang)
    return found


@dataclass(frozen=True)
class RewardPolicy:
    correct: float = 1.0  # a correct kernel, untimed or exactly as fast as the reference
    speedup_weight: float = 0.5  # added per doubling of speed (log2 of the speedup)
    max_speedup: float = 8.0  # speedups above count as this much
    floor: float = 0.1  # a correct kernel, however slow, scores at least this (before penalties)
    penalties: Mapping[str, float] = field(
        default_factory=lambda: {
            "excessive_speedup": 0.25,  # too good to trust: a likely cheat, checked by hand
            "mutates_inputs": 0.5,  # wrote into an input the reference leaves alone
            "only_library_kernels": 0.5,  # launched none of its own kernels
        }
    )
    default_penalty: float = 0.5  # a flag the table does not name
    untrusted_speedup: frozenset[str] = frozenset({"excessive_speedup"})


DEFAULT_POLICY = RewardPolicy()


def reward(record: Mapping[str, Any] | None, policy: RewardPolicy = DEFAULT_POLICY) -> float:
    """The scalar reward of one kernelboard record (None: no kernel in the completion)."""
    if not record or record.get("status") != "passed" or record.get("correct") is not True:
        return 0.0
    flags = list(record.get("flags") or [])
    speedup = record.get("speedup")
    bonus = 0.0
    if (
        isinstance(speedup, int | float)
        and speedup > 0
        and not policy.untrusted_speedup & set(flags)
    ):
        bonus = policy.speedup_weight * math.log2(min(speedup, policy.max_speedup))
    value = max(policy.floor, policy.correct + bonus)
    value -= sum(policy.penalties.get(flag, policy.default_penalty) for flag in flags)
    return max(0.0, value)


class JobFailed(RuntimeError):
    """The server could not judge the job (its judge stopped); the message says why."""


class KernelboardClient:
    """Jobs to one `kernelboard serve`."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        poll_s: float = 60.0,
        timeout_s: float = 6 * 3600.0,
    ) -> None:
        self.url = (url or os.environ.get("KERNELBOARD_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else _token_from_environment()
        self.poll_s = poll_s
        self.timeout_s = timeout_s

    def judge(
        self, leaderboard: str, candidates: Sequence[Mapping[str, str]], mode: str
    ) -> list[dict[str, Any]]:
        """Records for the candidates ({id, source, lang}), in their order."""
        return self.wait(self.submit(leaderboard, candidates, mode))

    def submit(self, leaderboard: str, candidates: Sequence[Mapping[str, str]], mode: str) -> str:
        body = {"leaderboard": leaderboard, "mode": mode, "candidates": list(candidates)}
        deadline = time.monotonic() + self.timeout_s
        while True:
            status, headers, answer = self._request("POST", "/v1/jobs", body)
            if status == 202:
                return answer["job"]
            if status == 429 and time.monotonic() < deadline:
                time.sleep(float(headers.get("Retry-After", "5")))
                continue
            raise JobFailed(f"{self.url} refused the job ({status}): {answer.get('error')}")

    def wait(self, job: str) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            status, _, answer = self._request("GET", f"/v1/jobs/{job}?wait={self.poll_s:g}")
            if status != 200:
                raise JobFailed(f"{self.url}: job {job} ({status}): {answer.get('error')}")
            if answer["state"] == "done":
                return answer["records"]
            if answer["state"] == "failed":
                raise JobFailed(f"job {job}: {answer.get('error')}")
        raise JobFailed(f"job {job} was not done within {self.timeout_s:g} s")

    def _request(
        self, method: str, path: str, body: Any = None
    ) -> tuple[int, Mapping[str, str], dict[str, Any]]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.poll_s + 60) as reply:
                return reply.status, reply.headers, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            try:
                answer = json.loads(exc.read())
            except ValueError:
                answer = {"error": exc.reason}
            return exc.code, exc.headers, answer


def score_completions(
    items: Sequence[tuple[str, str]],
    *,
    mode: str | None = None,
    client: KernelboardClient | None = None,
    policy: RewardPolicy = DEFAULT_POLICY,
) -> list[tuple[float, dict[str, Any] | None]]:
    """(reward, record) per (leaderboard, completion), in order; a completion without a kernel
    scores 0 with no record. One job per leaderboard, all submitted before any is waited on."""
    client = client or KernelboardClient()
    mode = mode or os.environ.get("KERNELBOARD_MODE", "benchmark")
    by_leaderboard: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for index, (leaderboard, completion) in enumerate(items):
        found = extract_source(completion)
        if found is not None:
            candidate = {"id": str(index), "source": found[0], "lang": found[1]}
            by_leaderboard.setdefault(leaderboard, []).append((index, candidate))
    jobs = {
        leaderboard: client.submit(leaderboard, [c for _, c in entries], mode)
        for leaderboard, entries in by_leaderboard.items()
    }
    records: list[dict[str, Any] | None] = [None] * len(items)
    for leaderboard, job in jobs.items():
        for (index, _), record in zip(by_leaderboard[leaderboard], client.wait(job), strict=True):
            records[index] = record
    return [(reward(record, policy), record) for record in records]


def _token_from_environment() -> str | None:
    if os.environ.get("KERNELBOARD_TOKEN"):
        return os.environ["KERNELBOARD_TOKEN"].strip()
    if os.environ.get("KERNELBOARD_TOKEN_FILE"):
        return Path(os.environ["KERNELBOARD_TOKEN_FILE"]).read_text().strip()
    return None
