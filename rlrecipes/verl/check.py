"""Validate composed verl configs with verl's own code. Runs INSIDE an environment that has the
verl version being checked (the image, or .venvs/verl-<version>): `python -m rlrecipes.verl.check`
reads {"jobs": [{"id": ..., "overrides": [...]}]} as JSON on stdin and prints one JSON result per job;
`python -m rlrecipes.verl.check --schema` prints the keys of this verl's config (rlrecipes/verl/schema.py).

Steps per job, mirroring what `python -m verl.trainer.main_ppo` does before any GPU work:
1. compose `ppo_trainer` with Hydra from verl's own config tree -> unknown keys, bad types fail here;
2. the version's own validation: 0.8.x `verl.utils.config.validate_config` (+ the rollout registry that
   the worker consults); 0.5.0 `RayPPOTrainer._validate_config` plus the mini/micro batch checks that
   0.5.0 only runs inside the GPU workers (workers/fsdp_workers.py): OUR COPY, with their arithmetic and
   messages, held equal to verl's by tests/verl_layer/test_verl_worker_checks.py. Everything else is verl's own code;
3. the algorithm's names looked up in verl's own registries, as the trainer and the actor look them up at the
   first step (`_check_algorithm_names`): verl's config takes any string for them;
4. a custom replay-buffer sampler (verl 0.9's V1 trainer) built the way the trainer builds it (`_check_sampler`).
This module imports only the stdlib (and the stdlib-only specs.py and schema.py) at top level: it is loaded by a
foreign interpreter.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import os
import re
import sys
import types

from rlrecipes.verl.schema import Schema, not_a_key, suggest, tree_of
from rlrecipes.verl.specs import spec_for

def _version() -> str:
    import verl

    return verl.__version__


def _config_dir() -> str:
    import verl

    return os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=_config_dir(), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def _key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _suggest(bad_key: str, base_cfg) -> list[str]:
    from omegaconf import OmegaConf

    return suggest(bad_key, tree_of(OmegaConf.to_container(base_cfg, resolve=False)))


def schema() -> Schema:
    """The keys of this verl's composed default config and its config groups: what rlrecipes/verl/schema.py
    snapshots for `plan`, which has no verl."""
    from omegaconf import OmegaConf

    root = _config_dir()
    groups = {os.path.relpath(d, root).replace(os.sep, "/") for d, _, files in os.walk(root)
              if d != root and any(f.endswith(".yaml") for f in files)}
    return Schema(verl=_version(), tree=tree_of(OmegaConf.to_container(_compose([]), resolve=False)),
                  groups=frozenset(groups))


def _composition_error(exc: Exception, overrides: list[str]) -> dict:
    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    detail = f"{text}\n{cause}" if cause else text
    bad = None
    match = re.search(r"Could not (?:override|append to config|delete from config)\s+'([^']+)'", detail)
    if match:
        bad = match.group(1)
    else:
        match = re.search(r"[Kk]ey '([^']+)' (?:is not in struct|not in)", detail)
        if match:
            leaf = match.group(1)
            bad = next((_key_of(o) for o in overrides if _key_of(o).endswith("." + leaf) or _key_of(o) == leaf), leaf)
    suggestions: list[str] = []
    if bad:
        try:
            base = _compose([o for o in overrides if _key_of(o) != bad])
            suggestions = _suggest(bad, base)
        except Exception:  # noqa: BLE001 -- suggestions are best effort; the error itself stands
            suggestions = []
    if bad is None:
        return {"ok": False, "kind": "compose", "key": None, "message": detail.strip().splitlines()[0],
                "detail": detail.strip(), "suggestions": []}
    return {"ok": False, "kind": "unknown_key", "key": bad, "message": not_a_key(bad),
            "detail": detail.strip(), "suggestions": suggestions}


def _check_050(cfg) -> tuple[bool, bool]:
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    use_critic = cfg.algorithm.adv_estimator == AdvantageEstimator.GAE
    use_ref = bool(cfg.algorithm.use_kl_in_reward or cfg.actor_rollout_ref.actor.use_kl_loss)
    # 0.5.0 raises NotImplementedError for estimators it cannot run (ray_trainer.__init__).
    known = {e.value for e in AdvantageEstimator}
    if cfg.algorithm.adv_estimator not in known:
        raise AssertionError(f"algorithm.adv_estimator={cfg.algorithm.adv_estimator!r} is not one of {sorted(known)}")
    RayPPOTrainer._validate_config(types.SimpleNamespace(config=cfg, use_critic=use_critic, use_reference_policy=use_ref))
    _worker_checks_050(cfg, use_critic)
    return use_critic, use_ref


def _worker_checks_050(cfg, use_critic: bool) -> None:
    """OUR COPY of checks verl 0.5.0 runs only inside its GPU workers (fsdp_workers.py
    ActorRolloutRefWorker.__init__, CriticWorker.__init__, _build_rollout), with the same arithmetic and
    messages: verl 0.5.0 checks the micro batches whether or not use_dynamic_bsz is on, and the critic
    scales its mini batch by its own `critic.rollout_n`. tests/verl_layer/test_verl_worker_checks.py runs verl's real
    constructors on the CPU beside this copy on the same configs."""
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    actor = cfg.actor_rollout_ref.actor
    sp = actor.get("ulysses_sequence_parallel_size", 1) or 1
    n = cfg.actor_rollout_ref.rollout.n
    mini = actor.ppo_mini_batch_size * n // (world // sp)
    assert mini > 0, f"ppo_mini_batch_size {mini} should be larger than 0 after normalization"
    micro = actor.ppo_micro_batch_size_per_gpu
    if actor.ppo_micro_batch_size is not None:
        micro = actor.ppo_micro_batch_size // (world // sp)
    if micro is not None:
        assert mini % micro == 0, (
            f"normalized ppo_mini_batch_size {mini} should be divisible by ppo_micro_batch_size_per_gpu {micro}")
        assert mini // micro > 0, (
            f"normalized ppo_mini_batch_size {mini} should be larger than ppo_micro_batch_size_per_gpu {micro}")
    tp = cfg.actor_rollout_ref.rollout.tensor_model_parallel_size
    assert world % tp == 0, f"rollout world_size: {world} is not divisible by infer_tp: {tp}"
    name = cfg.actor_rollout_ref.rollout.name
    if name not in ("hf", "vllm", "sglang"):
        raise NotImplementedError(f"Rollout name: {name} is not supported")
    if use_critic:
        critic = cfg.critic
        csp = critic.get("ulysses_sequence_parallel_size", 1) or 1
        cmini = critic.ppo_mini_batch_size * critic.rollout_n // (world // csp)
        cmicro = critic.ppo_micro_batch_size_per_gpu
        if critic.ppo_micro_batch_size is not None:
            cmicro = critic.ppo_micro_batch_size // (world // csp)
        if cmicro is not None:
            assert cmini % cmicro == 0, (
                f"normalized ppo_mini_batch_size {cmini} should be divisible by ppo_micro_batch_size_per_gpu {cmicro}")
            assert cmini // cmicro > 0, (
                f"normalized ppo_mini_batch_size {cmini} should be larger than ppo_micro_batch_size_per_gpu {cmicro}")


def _check_08x(cfg) -> tuple[bool, bool]:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY

    with contextlib.suppress(ImportError):
        # main_ppo migrates the legacy reward keys before anything reads them
        from verl.experimental.reward_loop import migrate_legacy_reward_impl

        cfg = migrate_legacy_reward_impl(cfg)
    use_critic, use_ref = need_critic(cfg), need_reference_policy(cfg)
    if use_critic and not os.path.isdir(os.path.expanduser(str(cfg.critic.model.path))):
        # Validation checks the config, not the assets (preflight checks the model directory). The actor's
        # model node (an HFModelConfig, which reads config.json and the tokenizer from the directory when it
        # is built) sits beside the actor's config and validate_config never builds it; the critic's is
        # nested in the critic's config and would be built with it. Left as data, as the actor's is: every
        # setting of the critic is still checked by verl's own CriticConfig.
        from omegaconf import open_dict

        cfg = copy.deepcopy(cfg)
        with open_dict(cfg):
            cfg.critic.model.pop("_target_", None)
        print(f"NOTICE: critic.model.path {cfg.critic.model.path} does not exist here: the critic's settings were "
              "checked without reading its model directory (as the actor's are); preflight checks the model")
    rollout = cfg.actor_rollout_ref.rollout
    if rollout.name == "vllm" and importlib.util.find_spec("vllm") is None:
        # CPU validation environments have no vLLM. validate_config's only vLLM-dependent step is the
        # LoRA rank check, `get_vllm_max_lora_rank` from vllm_rollout/utils.py, a module that imports
        # vllm at its top. verl's own function is run instead from that file's source, without the
        # module's imports: it then takes the rank list verl falls back to when vllm.config.lora cannot
        # be imported. Everything else in validate_config runs unchanged.
        with _vllm_rollout_utils_without_vllm():
            validate_config(config=cfg, use_reference_policy=use_ref, use_critic=use_critic)
        print("NOTICE: vLLM is not installed here; LoRA rank checked against verl's fallback list of vLLM ranks.")
    else:
        validate_config(config=cfg, use_reference_policy=use_ref, use_critic=use_critic)
    if (rollout.name, rollout.mode) not in _ROLLOUT_REGISTRY:
        available = sorted({f"{n} ({m})" for n, m in _ROLLOUT_REGISTRY})
        raise AssertionError(
            f"Rollout {rollout.name} with mode {rollout.mode} not found; this verl supports: {', '.join(available)}")
    return use_critic, use_ref


@contextlib.contextmanager
def _vllm_rollout_utils_without_vllm():
    """`verl.workers.rollout.vllm_rollout.utils` as a module holding only verl's own
    `get_vllm_max_lora_rank`, compiled from verl's source file, for the duration of the block."""
    import ast
    import typing

    import verl

    path = os.path.join(os.path.dirname(verl.__file__), "workers", "rollout", "vllm_rollout", "utils.py")
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_vllm_max_lora_rank"]
    if len(funcs) != 1:
        raise RuntimeError(f"get_vllm_max_lora_rank not found in {path}: validate against a verl with vLLM installed")
    utils = types.ModuleType("verl.workers.rollout.vllm_rollout.utils")
    utils.__file__ = path
    utils.__dict__.update(Literal=typing.Literal, get_args=typing.get_args)
    exec(compile(ast.Module(body=funcs, type_ignores=[]), path, "exec"), utils.__dict__)  # noqa: S102 -- verl's own code
    package = types.ModuleType("verl.workers.rollout.vllm_rollout")
    package.__path__ = [os.path.dirname(path)]
    package.utils = utils
    names = (package.__name__, utils.__name__)
    saved = {name: sys.modules.get(name) for name in names}
    sys.modules.update(dict(zip(names, (package, utils))))
    try:
        yield utils
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


