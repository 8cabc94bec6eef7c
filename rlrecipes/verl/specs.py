"""What differs between the verl versions the images pin: one `VerlSpec` per version.

The rest of the package asks a spec questions (`spec.hf_rollout`, `spec.critic_fsdp`, `spec.default(key)`)
instead of comparing version strings. Adding a verl version is one `VerlSpec` in SPECS below (plus its
lock file and its CPU validation environment, requirements/verl-<version>-cpu.txt).

Standard library only: verl/check.py runs inside a foreign verl interpreter and imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

# verl's defaults for the keys the planner and the memory model read (ppo_trainer.yaml composed by Hydra;
# identical in 0.5.0, 0.8.0 and 0.9.1). A spec whose verl changed one of them overrides it in its own `defaults`.
COMMON_DEFAULTS: Mapping[str, Any] = MappingProxyType({
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 1,
    "actor_rollout_ref.model.enable_gradient_checkpointing": True,
    "critic.model.enable_gradient_checkpointing": True,
    "trainer.total_epochs": 30,
    "trainer.total_training_steps": None,
    "trainer.save_freq": -1,
    "trainer.test_freq": -1,
    "trainer.max_actor_ckpt_to_keep": None,
    "trainer.max_critic_ckpt_to_keep": None,
    "trainer.resume_mode": "auto",
    "data.max_prompt_length": 512,
    "data.max_response_length": 512,
    "data.prompt_key": "prompt",
    "data.truncation": "error",
    "data.filter_overlong_prompts": False,
    "algorithm.adv_estimator": "gae",
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.entropy_coeff": 0,
    "actor_rollout_ref.actor.use_torch_compile": True,
    "actor_rollout_ref.actor.fsdp_config.param_offload": False,
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": False,
    "actor_rollout_ref.ref.fsdp_config.param_offload": False,
    "actor_rollout_ref.model.lora_rank": 0,
    "actor_rollout_ref.model.target_modules": "all-linear",
    "actor_rollout_ref.rollout.free_cache_engine": True,
})


@dataclass(frozen=True)
class VerlSpec:
    """One verl version as the recipe engine, planner, preflight and validation see it."""

    version: str
    # -- key paths that moved between versions (Hydra override keys; "+" where verl's schema lacks the key)
    attn_key: str  # attention implementation of actor and reference
    critic_attn_key: str
    critic_fsdp: str  # the critic's FSDP block (param_offload, optimizer_offload, model_dtype, ...)
    reward_path_key: str
    reward_name_key: str
    reward_kwargs_key: str
    ray_init_prefix: str  # where ray.init's kwargs live; "<prefix>num_cpus" caps Ray's CPUs
    # -- capabilities
    rollout_engines: tuple[str, ...]  # the rollout names verl's registry accepts
    file_logger: bool  # trainer.logger accepts "file" (JSONL at $VERL_FILE_LOGGER_PATH)
    ray_init_whole_mapping: bool  # main_ppo hands ray.init the whole mapping (else only num_cpus)
    # FP32 is set through the FSDP configs (model_dtype, mixed_precision) by the engine for fp32 profiles
    fp32_by_config: bool
    # FSDP1 + LoRA + HF rollout fails with "Must flatten tensors with uniform requires_grad when
    # use_orig_params=False" unless use_orig_params is on (torch FSDP1's flat-parameter rule: LoRA leaves the base
    # frozen in the same module as trainable adapters; seen on a real GPU)
    lora_hf_rollout_needs_orig_params: bool
    # how verl/check.py validates: "ray_trainer" (RayPPOTrainer._validate_config + the worker-side batch
    # checks, 0.5.0) or "validate_config" (verl.utils.config.validate_config + the rollout registry)
    validator: str
    defaults: Mapping[str, Any] = field(default_factory=lambda: COMMON_DEFAULTS)
    # the planner's logits terms without flash-attn: verl's FSDP engine (verl/workers/engine, what 0.9.1 trains
    # with) takes the old log-probs' entropy over every padded position under bf16 autocast (fp32 softmax and
    # logsumexp) and an unpadded copy of the logits; measured on an H200 (docs/bench/gpu-hopper-3b.md)
    engine_logits: bool = False
    # the reward loop (verl/experimental/reward_loop/reward_manager/naive.py, 0.8+) adds acc = score beside
    # every sample's plain float score, and validation files its core metric under the first of "acc" /
    # "reward" it finds (`core_var` in ray_trainer.py, and v1/trainer_base.py in 0.9.1): so the validation
    # reward a recipe names as val-core/<source>/reward/mean@N is logged as val-aux/<source>/reward/mean@N
    # (val-core holds the same number as acc). Seen in the canary's H200 logs (docs/bench/gpu-canary.md).
    validation_reward_aux: bool = False
    # seconds between the replay buffer's polls of TransferQueue in the V1 trainer (trainer/ppo/v1/replay_buffer.py,
    # ReplayBuffer(poll_interval=2.0), which its trainer never sets): a step's generation and a validation end on a
    # poll (docs/bench/gpu-overhead.md, "Generation waits for a 2-second poll"); None: no such trainer
    replay_poll_s: float | None = None
    # the trainer moves its batches through TransferQueue, one TCP connection per request (transfer_queue's
    # with_zmq_socket), each leaving its port in TIME_WAIT for 60 s: preflight's ports check
    # (docs/bench/gpu-canary.md, "The PPO canary's controls")
    transfer_queue: bool = False

    def logged_metric(self, metric: str) -> str:
        """The name under which this verl logs `metric` (a name as a recipe's contract writes it)."""
        if self.validation_reward_aux and metric.startswith("val-core/") and "/reward/" in metric:
            return "val-aux/" + metric.removeprefix("val-core/")
        return metric

    @property
    def hf_rollout(self) -> bool:
        """Hugging Face `generate` rollout (actor_rollout_ref.rollout.name=hf) exists in this verl."""
        return "hf" in self.rollout_engines

    def default(self, key: str, fallback: Any = None) -> Any:
        """verl's default for a dotted key the planner reads, else `fallback`."""
        return self.defaults.get(key, fallback)


V0_5_0 = VerlSpec(
    version="0.5.0",
    # Not the key without the underscore: 0.5.0's fsdp_workers.py loads the config with attn_implementation=
    # "flash_attention_2" and update_model_config only setattr()s overrides, so `attn_implementation` would be
    # a new, unread attribute; `_attn_implementation` is the one transformers reads
    attn_key="+actor_rollout_ref.model.override_config._attn_implementation",
    # honoured once the P40 patch reads the critic's override_config (released 0.5.0 hard-codes FA2)
    critic_attn_key="+critic.model.override_config._attn_implementation",
    critic_fsdp="critic.model.fsdp_config",
    reward_path_key="custom_reward_function.path",
    reward_name_key="custom_reward_function.name",
    reward_kwargs_key="+custom_reward_function.reward_kwargs",
    ray_init_prefix="ray_init.",
    rollout_engines=("hf", "vllm", "sglang"),
    file_logger=False,
    ray_init_whole_mapping=False,
    fp32_by_config=True,
    lora_hf_rollout_needs_orig_params=True,
    validator="ray_trainer",
    defaults={**COMMON_DEFAULTS, "actor_rollout_ref.model.use_remove_padding": False,
              "critic.model.use_remove_padding": False},
)

V0_8_0 = VerlSpec(
    version="0.8.0",
    attn_key="+actor_rollout_ref.model.override_config.attn_implementation",
    critic_attn_key="+critic.model.override_config.attn_implementation",
    critic_fsdp="critic.fsdp",
    reward_path_key="reward.custom_reward_function.path",
    reward_name_key="reward.custom_reward_function.name",
    reward_kwargs_key="+reward.custom_reward_function.reward_kwargs",
    ray_init_prefix="ray_kwargs.ray_init.",
    rollout_engines=("vllm", "sglang", "trtllm"),
    file_logger=True,
    ray_init_whole_mapping=True,
    fp32_by_config=False,
    lora_hf_rollout_needs_orig_params=False,
    validator="validate_config",
    validation_reward_aux=True,
    # packed micro batches by default from 0.6 on (hf_model.yaml); the critic follows the actor
    defaults={**COMMON_DEFAULTS, "actor_rollout_ref.model.use_remove_padding": True,
              "critic.model.use_remove_padding": True},
)

# The Hopper image. Same config layout and checks as 0.8.0 (verified by composing both trees: the keys above,
# the rollout registry and validate_config are unchanged); what moved is outside the keys we set:
# - the V1 trainer is the default (trainer.use_v1: true, TaskRunnerV1, imports transfer_queue). The launchers
#   keep it: the legacy trainer (verl.trainer.main_ppo_v0 / trainer.use_v1=false) is deprecated and warns, both
#   initialised the same launcher on an H200 and both failed alike at the first LoRA sync, so the legacy one
#   buys nothing; checkpoints, tracker, file logger and metric names are the same (smoke/run.py reads both
#   trainers' resume messages).
# - actor_rollout_ref.rollout.calculate_log_probs defaults to True (False in 0.8.0): the rollout-vs-actor
#   metrics rlrecipes.verl.rollout_sync reads are logged by default.
# - its replay buffer polls every 2 s (replay_poll_s; rlrecipes/verl/replay_poll.py sets another interval).
V0_9_1 = replace(V0_8_0, version="0.9.1", engine_logits=True, replay_poll_s=2.0, transfer_queue=True)

SPECS: dict[str, VerlSpec] = {spec.version: spec for spec in (V0_5_0, V0_8_0, V0_9_1)}

# The poll interval rlrecipes/verl/replay_poll.py gives verl 0.9's replay buffer in place of replay_poll_s
POLL_INTERVAL_KEY = "trainer.v1.sampler.sampler_kwargs.poll_interval"


def poll_seconds(value: Any) -> float | None:
    """A replay-buffer poll interval as a float: a number of seconds in (0, 10]; None for anything else (a string,
    a bool, NaN, null). The one bound, read by the sampler inside verl and by `plan`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 10:
        return None
    return float(value)


def spec_for(version: str) -> VerlSpec:
    """The spec of a pinned verl version; KeyError naming the known ones otherwise."""
    try:
        return SPECS[version]
    except KeyError:
        raise KeyError(f"no VerlSpec for verl {version!r} (known: {', '.join(SPECS)}); add one to "
                       "rlrecipes/verl/specs.py") from None


def attention_keys(spec: VerlSpec) -> list[str]:
    """Every spelling of the attention key (without "+"), this version's first: a user may write the
    other version's spelling, and preflight should see it."""
    keys = [spec.attn_key.lstrip("+")]
    for other in SPECS.values():
        key = other.attn_key.lstrip("+")
        if key not in keys:
            keys.append(key)
    return keys
