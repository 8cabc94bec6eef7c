"""Recipes (what to train) + profiles (how to run it on given hardware) -> one verl launch.

A recipe is `recipes/<name>.yaml`; a profile is `recipes/profiles/<name>.yaml`. Both are strict:
an unknown key is an error naming the key path and the nearest valid names. Values for verl are
Hydra dot paths (`data.train_batch_size: 1024`), the same syntax as command-line overrides.

Precedence, lowest first: keys the engine derives from the recipe's structured fields (model,
dataset, reward, logging) and from the profile's hardware knobs -> the profile's `verl:` block ->
the recipe's `verl:` block (a recipe may pin a hardware knob its scale needs, e.g. smoke micro
batches) -> command-line overrides.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from rlrecipes.errors import RecipeError
from rlrecipes.recipe import overrides as ov
from rlrecipes.recipe.expect_schema import Expectations, parse_expect
from rlrecipes.recipe.strict import _choice, _load_yaml, _strict, _typed, _verl_block
from rlrecipes.recipe.values import (INTERPOLATION, PACKING_ATTENTION, UNSET, at_least, check_packing, check_values,
                                     fraction, resolved)
from rlrecipes.recipe.images import IMAGES, Image
from rlrecipes.paths import PACKAGE_DIR, profiles_dir, recipes_dir
from rlrecipes.verl.specs import VerlSpec

PATH_DEFAULTS = {
    "MODELS_DIR": "/workspace/models",
    "DATA_DIR": "/workspace/data",
    "CKPT_DIR": "/workspace/checkpoints",
    "LOG_DIR": "/workspace/logs",
    # compile caches (vLLM, inductor, Triton) kept across containers: rlrecipes/launch/stages.py compile_caches
    "CACHE_DIR": "/workspace/cache",
}
# Commands that build a recipe's model and data offline, with --models-dir/--data-dir (`assets:` in a recipe).
ASSET_BUILDERS = ("smoke-assets", "canary-assets")
KNOWN_DATASETS = {"gsm8k": {"train_rows": 7473, "test_rows": 1319}}


# ----------------------------------------------------------------------------------------- schema
@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_gib: float
    compute_capability: str


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path
    description: str
    image_name: str
    nnodes: int
    gpus_per_node: int
    gpu: GpuSpec
    dtype: str
    attention: str
    rollout: str
    tensor_parallel: int
    gpu_memory_utilization: float | None
    micro_batch_per_gpu: dict[str, int]
    offload: dict[str, bool]
    gradient_checkpointing: bool
    verl: dict[str, Any]

    @property
    def image(self) -> Image:
        return IMAGES[self.image_name]

    @property
    def n_gpus(self) -> int:
        return self.nnodes * self.gpus_per_node


@dataclass(frozen=True)
class ModelSpec:
    hub_id: str
    dir_name: str


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    dir_name: str
    template: str
    train_rows: int | None
    test_rows: int | None


@dataclass(frozen=True)
class Recipe:
    name: str
    path: Path
    description: str
    profile: str
    profiles: tuple[str, ...]
    model: ModelSpec
    dataset: DatasetSpec
    reward_mode: str
    loggers: tuple[str, ...]
    wandb: str
    project: str
    verl: dict[str, Any]
    assets: str | None  # the rlrecipes command that builds model and data offline (smoke-assets, canary-assets)
    expect: Expectations  # the result a run of this recipe must reach (docs/expect.md)


def load_profile(name: str) -> Profile:
    path = _resolve_file(name, profiles_dir(), "profile")
    data = _load_yaml(path)
    where = str(path)
    _strict(data, {"description": True, "image": True, "nnodes": False, "gpus_per_node": True, "gpu": True,
                   "dtype": True, "attention": True, "rollout": True, "micro_batch_per_gpu": False,
                   "offload": False, "gradient_checkpointing": False, "verl": False}, where)
    image = _choice(data["image"], tuple(IMAGES), f"{where}: image")
    gpu = _strict(data["gpu"], {"name": True, "memory_gib": True, "compute_capability": True}, f"{where}: gpu")
    rollout = _strict(data["rollout"], {"engine": True, "tensor_parallel": False, "gpu_memory_utilization": False},
                      f"{where}: rollout")
    micro = _strict(data.get("micro_batch_per_gpu") or {}, {"actor": False, "log_prob": False, "critic": False},
                    f"{where}: micro_batch_per_gpu")
    offload = _strict(data.get("offload") or {}, {"param": False, "optimizer": False, "ref_param": False},
                      f"{where}: offload")
    engine = _choice(rollout["engine"], ("vllm", "sglang", "hf"), f"{where}: rollout.engine")
    if engine not in IMAGES[image].rollout_engines:
        raise RecipeError(f"rollout engine {engine!r} is not installed in image {image!r} "
                          f"(it has: {', '.join(IMAGES[image].rollout_engines)})", where=f"{where}: rollout.engine")
    return Profile(
        name=path.stem, path=path, description=str(data["description"]).strip(), image_name=image,
        nnodes=at_least(None, data.get("nnodes", 1), 1, f"{where}: nnodes"),
        gpus_per_node=at_least(None, data["gpus_per_node"], 1, f"{where}: gpus_per_node"),
        gpu=GpuSpec(str(gpu["name"]), float(_typed(gpu["memory_gib"], (int, float), f"{where}: gpu.memory_gib")),
                    str(gpu["compute_capability"])),
        dtype=_choice(data["dtype"], ("bf16", "fp16", "fp32"), f"{where}: dtype"),
        attention=_choice(data["attention"], ("flash_attention_2", "sdpa", "eager"), f"{where}: attention"),
        rollout=engine,
        tensor_parallel=at_least(None, rollout.get("tensor_parallel", 1), 1, f"{where}: rollout.tensor_parallel"),
        gpu_memory_utilization=None if rollout.get("gpu_memory_utilization") is None else
        fraction(rollout["gpu_memory_utilization"], f"{where}: rollout.gpu_memory_utilization"),
        micro_batch_per_gpu={k: at_least(None, v, 1, f"{where}: micro_batch_per_gpu.{k}") for k, v in micro.items()},
        offload={k: _typed(v, bool, f"{where}: offload.{k}") for k, v in offload.items()},
        gradient_checkpointing=_typed(data.get("gradient_checkpointing", True), bool,
                                      f"{where}: gradient_checkpointing"),
        verl=_verl_block(data.get("verl"), f"{where}: verl"),
    )


def load_recipe(name: str) -> Recipe:
    path = _resolve_file(name, recipes_dir(), "recipe")
    data = _load_yaml(path)
    where = str(path)
    _strict(data, {"description": True, "profile": True, "profiles": False, "model": True, "dataset": True,
                   "reward": False, "logging": False, "verl": True, "assets": False, "expect": True}, where)
    model = _strict(data["model"], {"hub_id": True, "dir": False}, f"{where}: model")
    dataset = _strict(data["dataset"], {"name": True, "dir": False, "template": False, "train_rows": False,
                                        "test_rows": False}, f"{where}: dataset")
    reward = _strict(data.get("reward") or {}, {"mode": False}, f"{where}: reward")
    logging = _strict(data.get("logging") or {}, {"project": False, "loggers": False, "wandb": False},
                      f"{where}: logging")
    loggers = tuple(logging.get("loggers", ["console", "file"]))
    for logger in loggers:
        _choice(logger, ("console", "file"), f"{where}: logging.loggers")
    known = KNOWN_DATASETS.get(dataset["name"], {})
    hub_id = _typed(model["hub_id"], str, f"{where}: model.hub_id")
    profile = _typed(data["profile"], str, f"{where}: profile")
    profiles = tuple(data.get("profiles") or [profile])
    test_rows = dataset.get("test_rows", known.get("test_rows"))

    return Recipe(
        name=recipe_name(path), path=path, description=str(data["description"]).strip(), profile=profile,
        profiles=profiles,
        model=ModelSpec(hub_id=hub_id, dir_name=str(model.get("dir") or hub_id.rstrip("/").rsplit("/", 1)[-1])),
        dataset=DatasetSpec(
            name=str(dataset["name"]), dir_name=str(dataset.get("dir") or dataset["name"]),
            template=_choice(dataset.get("template", "verl"), ("verl", "think"), f"{where}: dataset.template"),
            train_rows=dataset.get("train_rows", known.get("train_rows")),
            test_rows=test_rows,
        ),
        reward_mode=_choice(reward.get("mode", "strict"), ("strict", "flexible", "think"), f"{where}: reward.mode"),
        loggers=loggers,
        wandb=_choice(logging.get("wandb", "auto"), ("auto", "disabled"), f"{where}: logging.wandb"),
        project=str(logging.get("project", "rlrecipes")),
        verl=_verl_block(data["verl"], f"{where}: verl"),
        assets=None if data.get("assets") is None else _choice(data["assets"], ASSET_BUILDERS, f"{where}: assets"),
        expect=parse_expect(data["expect"], f"{where}: expect", profiles, test_rows),  # last: the other keys' errors first
    )


def recipe_name(path: Path) -> str:
    return path.resolve().relative_to(recipes_dir().resolve()).with_suffix("").as_posix()


def _resolve_file(name: str, root: Path, kind: str) -> Path:
    hint = f"{kind}s are named by their path under {root} without .yaml (`rlrecipes recipes` lists them)"
    if not name.strip() or any(ch in name for ch in "\0\n\r\t") or name != name.strip():
        raise RecipeError(f"not a {kind} name: {name!r}", hint=hint)
    candidate = Path(name)
    if candidate.suffix == ".yaml" and candidate.exists():
        path = candidate.resolve()
        if root.resolve() not in path.parents:
            raise RecipeError(f"{kind} file lies outside {root}", where=str(path), hint=hint)
    elif candidate.is_absolute() or ".." in candidate.parts:
        raise RecipeError(f"{kind} names are paths under {root}: no absolute path and no '..'", where=name,
                          hint=hint)
    else:  # `canary-ppo` or `canary-ppo.yaml`, under the root
        path = root / (name if candidate.suffix == ".yaml" else f"{name}.yaml")
    if kind == "recipe" and profiles_dir().resolve() in path.resolve().parents:
        raise RecipeError(f"{name!r} is a hardware profile, not a recipe", where=str(path),
                          hint=f"pass it as --profile {path.stem}")
    if path.exists():
        return path
    names = list_profiles() if kind == "profile" else list_recipes()
    close = difflib.get_close_matches(name.removesuffix(".yaml"), names, n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}?" if close else f"available: {', '.join(names)}"
    raise RecipeError(f"no {kind} named {name!r}", where=str(path), hint=hint)


def list_recipes() -> list[str]:
    root = recipes_dir()
    return sorted(recipe_name(p) for p in root.rglob("*.yaml") if profiles_dir() not in p.parents)


def list_profiles() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))


# ------------------------------------------------------------------------------ profile -> verl keys
def _profile_overrides(profile: Profile, uses_critic: bool, lora: bool) -> dict[str, Any]:
    spec = profile.image.spec
    out: dict[str, Any] = {
        "trainer.n_gpus_per_node": profile.gpus_per_node,
        "trainer.nnodes": profile.nnodes,
        "actor_rollout_ref.rollout.name": profile.rollout,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": profile.tensor_parallel,
        "actor_rollout_ref.model.enable_gradient_checkpointing": profile.gradient_checkpointing,
        spec.attn_key: profile.attention,
    }
    packs = profile.attention in PACKING_ATTENTION
    if not packs:
        # verl >= 0.6 packs micro batches by default; this project packs only with FlashAttention (values.check_packing)
        out["actor_rollout_ref.model.use_remove_padding"] = False
    if profile.gpu_memory_utilization is not None:
        out["actor_rollout_ref.rollout.gpu_memory_utilization"] = profile.gpu_memory_utilization
    if profile.rollout != "hf":
        # the rollout returns its log-probs, so verl logs the rollout-vs-actor metrics that show whether the
        # engine generates with the trained policy (rlrecipes.verl.rollout_sync); 0.9.1's default, not 0.8.0's
        out["actor_rollout_ref.rollout.calculate_log_probs"] = True
    micro = profile.micro_batch_per_gpu
    if "actor" in micro:
        out["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] = micro["actor"]
    if "log_prob" in micro:
        out["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"] = micro["log_prob"]
        out["actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"] = micro["log_prob"]
    if "param" in profile.offload:
        out["actor_rollout_ref.actor.fsdp_config.param_offload"] = profile.offload["param"]
    if "optimizer" in profile.offload:
        out["actor_rollout_ref.actor.fsdp_config.optimizer_offload"] = profile.offload["optimizer"]
    if "ref_param" in profile.offload:
        out["actor_rollout_ref.ref.fsdp_config.param_offload"] = profile.offload["ref_param"]
    if uses_critic:
        if "critic" in micro:
            out["critic.ppo_micro_batch_size_per_gpu"] = micro["critic"]
        if "param" in profile.offload:
            out[f"{spec.critic_fsdp}.param_offload"] = profile.offload["param"]
        if "optimizer" in profile.offload:
            out[f"{spec.critic_fsdp}.optimizer_offload"] = profile.offload["optimizer"]
        out["critic.model.enable_gradient_checkpointing"] = profile.gradient_checkpointing
        out[spec.critic_attn_key] = profile.attention
        if not packs:
            out["critic.model.use_remove_padding"] = False
    if profile.dtype == "fp32" and spec.fp32_by_config:
        # verl computes in bf16 unless told otherwise; these are its config-level FP32 switches
        # (fsdp_config.model_dtype and fsdp_config.mixed_precision, read by verl/workers/fsdp_workers.py); the
        # autocast sites that config cannot reach are patched in the P40 image.
        fp32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
        out["+actor_rollout_ref.actor.fsdp_config.model_dtype"] = "fp32"
        out["+actor_rollout_ref.actor.fsdp_config.mixed_precision"] = fp32
        out["+actor_rollout_ref.ref.fsdp_config.model_dtype"] = "fp32"
        if uses_critic:
            out["+critic.model.fsdp_config.model_dtype"] = "fp32"
            out["+critic.model.fsdp_config.mixed_precision"] = dict(fp32)
    if lora and profile.rollout == "hf" and spec.lora_hf_rollout_needs_orig_params:
        out["+actor_rollout_ref.actor.fsdp_config.use_orig_params"] = True
    return out


# ---------------------------------------------------------------------------------- resolution
_VERL_DEFAULT = object()


def needs_critic(value: Any) -> bool:
    """verl's rule: `critic.enable` when set, else a critic exactly for the GAE estimator (`value(key)`
    reads the config)."""
    enable = value("critic.enable")
    return bool(enable) if enable is not None else (value("algorithm.adv_estimator") or "gae") == "gae"


ENGINE_KEYS = (
    "actor_rollout_ref.model.path", "critic.model.path", "data.train_files", "data.val_files",
    "trainer.logger", "trainer.project_name", "trainer.experiment_name", "trainer.default_local_dir",
    "custom_reward_function.path", "reward.custom_reward_function.path",
)


@dataclass
class ResolvedRun:
    recipe: Recipe
    profile: Profile
    overrides: dict[str, Any]
    sources: dict[str, str]
    variables: dict[str, Any]
    use_critic: bool  # derived once, by resolve(): critic.enable when set, else the GAE estimator needs one
    warnings: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def image(self) -> Image:
        return self.profile.image

    @property
    def paths(self) -> dict[str, str]:
        return {k: str(self.variables[k]) for k in PATH_DEFAULTS}

    def get(self, key: str, default: Any = _VERL_DEFAULT, kind: type | None = None) -> Any:
        """The value verl will see for a dotted config key -- the one way to read a run's config.

        Set: the last override that sets it, itself (with any +/++ prefix) or inside a parent given as
        a mapping (`+a.b={c: 1}`), ${VAR}s substituted and a `${other.key}` interpolation followed (as
        OmegaConf does); `~key` removes it. Unset: `default`, or when none is given verl's own default
        for this image's verl (VerlSpec.defaults), else None. `kind` (int, float, bool, str) converts a
        set value; with a kind, a value of None or "" counts as unset.
        """
        value = self._value(key, ())
        if value is UNSET or (kind is not None and (value is None or value == "")):
            return self.image.spec.default(key) if default is _VERL_DEFAULT else default
        return value if kind is None else kind(value)

    def _value(self, key: str, seen: tuple[str, ...]) -> Any:
        found, value = False, None
        for raw_key, raw in self.overrides.items():
            bare = ov.bare_key(raw_key)
            if raw_key.startswith("~"):
                if key == bare or key.startswith(bare + "."):
                    found = False
                continue
            if bare == key:
                found, value = True, ov.substitute(raw, self.variables)
            elif key.startswith(bare + "."):
                node = ov.substitute(raw, self.variables)
                for part in key[len(bare) + 1:].split("."):
                    if not isinstance(node, dict) or part not in node:
                        node = UNSET
                        break
                    node = node[part]
                if node is not UNSET:
                    found, value = True, node
        if not found:
            return UNSET
        match = INTERPOLATION.match(value) if isinstance(value, str) else None
        if match and match.group(1) not in seen and len(seen) < 10:
            target = self._value(match.group(1), (*seen, key))
            # an unset target resolves, as in verl's composed config, to verl's default for it (where known)
            return self.image.spec.default(match.group(1), UNSET) if target is UNSET else target
        return value

    @property
    def model_path(self) -> Path:
        return Path(self.get("actor_rollout_ref.model.path"))

    @property
    def ckpt_dir(self) -> Path:
        return Path(self.get("trainer.default_local_dir"))

    @property
    def log_dir(self) -> Path:
        return Path(self.variables["LOG_DIR"]) / self.name

    @property
    def data_dir(self) -> Path:
        return Path(self.variables["DATA_DIR"]) / self.recipe.dataset.dir_name

    @property
    def use_reference_policy(self) -> bool:
        return bool(self.get("actor_rollout_ref.actor.use_kl_loss")
                    or self.get("algorithm.use_kl_in_reward"))

    @property
    def lora_rank(self) -> int:
        return int(self.get("actor_rollout_ref.model.lora_rank") or 0)

    def hydra_overrides(self) -> list[str]:
        """Overrides with every ${VAR} substituted: what verl's compose / main_ppo receives."""
        return [ov.format_override(k, ov.substitute(v, self.variables)) for k, v in self.overrides.items()]

    def launcher_overrides(self) -> list[str]:
        """Overrides as written into the generated launcher (${VAR} left for the shell)."""
        return [ov.format_override(k, v) for k, v in self.overrides.items()]