_DEFAULTS = None


def _check_algorithm_names(cfg) -> None:
    """The advantage estimator and the policy loss by name, looked up with verl's own getters: verl's config is a
    string for both, so `algorithm.adv_estimator=rlooo` composes and validates and fails only when the first
    step computes its advantages (ray_trainer.compute_advantage -> core_algos.get_adv_estimator_fn), and an
    unknown `policy_loss.loss_mode` when the actor first computes its loss (0.8+: workers/utils/losses.py,
    0.5.0: workers/actor/dp_actor.py -> core_algos.get_policy_loss_fn). Both getters raise ValueError naming what
    this verl has. "vanilla" is verl's default loss; 0.5.0 computes it in dp_actor without the registry."""
    from verl.trainer.ppo import core_algos

    core_algos.get_adv_estimator_fn(cfg.algorithm.adv_estimator)
    loss_mode = cfg.actor_rollout_ref.actor.policy_loss.get("loss_mode", "vanilla")
    if loss_mode != "vanilla":
        core_algos.get_policy_loss_fn(loss_mode)


def _type_mismatch(cfg, overrides: list[str]) -> dict | None:
    """verl's YAML tree is untyped, so Hydra accepts `data.train_batch_size=abc` and verl later fails
    with an unrelated TypeError. Compare each overridden value with the type of verl's default."""
    global _DEFAULTS
    from omegaconf import OmegaConf

    if _DEFAULTS is None:
        _DEFAULTS = _compose([])
    for override in overrides:
        if override.startswith(("~", "+")):
            continue
        key = _key_of(override)
        default = OmegaConf.select(_DEFAULTS, key, default=None)
        value = OmegaConf.select(cfg, key, default=None)
        if default is None or value is None or isinstance(default, str) or OmegaConf.is_config(default):
            continue
        expected = bool if isinstance(default, bool) else (int, float) if isinstance(default, float) else int
        if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
            name = {bool: "a boolean", int: "an integer"}.get(expected, "a number")
            return {"ok": False, "kind": "type", "key": key, "suggestions": [], "detail": "",
                    "message": f"'{key}' must be {name} (verl's default is {default!r}), got {value!r}"}
    return None


