"""The canary's negative control: a reward with the real reward's rate but no link to the answer.

A checker that cannot fail proves nothing, so the learning canary is also run with this reward in place
of the GSM8K scorer (through REWARD_FN). Each response earns 1 with probability RATE, decided by a hash
of the response text and nothing else: the rewards vary inside a GRPO group as real ones do (advantages
are not 0, the update runs, the weights move), but a right answer is paid no more often than a wrong one.
Held-out accuracy must then not rise, and `rlrecipes expect` must call the run missed.
"""

from __future__ import annotations

import hashlib

RATE = 0.25  # about the warm-started canary's sampled accuracy, so the control's reward curve starts alike


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """verl's custom reward signature; deterministic for a given response text."""
    text = solution_str if isinstance(solution_str, str) else str(solution_str)
    draw = int.from_bytes(hashlib.sha256(text.encode("utf-8", "replace")).digest()[:8], "big") / 2**64
    return 1.0 if draw < RATE else 0.0
