"""Semantic checks of the verl values a recipe, profile or command line sets.

verl's schema checks types and names; it accepts values that make no sense for a run, and some that
silently turn a run into a no-op: `trainer.total_epochs=0` trains nothing, a NaN learning rate trains
garbage, `trainer.save_freq=0` saves no checkpoint. These are caught before a launch: an error (exit 2)
where verl would crash or do something no one means, a warning where verl accepts the value and its
meaning is just unusual. Interpolations (`${a.b}`) that name another key are followed, as OmegaConf would.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from rlrecipes.errors import RecipeError

# `${trainer.save_freq}`: an OmegaConf interpolation of another config key (rlrecipes' own variables,
# `${CKPT_DIR}`, are upper case without dots and substituted before this).
INTERPOLATION = re.compile(r"^\$\{([a-z_]\w*(?:\.\w+)+)\}$")
UNSET = object()  # what `lookup` returns for a key nobody set (verl's default applies)

# key -> (smallest value allowed, can be null)
POSITIVE_INTS = {
    "trainer.total_epochs": (1, False),
    "trainer.total_training_steps": (1, True),
    "data.train_batch_size": (1, False),
    "data.max_prompt_length": (1, False),
    "data.max_response_length": (1, False),
    "actor_rollout_ref.rollout.n": (1, False),
    "actor_rollout_ref.actor.ppo_epochs": (1, False),
    "actor_rollout_ref.actor.ppo_mini_batch_size": (1, False),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": (1, True),
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": (1, False),
    "actor_rollout_ref.rollout.tensor_model_parallel_size": (1, False),
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": (1, True),
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": (1, True),
    "critic.ppo_micro_batch_size_per_gpu": (1, True),
    "critic.ppo_mini_batch_size": (1, True),
    "trainer.n_gpus_per_node": (1, False),
    "trainer.nnodes": (1, False),
    "actor_rollout_ref.model.lora_rank": (0, False),
    "trainer.max_actor_ckpt_to_keep": (1, True),
    "trainer.max_critic_ckpt_to_keep": (1, True),
}
# Integers where verl reads <= 0 as "never": -1 is the documented spelling, 0 works but reads like a typo.
FREQUENCIES = ("trainer.save_freq", "trainer.test_freq")
LEARNING_RATES = ("actor_rollout_ref.actor.optim.lr", "critic.optim.lr")
FRACTIONS = ("actor_rollout_ref.rollout.gpu_memory_utilization",)
# vLLM's "uni" executor runs the engine's one model worker inside its EngineCore process (vllm/v1/executor/
# uniproc_executor.py): one GPU per engine. vLLM 0.24 does not refuse it at a larger tensor parallel size
# (vllm/config/parallel.py only picks it by default at world size 1); the engine would start one rank of several.
EXECUTOR_KEY = "actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend"
ROLLOUT_TP_KEY = "actor_rollout_ref.rollout.tensor_model_parallel_size"


def resolved(key: str, lookup: Callable[[str], Any], seen: tuple[str, ...] = ()) -> Any:
    """The value of `key`, following `${other.key}` interpolations to the value they name."""
    value = lookup(key)
    match = INTERPOLATION.match(value) if isinstance(value, str) else None
    if match is None:
        return value
    target = match.group(1)
    if target in seen or len(seen) > 10:
        raise RecipeError(f"interpolation loop: {' -> '.join((*seen, key, target))}", where=key)
    return resolved(target, lookup, (*seen, key))


def as_int(key: str | None, value: Any, where: str) -> int:
    """An integer value: ints and integral floats (1e3); not bools, strings, fractions, NaN.

    `key`: the verl key, for a hint of the command-line fix; None for a profile's own key (a file to edit)."""
    hint = f"set {key}=<integer>" if key else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = ("an interpolation verl resolves later" if isinstance(value, str) and "${" in value else
                "null (set to null or deleted with ~)" if value is None else repr(value))
        raise RecipeError(f"must be an integer, got {kind}", where=where, hint=hint)
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise RecipeError(f"must be an integer, got {value!r}", where=where, hint=hint)
    return int(value)


def at_least(key: str | None, value: Any, minimum: int, where: str, hint: str | None = None) -> int:
    """An integer of at least `minimum`: the one rule for counts, whether a profile sets them (GPUs, nodes,
    tensor parallel, micro batches) or a verl key does (POSITIVE_INTS)."""
    number = as_int(key, value, where)
    if number < minimum:
        raise RecipeError(f"must be >= {minimum}, got {number}", where=where, hint=hint)
    return number