def _describe(exc: Exception) -> str:
    """verl validates with bare asserts too: when there is no message, show the failing line of verl."""
    import traceback

    text = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if str(exc).strip():
        return text
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    where = frame.filename.split("site-packages/")[-1]
    return f"{text} at {where}:{frame.lineno}: {(frame.line or '').strip()}"


def _check_sampler(cfg) -> None:
    """A custom replay-buffer sampler (`trainer.v1.sampler.custom_sampler.{path,name}`, verl 0.9's V1 trainer) is
    loaded and built by verl's own `PPOTrainer._build_replay_buffer`, as the trainer does once its workers are up,
    so a wrong path, class or sampler_kwargs fails here (rlrecipes/verl/replay_poll.py checks its own). verl gives
    a custom sampler none of DAPO's group filtering and failed-group refill: set beside one, either would be
    silently off, so both are refused here."""
    v1 = cfg.trainer.get("v1")
    custom = v1.sampler.get("custom_sampler") if v1 is not None else None
    if not custom or not (custom.get("path") and custom.get("name")):
        return
    filter_groups = cfg.algorithm.get("filter_groups")
    refill = bool(v1.sampler.get("sync_refill_failed_groups"))
    for key, on in (("algorithm.filter_groups.enable", bool(filter_groups and filter_groups.get("enable", False))),
                    ("trainer.v1.sampler.sync_refill_failed_groups", refill)):
        if on:
            raise ValueError(f"{key}=true beside trainer.v1.sampler.custom_sampler ({custom.name}): verl passes a "
                             "custom sampler neither DAPO's group filtering nor failed-group refill "
                             "(trainer/ppo/v1/trainer_base.py _build_replay_buffer), so it would be off; "
                             "drop one of the two (trainer.v1.sampler.custom_sampler.path=null "
                             "trainer.v1.sampler.custom_sampler.name=null drops the sampler the Hopper profiles set)")
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    trainer = types.SimpleNamespace(config=cfg, trainer_mode=v1.trainer_mode, _add_prompts_to_generate=None,
                                    _resolve_filter_groups_metric=lambda: None)
    PPOTrainer._build_replay_buffer(trainer)