def base_loggers(recipe: Recipe, spec: VerlSpec) -> list[str]:
    loggers = list(recipe.loggers)
    if not spec.file_logger and "file" in loggers:
        # no file logger in this verl (0.5.0); its console output is tee'd to LOG_DIR by the launcher instead.
        loggers.remove("file")
    return loggers


def logger_value(recipe: Recipe, spec: VerlSpec, wandb: bool) -> list[str]:
    loggers = base_loggers(recipe, spec)
    return loggers + ["wandb"] if wandb and recipe.wandb == "auto" else loggers


def resolve(name: str, profile: str | None = None, overrides: list[str] | None = None,
            env: dict[str, str] | None = None) -> ResolvedRun:
    env = dict(os.environ if env is None else env)
    recipe = load_recipe(name)
    prof = load_profile(profile or recipe.profile)
    warnings = []
    if prof.name not in recipe.profiles:
        warnings.append(f"profile {prof.name!r} is not one this recipe was tuned for ({', '.join(recipe.profiles)})")
    cli = ov.parse_cli(overrides or [])
    spec = prof.image.spec

    for layer, block in (("profile", prof.verl), ("recipe", recipe.verl)):
        for key in block:
            if ov.bare_key(key) in ENGINE_KEYS:
                raise RecipeError(f"'{key}' is derived by rlrecipes and cannot be set in a {layer}",
                                  where=f"{prof.path if layer == 'profile' else recipe.path}: verl.{key}",
                                  hint="set model.hub_id / dataset / logging in the recipe, or override it "
                                       "on the command line")

    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def put(block: dict[str, Any], source: str) -> None:
        for key, value in block.items():
            bare = ov.bare_key(key)
            for existing in [k for k in merged if ov.bare_key(k) == bare]:
                del merged[existing]  # a later layer replaces the value and its add/change prefix
            merged[key] = value
            sources[bare] = source

    probe = {ov.bare_key(k): v for layer in (prof.verl, recipe.verl, cli) for k, v in layer.items()}
    layers = ((cli, "command line"), (recipe.verl, str(recipe.path)), (prof.verl, str(prof.path)))

    def where(key: str) -> str:
        origin = next((name for block, name in layers if any(ov.bare_key(k) == key for k in block)), "verl default")
        return f"{origin}: {key}"

    warnings += check_values(lambda key: probe.get(key, UNSET), where)
    uses_critic = needs_critic(lambda key: resolved(key, probe.get))
    lora = int(resolved("actor_rollout_ref.model.lora_rank", probe.get) or 0) > 0

    engine: dict[str, Any] = {
        "actor_rollout_ref.model.path": "${MODELS_DIR}/" + recipe.model.dir_name,
        "data.train_files": "${DATA_DIR}/" + recipe.dataset.dir_name + "/train.parquet",
        "data.val_files": "${DATA_DIR}/" + recipe.dataset.dir_name + "/test.parquet",
        spec.reward_path_key: "${REWARD_FN}",
        spec.reward_name_key: "compute_score",
        "trainer.logger": "${LOGGER}",
        "trainer.project_name": recipe.project,
        "trainer.experiment_name": recipe.name.replace("/", "-"),
        "trainer.default_local_dir": "${CKPT_DIR}/" + recipe.name,
    }
    if recipe.reward_mode != "strict":
        engine[spec.reward_kwargs_key] = {"mode": recipe.reward_mode}
    if uses_critic:
        engine["critic.model.path"] = "${MODELS_DIR}/" + recipe.model.dir_name
    put(engine, "engine")
    put(_profile_overrides(prof, uses_critic, lora), f"profile {prof.name}")
    put(prof.verl, f"profile {prof.name}")
    put(recipe.verl, f"recipe {recipe.name}")
    put(cli, "command line")

    final = {ov.bare_key(k): v for k, v in merged.items()}
    attention = {"attn": final.get(ov.bare_key(spec.attn_key))}
    if uses_critic:
        attention["critic_attn"] = final.get(ov.bare_key(spec.critic_attn_key))
    check_packing(lambda key: final.get(key, spec.default(key)), where, attention)

    wandb = bool(env.get("WANDB_API_KEY"))
    variables: dict[str, Any] = {k: env.get(k, default) for k, default in PATH_DEFAULTS.items()}
    variables["REWARD_FN"] = env.get("REWARD_FN", str(PACKAGE_DIR / "rewards" / "gsm8k.py"))
    variables["LOGGER"] = logger_value(recipe, spec, wandb)
    for key, value in merged.items():
        unknown = ov.variables_in(value) - set(variables)
        if unknown:
            raise RecipeError(f"unknown variable(s) {', '.join(sorted(unknown))} in {key}",
                              hint=f"known variables: {', '.join(sorted(variables))}")
    return ResolvedRun(recipe=recipe, profile=prof, overrides=merged, sources=sources, variables=variables,
                       use_critic=uses_critic, warnings=warnings)
