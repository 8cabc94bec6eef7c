"""Recipe engine without verl: schema strictness, override syntax, precedence, version quirks,
plan arithmetic and generated launchers."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rlrecipes.recipe import overrides as ov
from rlrecipes.cli import main
from rlrecipes.errors import RecipeError
from rlrecipes.plan.plan import build_plan
from rlrecipes.recipe.load import list_profiles, list_recipes, load_recipe, resolve
from support.require import linter

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ["canary-dapo", "canary-dr-grpo", "canary-grpo-lora", "canary-gspo", "canary-ppo", "canary-reinforce-pp",
           "canary-rloo", "qwen2.5-0.5b-gsm8k-ppo", "qwen2.5-3b-gsm8k-grpo-lora", "smoke-grpo-lora", "smoke-ppo"]
ENV = {"WANDB_API_KEY": ""}


def test_shipped_recipes_and_profiles_are_listed():
    assert list_recipes() == SHIPPED
    assert {"a100-80gb", "p40-24gb", "h100-80gb", "any-1gpu"} <= set(list_profiles())


@pytest.mark.parametrize("name", SHIPPED)
def test_every_recipe_resolves_on_every_profile_it_lists(name):
    recipe = load_recipe(name)
    assert list(recipe.expect.profiles) == list(recipe.profiles)  # a contract, or a reason why not, per profile
    for profile in recipe.profiles:
        run = resolve(name, profile=profile, env=ENV)
        assert run.get("trainer.n_gpus_per_node") == run.profile.gpus_per_node
        assert run.get("trainer.default_local_dir") == f"/workspace/checkpoints/{name}"
        assert run.warnings == []


def test_a100_recipe_carries_the_tuned_values():
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", env=ENV)
    expected = {
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.gpu_memory_utilization": 0.8,
        "data.train_batch_size": 1024,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 512,
        "actor_rollout_ref.rollout.n": 5,
        "actor_rollout_ref.model.lora_rank": 64,
        "actor_rollout_ref.model.lora_alpha": 32,
        "actor_rollout_ref.actor.kl_loss_coef": 0.001,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        "trainer.total_epochs": 5,
        "trainer.save_freq": 20,
        "trainer.max_actor_ckpt_to_keep": 3,
        "trainer.resume_mode": "auto",
        "actor_rollout_ref.rollout.name": "vllm",
        "trainer.n_gpus_per_node": 4,
        "trainer.logger": ["console", "file"],
        "+actor_rollout_ref.model.override_config.attn_implementation": "flash_attention_2",
    }
    for key, value in expected.items():
        assert run.get(key.lstrip("+")) == value, key
    assert run.image.verl == "0.8.0"
    assert run.use_reference_policy and not run.use_critic


def test_p40_recipe_is_fp32_eager_hf_with_critic():
    run = resolve("qwen2.5-0.5b-gsm8k-ppo", env=ENV)
    assert run.image.verl == "0.5.0" and run.use_critic
    assert run.get("actor_rollout_ref.rollout.name") == "hf"
    # 0.5.0 honours only the underscored attention key: verl/workers/fsdp_workers.py loads the config with
    # attn_implementation="flash_attention_2", then update_model_config setattr()s each override key on it
    assert run.overrides["+actor_rollout_ref.model.override_config._attn_implementation"] == "eager"
    assert run.overrides["+critic.model.override_config._attn_implementation"] == "eager"
    assert run.get("actor_rollout_ref.actor.fsdp_config.model_dtype") == "fp32"
    assert run.get("critic.model.fsdp_config.mixed_precision") == {
        "param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    assert run.get("actor_rollout_ref.model.use_remove_padding") is False
    assert run.get("actor_rollout_ref.actor.use_torch_compile") is False
    assert run.get("critic.model.path") == "/workspace/models/Qwen2.5-0.5B-Instruct"
    assert run.get("trainer.logger") == ["console"]  # 0.5.0 has no file logger


def test_lora_on_hf_rollout_gets_use_orig_params_only_there():
    smoke = resolve("smoke-grpo-lora", env=ENV)
    assert smoke.overrides["+actor_rollout_ref.actor.fsdp_config.use_orig_params"] is True
    a100 = resolve("qwen2.5-3b-gsm8k-grpo-lora", env=ENV)
    assert "+actor_rollout_ref.actor.fsdp_config.use_orig_params" not in a100.overrides
    ppo = resolve("smoke-ppo", env=ENV)
    assert "+actor_rollout_ref.actor.fsdp_config.use_orig_params" not in ppo.overrides


def test_precedence_cli_over_recipe_over_profile_and_sources():
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=["trainer.total_epochs=15",
                                                           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8"],
                  env=ENV)
    assert run.get("trainer.total_epochs") == 15
    assert run.sources["trainer.total_epochs"] == "command line"
    assert run.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == 8
    assert run.sources["data.train_batch_size"] == "recipe qwen2.5-3b-gsm8k-grpo-lora"
    assert run.sources["actor_rollout_ref.rollout.gpu_memory_utilization"] == "profile a100-80gb"
    smoke = resolve("smoke-ppo", env=ENV)  # recipe pins nothing the profile sets: profile value stays
    assert smoke.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") == 2


def test_paths_come_from_the_environment_and_wandb_only_with_a_key():
    env = {"MODELS_DIR": "/m", "DATA_DIR": "/d", "CKPT_DIR": "/c", "LOG_DIR": "/l", "WANDB_API_KEY": "k"}
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", env=env)
    assert run.model_path == Path("/m/Qwen2.5-3B-Instruct")
    assert run.get("data.train_files") == "/d/gsm8k/train.parquet"
    assert run.ckpt_dir == Path("/c/qwen2.5-3b-gsm8k-grpo-lora")
    assert run.log_dir == Path("/l/qwen2.5-3b-gsm8k-grpo-lora")
    assert run.get("trainer.logger") == ["console", "file", "wandb"]
    assert resolve("smoke-ppo", env=env).get("trainer.logger") == ["console"]  # 0.5.0, wandb: disabled
    assert "trainer.logger=[console,file,wandb]" in run.hydra_overrides()


@pytest.mark.parametrize(
    ("yaml_text", "where", "message"),
    [
        ("descripton: x\n", "descripton", "unknown key 'descripton'"),
        ("model: {hub_id: a/b, revison: main}\n", "model.revison", "unknown key 'revison'"),
        ("dataset: {name: gsm8k, template: cot}\n", "dataset.template", "'cot' is not one of verl, think"),
        ("logging: {wandb: always}\n", "logging.wandb", "'always' is not one of auto, disabled"),
        ("verl: {trainer.default_local_dir: /tmp/x}\n", "trainer.default_local_dir", "derived by rlrecipes"),
        ("expect: {rewrd: {}}\n", "expect.rewrd", "unknown key 'rewrd'"),
    ],
)
def test_recipe_schema_errors_name_the_key(home, yaml_text, where, message):
    base = (home / "recipes" / "smoke-ppo.yaml").read_text()
    import yaml

    data = yaml.safe_load(base)
    patch = yaml.safe_load(yaml_text)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict) and key != "verl":
            data[key] = {**data[key], **value}
        elif key == "verl":
            data["verl"] = {**data["verl"], **value}
        else:
            data[key] = value
    (home / "recipes" / "bad.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(RecipeError) as info:
        resolve("bad", env=ENV)
    assert message in str(info.value)
    assert where in str(info.value)


def test_unknown_key_suggests_the_nearest(home):
    (home / "recipes" / "bad.yaml").write_text(
        (home / "recipes" / "smoke-ppo.yaml").read_text().replace("profiles:", "profils:"))
    with pytest.raises(RecipeError) as info:
        load_recipe("bad")
    assert "did you mean profiles" in str(info.value)


def test_profile_schema_is_strict(home):
    path = home / "recipes" / "profiles" / "any-1gpu.yaml"
    path.write_text(path.read_text().replace("gradient_checkpointing:", "gradient_checkpoint:"))
    with pytest.raises(RecipeError) as info:
        resolve("smoke-ppo", env=ENV)
    assert "unknown key 'gradient_checkpoint'" in str(info.value)
    assert "did you mean gradient_checkpointing" in str(info.value)


def test_profile_rollout_engine_must_exist_in_its_image(home):
    path = home / "recipes" / "profiles" / "p40-24gb.yaml"
    path.write_text(path.read_text().replace("engine: hf", "engine: vllm"))
    with pytest.raises(RecipeError, match="rollout engine 'vllm' is not installed in image 'p40'"):
        resolve("qwen2.5-0.5b-gsm8k-ppo", env=ENV)


def test_malformed_yaml_names_file_and_line(home):
    (home / "recipes" / "broken.yaml").write_text("description: x\nverl:\n  a: [1, 2\n")
    with pytest.raises(RecipeError) as info:
        load_recipe("broken")
    assert "broken.yaml:" in str(info.value) and "malformed YAML" in str(info.value)


def test_duplicate_key_is_an_error_with_its_line(home):
    # PyYAML kept the last of two keys: a second `profiles:` silently moved the run elsewhere
    path = home / "recipes" / "dup.yaml"
    text = (home / "recipes" / "smoke-ppo.yaml").read_text()
    path.write_text(text + "profiles: [p40-24gb]\n")
    line = text.count("\n") + 1
    with pytest.raises(RecipeError) as info:
        load_recipe("dup")
    assert "duplicate key profiles" in str(info.value)
    assert f"dup.yaml:{line}:" in str(info.value)


def test_duplicate_key_in_a_profile_is_an_error(home):
    path = home / "recipes" / "profiles" / "any-1gpu.yaml"
    path.write_text(path.read_text() + "dtype: fp16\n")
    with pytest.raises(RecipeError, match="duplicate key dtype"):
        resolve("smoke-ppo", env=ENV)


def test_exponent_without_a_dot_is_a_float(home):
    # YAML 1.1 (PyYAML) reads `1e-6` as the string '1e-6'; OmegaConf's loader reads a float
    path = home / "recipes" / "lr.yaml"
    text = (home / "recipes" / "smoke-ppo.yaml").read_text()
    assert "actor_rollout_ref.actor.optim.lr: 1.0e-4" in text
    path.write_text(text.replace("actor_rollout_ref.actor.optim.lr: 1.0e-4", "actor_rollout_ref.actor.optim.lr: 1e-6"))
    value = load_recipe("lr").verl["actor_rollout_ref.actor.optim.lr"]
    assert value == 1e-6 and isinstance(value, float)


def test_unknown_recipe_suggests_close_names():
    with pytest.raises(RecipeError, match="did you mean smoke-ppo"):
        resolve("smoke-pp", env=ENV)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1024, "1024"), (0.001, "0.001"), (3.0e-5, "3e-05"), (True, "true"), (None, "null"),
        ("grpo", "grpo"), ("all-linear", "all-linear"), ("/workspace/models/Qwen2.5-3B", "/workspace/models/Qwen2.5-3B"),
        ("1.0", "'1.0'"), ("true", "'true'"), ("hello world", "'hello world'"), ("it's", "'it\\'s'"),
        (["console", "file"], "[console,file]"), ({"param_dtype": "fp32"}, "{param_dtype:fp32}"),
        ("${MODELS_DIR}/x y", "'${MODELS_DIR}/x y'"), ("${LOGGER}", "${LOGGER}"),
    ],
)
def test_format_value_is_hydra_syntax(value, text):
    assert ov.format_value(value) == text
    if "${" not in text:  # variables are expanded by the shell first
        assert ov.parse_cli([f"k={text}"]) == {"k": value}


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("a.b=1", {"a.b": 1}), ("+a.b=[1,2]", {"+a.b": [1, 2]}), ("++a.b=x", {"++a.b": "x"}),
        ("~a.b", {"~a.b": None}), ("a.b={x:1,y:fp32}", {"a.b": {"x": 1, "y": "fp32"}}),
    ],
)
def test_parse_cli_keeps_hydra_prefixes(item, expected):
    assert ov.parse_cli([item]) == expected


@pytest.mark.parametrize("item", ["a.b=1,2", "a.b", "=3", "a.b=[1,"])
def test_parse_cli_rejects_what_hydra_rejects_or_sweeps(item):
    with pytest.raises(RecipeError):
        ov.parse_cli([item])


def test_shell_word_keeps_variables_expandable_and_quotes_the_rest():
    assert ov.shell_word("a.b='${MODELS_DIR}/x'") == "\"a.b='${MODELS_DIR}/x'\""
    assert ov.shell_word("a.b=[console,file]") == "'a.b=[console,file]'"
    assert ov.shell_word("a.b=1") == "a.b=1"
    out = subprocess.run(["bash", "-c", "MODELS_DIR='/m m'; printf '%s' " + ov.shell_word("a='${MODELS_DIR}/$x'")],
                         capture_output=True, text=True, check=True).stdout
    assert out == "a='/m m/$x'"


def test_plan_of_the_a100_recipe():
    plan = build_plan(resolve("qwen2.5-3b-gsm8k-grpo-lora", env=ENV))
    assert plan.batch.responses_per_step == 5120
    assert plan.batch.optimizer_steps_per_step == 2
    assert plan.batch.responses_per_gpu_per_mini_batch == 640  # 512 x 5 / 4 GPUs
    assert plan.batch.gradient_accumulation == 20              # 640 / micro 32
    assert plan.schedule.steps_per_epoch == 7                  # 7473 // 1024
    assert plan.schedule.total_steps == 35
    assert plan.checkpoints.save_steps == [20, 35]
    assert plan.image.verl == "0.8.0" and plan.hardware.gpus == 4
    # 3.09B params fp32 + LoRA 119.7M (fp32 weights + Adam) per checkpoint, x (3 kept + 1 in flight)
    one = (3085938688 + 119734272) * 4 + 119734272 * 8
    assert plan.checkpoints.bytes_per_checkpoint == one
    assert plan.checkpoints.disk_needed_bytes == 3 * one  # only 2 saves in 35 steps: 2 kept + 1


def test_plan_of_fifteen_epochs_schedules_the_checkpoints_that_filled_disks():
    plan = build_plan(resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=["trainer.total_epochs=15"], env=ENV))
    assert plan.schedule.total_steps == 105
    assert plan.checkpoints.save_steps == [20, 40, 60, 80, 100, 105]
    assert plan.checkpoints.disk_needed_bytes == 4 * plan.checkpoints.bytes_per_checkpoint


def test_plan_of_the_p40_recipe_counts_the_critic():
    plan = build_plan(resolve("qwen2.5-0.5b-gsm8k-ppo", env=ENV))
    assert plan.schedule.steps_per_epoch == 58 and plan.schedule.total_steps == 116
    assert plan.batch.gradient_accumulation == 16  # 64 responses / micro 4
    params = 494032768
    assert plan.checkpoints.parts == {"actor": params * 12, "critic": params * 12}


def test_plan_of_a_capped_recipe_says_what_caps_it(capsys):
    """canary-grpo-lora: 64 steps/epoch x 2 epochs, trainer.total_training_steps=60 -- the plan printed
    "= 60 steps" without saying why."""
    plan = build_plan(resolve("canary-grpo-lora", env=ENV))
    s = plan.schedule
    assert (s.steps_per_epoch, s.epochs, s.steps_by_epochs, s.total_training_steps, s.total_steps) == (64, 2, 128, 60, 60)
    assert plan.checkpoints.save_steps == [30, 60]
    # a cap beyond the epochs is never reached: verl's loop ends with the last epoch
    long = build_plan(resolve("canary-grpo-lora", overrides=["trainer.total_training_steps=500"], env=ENV)).schedule
    assert (long.steps_by_epochs, long.total_training_steps, long.total_steps) == (128, 500, 128)
    def printed(*argv: str) -> str:  # the plan's text, its table's wrapping undone
        assert main(["plan", *argv]) == 0
        return " ".join(re.sub(r"[\u2500-\u257f]", " ", capsys.readouterr().out).split())

    assert "64 steps/epoch x 2 epochs = 128 steps, capped at 60 by trainer.total_training_steps;" in printed(
        "canary-grpo-lora")
    assert ("= 128 steps (trainer.total_training_steps=500 is not reached: verl stops after the last epoch);"
            in printed("canary-grpo-lora", "trainer.total_training_steps=500"))
    assert "7 steps/epoch x 5 epochs = 35 steps; validation" in printed("qwen2.5-3b-gsm8k-grpo-lora")


def test_plan_of_a_tiny_model_prints_its_memory(capsys, monkeypatch):
    """The canary's GPU memory was "~0.0 GiB" and its --memory table empty (its model is built offline)."""
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("MODELS_DIR", "/nonexistent/models")  # not built yet: the builder's architecture
    assert main(["plan", "canary-grpo-lora", "--memory"]) == 0
    out = capsys.readouterr().out
    gpu_memory = re.search(r"GPU memory +│ ~(\d+\.\d) GiB per GPU of 16 GiB", out)
    assert gpu_memory and 1 < float(gpu_memory.group(1)) < 4, out
    table = out.split("per-GPU memory estimate at its peak (update_actor)")[1]
    assert re.search(r"│ CUDA context \+ allocator +│ +512\.0 MiB │", table), table
    assert re.search(r"│ actor weights +│ +\d+\.\d MiB │", table), table
    assert main(["plan", "smoke-grpo-lora"]) == 0
    gpu_memory = re.search(r"GPU memory +│ ~(\d+) MiB per GPU of 16 GiB", capsys.readouterr().out)
    assert gpu_memory and 512 < int(gpu_memory.group(1)) < 1024  # below 1 GiB: in MiB


