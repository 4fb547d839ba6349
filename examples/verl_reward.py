"""A verl custom reward function judged by `kernelboard serve`.

In verl's config:

    custom_reward_function:
      path: examples/verl_reward.py
      name: compute_score          # verl's naive reward manager: one completion per call
      # name: compute_score_batch  # with reward_model.reward_manager=batch: a batch per call

Each dataset row names its leaderboard as the ground truth (`reward_model.ground_truth`), or in
`extra_info["leaderboard"]`; `extra_info["mode"]` may say "test" (correctness only) instead of
the default "benchmark" (KERNELBOARD_MODE). The server's address and token come from
KERNELBOARD_URL and KERNELBOARD_TOKEN / KERNELBOARD_TOKEN_FILE. The reward is
kernelboard_reward.reward(record): 0 unless the kernel passed, then a function of its speedup,
less a penalty per flag; the dict's other keys land in verl's reward_extra_info.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# verl loads this file by path, so its neighbour is imported from the same folder.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelboard_reward import score_completions  # noqa: E402


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    **_: Any,
) -> dict[str, float]:
    """One completion's reward (verl's naive reward manager calls this per sample)."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info])[0]


def compute_score_batch(
    data_sources: list[str],
    solution_strs: list[str],
    ground_truths: list[str],
    extra_infos: list[dict[str, Any] | None],
    **_: Any,
) -> list[dict[str, float]]:
    """A batch's rewards, one job per leaderboard and mode (verl's batch reward manager)."""
    modes: dict[str | None, list[int]] = {}
    for index, info in enumerate(extra_infos):
        modes.setdefault((info or {}).get("mode"), []).append(index)
    results: list[dict[str, float]] = [{}] * len(solution_strs)
    for mode, indices in modes.items():
        items = [
            (_leaderboard(ground_truths[i], extra_infos[i]), solution_strs[i]) for i in indices
        ]
        for i, (score, record) in zip(indices, score_completions(items, mode=mode), strict=True):
            record = record or {}
            results[i] = {
                "score": score,
                "correct": float(record.get("correct") is True),
                "speedup": float(record.get("speedup") or 0.0),
                "has_kernel": float(bool(record)),
            }
    return results


def _leaderboard(ground_truth: Any, extra_info: dict[str, Any] | None) -> str:
    name = (extra_info or {}).get("leaderboard") or ground_truth
    if not isinstance(name, str) or not name:
        raise ValueError(
            "each row names its leaderboard in reward_model.ground_truth or "
            f"extra_info['leaderboard']; got {name!r}"
        )
    return name
