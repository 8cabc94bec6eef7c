"""The smoke runs' reward: the GSM8K strict score plus a small term that varies between responses.

A random-weight model never answers correctly, so the plain GSM8K reward is 0 for every response;
GRPO's group-normalised advantages are then all 0 and nothing trains (seen on a real GPU, docs/smoke.md).
The extra term (0.1 x the share of digits among the response's characters) differs between random
responses, so advantages are non-zero and the smoke run can check that the weights moved. It is only
ever used by `rlrecipes smoke` (through REWARD_FN); the recipes' own reward stays the plain scorer.
"""

from __future__ import annotations

from rlrecipes.rewards.gsm8k import compute_score as gsm8k_score

DIGIT_WEIGHT = 0.1


def digit_share(text: str) -> float:
    text = text or ""
    return sum(ch.isdigit() for ch in text) / len(text) if text else 0.0


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """verl's custom reward signature."""
    text = solution_str if isinstance(solution_str, str) else str(solution_str)
    return float(gsm8k_score(data_source, text, ground_truth, extra_info, **kwargs)) + DIGIT_WEIGHT * digit_share(text)
