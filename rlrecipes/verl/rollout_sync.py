"""Is the rollout engine generating with the policy being trained? Read from verl's own metrics.

A known failure of LoRA with a vLLM rollout is that the adapter never reaches the engine (verl #7495: the
disaggregated sync pushed only the frozen base; the empty-adapter `add_lora` failure on vLLM 0.24): the
rollout keeps sampling from the initial policy while the actor trains, and nothing fails. verl measures
it: when the rollout returns its log-probs (`actor_rollout_ref.rollout.calculate_log_probs=True`, the
default from 0.9 on, which rlrecipes sets for vLLM on 0.8 too), `verl/utils/debug/metrics.py`
(0.8.0 and 0.9.1; `ray_trainer.py` in 0.5.0) logs for every step, over the response tokens,

    training/rollout_probs_diff_mean / _max / _std    |p_rollout - p_actor| per token (probabilities)
    training/rollout_actor_probs_pearson_corr        correlation of the two (0.8+)
    training/rollout_probs_diff_valid                1 when the batch had response tokens (0.8+)

where p_actor comes from the actor's own forward pass (old_log_prob) on the sampled tokens. With the
same weights on both sides they differ only by kernels and precision (verl #7413 reports a correlation of
0.999 and no drift over training); with a stale adapter the gap opens as soon as the adapter moves and
grows with every update. Step 1 alone proves little: a fresh LoRA adapter (B = 0) changes nothing yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

DIFF_MEAN = "training/rollout_probs_diff_mean"
DIFF_MAX = "training/rollout_probs_diff_max"
CORRELATION = "training/rollout_actor_probs_pearson_corr"
VALID = "training/rollout_probs_diff_valid"
METRICS = (DIFF_MEAN, DIFF_MAX, CORRELATION, VALID)

# Same weights give a correlation of ~0.99+ and a mean |dp| of ~1e-3; these leave a wide margin.
MIN_CORRELATION = 0.9
MAX_DIFF_MEAN = 0.05
# A mean |dp| that keeps growing: the last step's is DRIFT_FACTOR x the first's and above DRIFT_FLOOR.
DRIFT_FACTOR = 4.0
DRIFT_FLOOR = 0.02


@dataclass(frozen=True)
class SyncVerdict:
    status: str                  # "in sync" | "not in sync" | "not logged"
    detail: str
    steps: tuple[int, ...] = ()  # the steps that carried the metrics

    @property
    def flagged(self) -> bool:
        return self.status == "not in sync"


def check_rollout_sync(steps: Mapping[int, Mapping[str, float]]) -> SyncVerdict:
    """Judge {step: {metric: value}} (a console log's steps or a file logger's records)."""
    rows = {}
    for step in sorted(steps):
        metrics = steps[step]
        mean = metrics.get(DIFF_MEAN)
        if mean is None or metrics.get(VALID, 1) == 0 or not math.isfinite(mean):
            continue
        rows[step] = (mean, metrics.get(CORRELATION))
    if not rows:
        return SyncVerdict("not logged", f"no `{DIFF_MEAN}` in the logs: the rollout returned no log-probs "
                                         "(actor_rollout_ref.rollout.calculate_log_probs=False, or an HF rollout)")
    logged = tuple(rows)
    first = logged[0]
    problems = []
    for step in logged:
        mean, corr = rows[step]
        if corr is not None and math.isfinite(corr) and corr < MIN_CORRELATION:
            problems.append(f"step {step}: correlation {corr:.3f} < {MIN_CORRELATION}")
        if mean > MAX_DIFF_MEAN:
            problems.append(f"step {step}: mean |p_rollout - p_actor| {mean:.3g} > {MAX_DIFF_MEAN}")
    last_mean, first_mean = rows[logged[-1]][0], rows[first][0]
    if len(logged) > 1 and last_mean >= DRIFT_FLOOR and last_mean >= DRIFT_FACTOR * first_mean:
        problems.append(f"mean |p_rollout - p_actor| grew from {first_mean:.3g} (step {first}) to "
                        f"{last_mean:.3g} (step {logged[-1]})")
    corrs = [c for _, c in rows.values() if c is not None and math.isfinite(c)]
    summary = (f"steps {logged[0]}..{logged[-1]}: mean |p_rollout - p_actor| {first_mean:.3g} -> {last_mean:.3g}"
               + (f", correlation min {min(corrs):.5f}" if corrs else ""))
    if problems:
        return SyncVerdict("not in sync", "the rollout does not generate with the trained policy (a LoRA adapter "
                           "that never reached vLLM looks like this): " + "; ".join(problems[:3]), logged)
    if len(logged) == 1:
        return SyncVerdict("in sync", summary + " (one step: no update had moved the policy yet)", logged)
    return SyncVerdict("in sync", summary, logged)