def test_plan_uses_the_data_manifest_when_present(tmp_path):
    data = tmp_path / "gsm8k"
    data.mkdir()
    (data / "manifest.json").write_text('{"splits": {"train": {"rows": 2048}}}')
    plan = build_plan(resolve("qwen2.5-3b-gsm8k-grpo-lora", env={"DATA_DIR": str(tmp_path)}))
    assert plan.schedule.train_rows == 2048 and plan.schedule.steps_per_epoch == 2


def test_launchers_are_up_to_date_and_valid_bash():
    assert main(["launchers", "--check"]) == 0
    for name in SHIPPED:
        script = REPO / "recipes" / f"{name}.sh"
        subprocess.run(["bash", "-n", str(script)], check=True)
        text = script.read_text()
        assert "python3 -m verl.trainer.main_ppo" in text
        for item in resolve(name, env=ENV).launcher_overrides():
            assert ov.shell_word(item) in text, item


def test_launcher_expands_to_the_validated_overrides(tmp_path):
    """Run the generated launcher with a stand-in python3 that records its argv: after the shell has
    expanded it, the arguments are exactly what resolve() validates."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text('#!/usr/bin/env bash\nif [ "$1" = -c ]; then echo /r/gsm8k.py; exit; fi\n'
                                  'printf "%s\\n" "$@" > "$ARGV_OUT"\n')
    (fake / "python3").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "MODELS_DIR": "/m", "DATA_DIR": "/d", "CKPT_DIR": "/c",
           "LOG_DIR": str(tmp_path / "logs"), "ARGV_OUT": str(tmp_path / "argv"), "REWARD_FN": "/r/gsm8k.py"}
    subprocess.run(["bash", str(REPO / "recipes" / "qwen2.5-3b-gsm8k-grpo-lora.sh"), "trainer.total_epochs=15"],
                   env=env, check=True)
    argv = (tmp_path / "argv").read_text().splitlines()
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", env={**env, "WANDB_API_KEY": ""})
    # The launcher execs the stop guard (graceful stop), which runs verl with the overrides.
    assert argv[:8] == ["-m", "rlrecipes.verl.stopguard", "--ckpt-dir", "/c/qwen2.5-3b-gsm8k-grpo-lora", "--",
                        "python3", "-m", "verl.trainer.main_ppo"]
    parsed = ov.parse_cli(argv[8:])
    expected = ov.parse_cli(run.hydra_overrides())
    assert parsed == {**expected, "trainer.total_epochs": 15}
    assert list((tmp_path / "logs" / "qwen2.5-3b-gsm8k-grpo-lora").glob("console-*.log"))


def test_stale_launcher_is_detected(home, capsys):
    assert main(["launchers", "--check"]) == 0
    recipe = home / "recipes" / "smoke-ppo.yaml"
    recipe.write_text(recipe.read_text().replace("data.train_batch_size: 8", "data.train_batch_size: 16"))
    assert main(["launchers", "--check"]) == 1
    assert "stale or missing: recipes/smoke-ppo.sh" in capsys.readouterr().err
    assert main(["launchers"]) == 0
    assert "data.train_batch_size=16" in (home / "recipes" / "smoke-ppo.sh").read_text()
    assert main(["launchers", "--check"]) == 0


def test_cli_plan_prints_and_json(capsys):
    assert main(["plan", "qwen2.5-3b-gsm8k-grpo-lora"]) == 0
    out = capsys.readouterr().out
    assert "5120 responses" in out and "35 steps" in out and "python3" in out
    import json

    assert main(["plan", "qwen2.5-0.5b-gsm8k-ppo", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["image"]["verl"] == "0.5.0"


def test_cli_reports_bad_input_with_exit_2(capsys):
    assert main(["plan", "no-such-recipe"]) == 2
    assert "no recipe named 'no-such-recipe'" in capsys.readouterr().err


def test_shellcheck_passes_on_launchers():
    shellcheck = linter("shellcheck")
    scripts = [str(REPO / "recipes" / f"{n}.sh") for n in SHIPPED]
    proc = subprocess.run([shellcheck, *scripts], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_what_omegaconfs_loader_reads(tmp_path):
    """OmegaConf's loader is PyYAML's SafeLoader plus a float rule for exponents without a dot and a duplicate-key
    check -- not full YAML 1.2: yes/no stay booleans, dates stay strings (OmegaConf has no date type)."""
    from rlrecipes.recipe.load import _load_yaml

    path = tmp_path / "types.yaml"
    path.write_text("a: 1e-6\nb: 1.0e-6\nc: 1e6\nd: .5\ne: 0x10\nf: yes\ng: off\nh: ~\ni: 2024-01-01\nj: '1e-6'\n"
                    "k: ${oc.env:HOME}\n")
    got = _load_yaml(path)
    assert got == {"a": 1e-06, "b": 1e-06, "c": 1e6, "d": 0.5, "e": 16, "f": True, "g": False, "h": None,
                   "i": "2024-01-01", "j": "1e-6", "k": "${oc.env:HOME}"}
    assert isinstance(got["a"], float) and isinstance(got["c"], float)


def test_get_reads_what_verl_will_see():
    """ResolvedRun.get, case by case: a key inside a parent given as a mapping, `~` removal, `${...}`
    interpolations followed (a self-reference stays text, as it cannot resolve), `kind` conversion and
    an empty value counting as unset under a kind."""
    run = resolve("smoke-ppo", overrides=[
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:bf16}",
        "+trainer.x=${data.max_prompt_length}", "+trainer.y=${trainer.y}", "+trainer.z=${trainer.x}",
        "~trainer.val_before_train", "+trainer.e=''"], env=ENV)
    get = run.get
    assert get("data.max_prompt_length") == 256  # the smoke recipe's own value
    assert get("actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype") == "fp32"
    assert get("actor_rollout_ref.actor.fsdp_config.mixed_precision.reduce_dtype") == "bf16"
    assert get("actor_rollout_ref.actor.fsdp_config.mixed_precision.buffer_dtype", "D") == "D"
    assert get("actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype.deeper", "D") == "D"
    assert get("trainer.x") == 256 and get("trainer.z") == 256  # followed, also through two hops
    assert get("trainer.y") == "${trainer.y}"
    assert get("trainer.val_before_train", "D") == "D"  # removed with ~
    assert get("trainer.e", "D") == "" and get("trainer.e", "D", kind=str) == "D"
    assert get("data.max_prompt_length", kind=str) == "256"
    assert get("no_such.key", "D") == "D" and get("no_such.key") is None


# What each algorithm canary changes from canary-grpo-lora, on a profile both list: everything else is the same run.
ALGORITHM_CANARIES = {
    "canary-rloo": {"algorithm.adv_estimator": "rloo"},
    "canary-reinforce-pp": {"algorithm.adv_estimator": "reinforce_plus_plus_baseline"},
    "canary-dr-grpo": {"algorithm.norm_adv_by_std_in_grpo": False,
                       "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum-norm"},
    "canary-gspo": {"actor_rollout_ref.actor.policy_loss.loss_mode": "gspo",
                    "actor_rollout_ref.actor.clip_ratio_low": 3.0e-4, "actor_rollout_ref.actor.clip_ratio_high": 4.0e-4,
                    "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-mean",
                    "actor_rollout_ref.actor.ppo_mini_batch_size": 16},
    "canary-dapo": {"actor_rollout_ref.actor.clip_ratio_low": 0.2, "actor_rollout_ref.actor.clip_ratio_high": 0.28,
                    "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
                    "actor_rollout_ref.actor.ppo_mini_batch_size": 16,
                    "actor_rollout_ref.actor.use_kl_loss": False, "actor_rollout_ref.actor.kl_loss_coef": None,
                    "actor_rollout_ref.actor.kl_loss_type": None,
                    "reward.reward_manager.name": "dapo", "data.max_response_length": 80,
                    "reward.reward_kwargs": {"max_resp_len": 80, "overlong_buffer_cfg": {
                        "enable": True, "len": 16, "penalty_factor": 1.0, "log": False}}},
}


@pytest.mark.parametrize("name", sorted(ALGORITHM_CANARIES))
def test_algorithm_canaries_change_only_their_algorithm_keys(name):
    base = resolve("canary-grpo-lora", profile="any-1gpu-hopper", env=ENV)
    run = resolve(name, profile="any-1gpu-hopper", env=ENV)

    def flat(r):
        return {ov.bare_key(k): v for k, v in r.overrides.items()
                if k not in ("trainer.experiment_name", "trainer.default_local_dir")}

    mine, grpo = flat(run), flat(base)
    changed = {k: mine.get(k) for k in sorted(set(mine) | set(grpo)) if mine.get(k) != grpo.get(k)}
    assert changed == ALGORITHM_CANARIES[name]
    assert run.get("trainer.experiment_name") == name and run.get("trainer.default_local_dir").endswith(name)
    # the same model, data and assets, and contracts that ask for learning without a measured figure
    recipe, grpo_recipe = load_recipe(name), load_recipe("canary-grpo-lora")
    assert (recipe.model, recipe.dataset, recipe.assets) == (grpo_recipe.model, grpo_recipe.dataset, grpo_recipe.assets)
    assert set(recipe.profiles) <= set(grpo_recipe.profiles)
    assert all(type(entry).__name__ == "NotMeasured" for entry in recipe.expect.profiles.values())
    assert recipe.expect.accuracy.gain_min > 0 and recipe.expect.reward.rise_min > 0


def test_algorithms_missing_from_a_verl_are_not_listed_on_its_profiles():
    """verl 0.5.0 (the P40 image, profile any-1gpu) has no gspo loss and no reward loop (the dapo manager's
    reward.* keys): those canaries leave its profile out; the estimator-only ones run everywhere GRPO does."""
    for name in ("canary-gspo", "canary-dapo"):
        assert "any-1gpu" not in load_recipe(name).profiles
    for name in ("canary-rloo", "canary-reinforce-pp", "canary-dr-grpo"):
        assert load_recipe(name).profiles == load_recipe("canary-grpo-lora").profiles
