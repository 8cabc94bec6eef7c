"""What rlrecipes knows about verl lives in rlrecipes/verl/: a new verl version is one VerlSpec.

The first test registers a fictitious verl (only inside the test) whose config keys all moved, and an
image that pins it; resolve, plan, memory, preflight and the Ray connection then follow the spec without
any other edit. The second keeps the knowledge in one place: no version string is compared and no
checkpoint-layout name is spelled outside rlrecipes/verl/.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from rlrecipes.launch.cluster import ray_init_kwargs
from rlrecipes.errors import RecipeError
from rlrecipes.recipe.images import IMAGES
from rlrecipes.plan.memory import estimate_memory, host_ram_need
from rlrecipes.plan.plan import build_plan
from rlrecipes.preflight.checks import Context, run_checks
from rlrecipes.preflight.host import HostFacts
from rlrecipes.preflight.inventory import Gpu, Inventory
from rlrecipes.recipe.load import resolve
from rlrecipes.recipe.validate import validate_runs
from rlrecipes.verl.specs import COMMON_DEFAULTS, SPECS, V0_8_0, VerlSpec

REPO = Path(__file__).resolve().parents[2]
PPO = "qwen2.5-0.5b-gsm8k-ppo"

FAKE = VerlSpec(
    version="9.9.9",
    attn_key="+actor_rollout_ref.model.override_config.attention_impl",
    critic_attn_key="+critic.model.override_config.attention_impl",
    critic_fsdp="critic.engine.fsdp",
    reward_path_key="reward.fn.path",
    reward_name_key="reward.fn.name",
    reward_kwargs_key="+reward.fn.kwargs",
    ray_init_prefix="ray.init.",
    rollout_engines=("vllm",),
    file_logger=True,
    ray_init_whole_mapping=True,
    fp32_by_config=False,
    lora_hf_rollout_needs_orig_params=False,
    validator="validate_config",
    defaults={**COMMON_DEFAULTS, "actor_rollout_ref.actor.ppo_epochs": 3},
)


@pytest.fixture
def fake_verl(tmp_path, monkeypatch):
    """verl 9.9.9 registered (the one edit a new version needs), an image pinning it, a profile using it."""
    image = dataclasses.replace(IMAGES["a100"], name="fake", verl="9.9.9")
    with pytest.raises(KeyError, match="no VerlSpec for verl '9.9.9'"):
        image.spec  # noqa: B018 -- an image cannot pin a verl rlrecipes knows nothing about
    monkeypatch.setitem(SPECS, FAKE.version, FAKE)  # <- the single place
    monkeypatch.setitem(IMAGES, "fake", image)
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    profile = (tmp_path / "recipes" / "profiles" / "a100-80gb.yaml").read_text()
    profile = profile.replace("image: a100", "image: fake").replace(
        "offload: {param: false, optimizer: false}", "offload: {param: true, optimizer: true}").replace(
        "attention: flash_attention_2", "attention: eager").replace(
        "use_remove_padding: true", "use_remove_padding: false")  # packing needs FlashAttention (test_packing.py)
    (tmp_path / "recipes" / "profiles" / "fake.yaml").write_text(profile)
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    return image


def test_a_new_verl_version_is_one_spec(fake_verl):
    run = resolve(PPO, profile="fake", overrides=["ray.init.num_cpus=6"], env={})
    assert run.image.spec is FAKE
    bare = {key.lstrip("+") for key in run.overrides}
    # every moved key is written where the fictitious verl expects it, none where 0.8.0 had it
    for key in (FAKE.attn_key, FAKE.critic_attn_key, FAKE.reward_path_key, FAKE.reward_name_key,
                f"{FAKE.critic_fsdp}.param_offload", f"{FAKE.critic_fsdp}.optimizer_offload"):
        assert key.lstrip("+") in bare, key
    for key in (V0_8_0.attn_key, V0_8_0.reward_path_key, f"{V0_8_0.critic_fsdp}.param_offload"):
        assert key.lstrip("+") not in bare, key
    assert run.variables["LOGGER"][:2] == ["console", "file"]  # the spec has a file logger

    # the planner takes verl's defaults from the spec (this verl runs 3 PPO epochs per batch by default)
    plan = build_plan(run)
    assert plan.image.verl == "9.9.9"
    assert plan.batch.optimizer_steps_per_step == 3 * plan.batch.prompts_per_step // plan.batch.ppo_mini_batch_prompts
    # the memory model and the host-RAM estimate read the critic's FSDP block at its new path
    resident = {t.name: t.bytes for t in estimate_memory(run).phases["update_actor"]}
    assert resident["critic weights"] == 0 and resident["critic Adam state"] == 0  # offloaded to the CPU
    assert any(part.startswith("critic Adam state offloaded") for part in host_ram_need(run)[1])
    # the Ray connection reads ray.init's kwargs under the new prefix
    kwargs, _notes = ray_init_kwargs(run)
    assert kwargs["num_cpus"] == 6

    # preflight: the attention check reads the new key; HF rollout is refused (the spec has none)
    a100 = Inventory(gpus=[Gpu(index=0, name="NVIDIA A100-SXM4-80GB", memory_mib=81920, compute_capability="8.0")
                           for _ in range(4)], source="test", driver_version="570.86.15")
    host = HostFacts(env={})
    attention = run_checks(run, a100, host, only=["attention"])[0]
    assert attention.status == "pass" and attention.message.startswith("eager"), attention
    hf = resolve(PPO, profile="fake", overrides=["actor_rollout_ref.rollout.name=hf"], env={})
    engine = run_checks(hf, a100, host, only=["rollout-engine"], context=Context(hf, a100, host))[0]
    assert engine.status == "fail" and "HF generate rollout" in engine.message

    # what is left to add besides the spec: the version's validation environment (and its lock)
    with pytest.raises(RecipeError, match=r"verl 9\.9\.9"):
        validate_runs([run])


# Version comparisons and checkpoint-layout names: only rlrecipes/verl/ may spell them.
FORBIDDEN = [
    re.compile(r"""startswith\(\s*["']\d+\."""),  # version.startswith("0.5.")
    re.compile(r"""\.verl\s*(==|!=|<|>)|(==|!=)\s*["']\d+\.\d+\.\d+["']"""),  # image.verl == "0.5.0"
    re.compile(r"latest_checkpointed_iteration"),
    re.compile(r"global_step_"),
]


def test_verl_knowledge_stays_in_rlrecipes_verl():
    package = REPO / "rlrecipes"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if (package / "verl") in path.parents:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if any(pattern.search(line) for pattern in FORBIDDEN):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []


def test_every_image_pins_a_verl_with_a_spec():
    for image in IMAGES.values():
        assert image.spec.version == image.verl