def check(overrides: list[str]) -> dict:
    import verl
    from omegaconf import OmegaConf

    version = verl.__version__
    try:
        cfg = _compose(overrides)
    except Exception as exc:  # noqa: BLE001 -- Hydra raises several types; all are composition errors
        return _composition_error(exc, overrides)
    mismatch = _type_mismatch(cfg, overrides)
    if mismatch:
        return mismatch
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            use_critic, use_ref = VALIDATORS[spec_for(version).validator](cfg)
            _check_algorithm_names(cfg)
            _check_sampler(cfg)
    except Exception as exc:  # noqa: BLE001 -- verl validates with asserts and ValueErrors alike
        return {"ok": False, "kind": "validation", "key": None, "message": _describe(exc),
                "detail": captured.getvalue(), "suggestions": []}
    return {
        "ok": True,
        "verl": version,
        "use_critic": bool(use_critic),
        "use_reference_policy": bool(use_ref),
        "notices": [line for line in captured.getvalue().splitlines() if line.strip()],
        "config": OmegaConf.to_container(cfg, resolve=False),
    }


# VerlSpec.validator -> how that verl validates a composed config
VALIDATORS = {"ray_trainer": _check_050, "validate_config": _check_08x}


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv) == ["--schema"]:
        # the snapshot plan checks keys against (scripts/verl_schema.py writes it into rlrecipes/verl/schema/)
        with contextlib.redirect_stdout(sys.stderr):
            snapshot = schema()
        sys.stdout.write(snapshot.as_json())
        return 0
    request = json.load(sys.stdin)
    results = []
    # verl and Ray print on import; keep stdout for the JSON answer only.
    with contextlib.redirect_stdout(sys.stderr):
        for job in request["jobs"]:
            result = check(list(job["overrides"]))
            result["id"] = job.get("id")
            results.append(result)
    import verl

    # Every answer names the verl that gave it, so the caller can refuse an interpreter with the wrong one.
    json.dump({"verl": verl.__version__, "results": results}, sys.stdout, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