def fraction(value: Any, where: str) -> float:
    """A share in (0, 1]: gpu_memory_utilization, in a profile or as the verl key (FRACTIONS)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise RecipeError(f"must be a fraction in (0, 1], got {value!r}", where=where)
    return float(value)


def check_values(lookup: Callable[[str], Any], source: Callable[[str], str]) -> list[str]:
    """Raise RecipeError for the first value that is wrong; return warnings for the unusual ones.

    `lookup(key)` gives the value set for a bare key (UNSET when nobody set it); `source(key)` where.
    """
    warnings: list[str] = []
    for key, (minimum, nullable) in POSITIVE_INTS.items():
        value = resolved(key, lookup)
        if value is UNSET or (value is None and nullable):
            continue  # unset (verl's default) or null where verl takes null
        at_least(key, value, minimum, source(key), hint="null leaves it to verl" if nullable else None)
    for key in FREQUENCIES:
        value = resolved(key, lookup)
        if value is UNSET:
            continue
        number = as_int(key, value, source(key))
        if number == 0 or number < -1:
            what = "no checkpoint is saved" if key == "trainer.save_freq" else "validation never runs"
            warnings.append(f"{key}={number}: {what} (verl reads <= 0 as never; write -1 to mean it)")
    for key in LEARNING_RATES:
        value = resolved(key, lookup)
        if value is UNSET:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise RecipeError(f"must be a finite number >= 0, got {value!r}", where=source(key),
                              hint="e.g. 1e-6")
        if value == 0:
            warnings.append(f"{key}=0: the weights never change")
    for key in FRACTIONS:
        value = resolved(key, lookup)
        if value is UNSET:
            continue
        fraction(value, source(key))
    tensor_parallel = resolved(ROLLOUT_TP_KEY, lookup)
    if resolved(EXECUTOR_KEY, lookup) == "uni" and tensor_parallel is not UNSET and tensor_parallel != 1:
        raise RecipeError(f"vLLM's 'uni' executor runs one model worker, and {ROLLOUT_TP_KEY} is {tensor_parallel}",
                          where=source(EXECUTOR_KEY),
                          hint=f"drop {EXECUTOR_KEY} (or set it to mp) when the rollout spans several GPUs")
    return warnings


# verl packs a micro batch's sequences into one row when `use_remove_padding` is on and keeps them apart with
# FlashAttention's varlen kernel (verl/models/transformers/monkey_patch.py). Under SDPA or eager attention the
# packed forward is correct too -- transformers finds the restarting position ids and masks each sequence apart
# (masking_utils.find_packed_sequence_indices; verl calls with use_cache=False, tests/recipe/test_packing.py) --
# but through a mask over the whole packed row, whose speed and memory at a recipe's shape are unmeasured. Until
# they are (docs/bench/gpu-hopper-3b.md), packing stays with FlashAttention. verl 0.5.0 imports flash-attn for it.
PACKING_KEYS = {  # use_remove_padding key -> the key that names that model's attention
    "actor_rollout_ref.model.use_remove_padding": "attn",
    "critic.model.use_remove_padding": "critic_attn",
}
PACKING_ATTENTION = ("flash_attention_2", "flash_attention_3")


def check_packing(lookup: Callable[[str], Any], source: Callable[[str], str], attention: dict[str, Any]) -> None:
    """Raise RecipeError when `use_remove_padding` is on for a model whose attention cannot keep packed
    sequences apart. `attention` maps "attn" (actor and reference) and, with a critic, "critic_attn" to the
    attention implementation in effect; a model not in it is not checked."""
    for key, which in PACKING_KEYS.items():
        if which not in attention:
            continue
        impl = attention[which]
        if resolved(key, lookup) is True and impl not in PACKING_ATTENTION:
            raise RecipeError(
                f"use_remove_padding=true needs flash_attention_2, and this model runs {impl}: verl packs each "
                "micro batch into one row, which it keeps apart with FlashAttention's varlen kernel; under "
                f"{impl} transformers masks the whole packed row instead, unmeasured at a recipe's shape",
                where=source(key), hint=f"set {key}=false, or use a flash_attention_2 profile")
