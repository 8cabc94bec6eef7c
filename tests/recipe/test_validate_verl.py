"""Validation against the real verl each image pins (0.5.0 for P40 profiles, 0.8.0 for A100/H100 profiles,
0.9.1 for the Hopper image's profiles), in the
CPU environments `make envs` builds. These are the acceptance cases of the recipe engine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from rlrecipes.errors import RecipeError
from rlrecipes.cli import main
from rlrecipes.recipe.load import list_recipes, load_recipe, resolve
from rlrecipes.recipe.validate import validate_runs

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = [pytest.mark.verl, pytest.mark.xdist_group("recipe/test_validate_verl")]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def envs(verl_python):
    verl_python("0.5.0")
    verl_python("0.8.0")
    verl_python("0.9.1")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory, envs):
    """verl 0.8 reads the critic's model config while validating: give it a real (tiny) model dir under
    every directory name the shipped recipes use."""
    from rlrecipes.smoke.assets import build_assets

    out = tmp_path_factory.mktemp("assets")
    assets = build_assets(out, log=lambda *_: None)
    models = Path(assets["models_dir"])
    for name in list_recipes():
        target = models / load_recipe(name).model.dir_name
        if not target.exists():
            target.symlink_to(Path(assets["model_dir"]), target_is_directory=True)
    return models


CASES = {
    "misspelled": ("qwen2.5-0.5b-gsm8k-ppo", ["actor_rollout_ref.actor.ppo_micro_batchsize_per_gpu=4"]),
    "micro3": ("qwen2.5-0.5b-gsm8k-ppo", ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"]),
    "lora1024": ("qwen2.5-3b-gsm8k-grpo-lora", ["actor_rollout_ref.model.lora_rank=1024"]),
    "batch15_a100": ("qwen2.5-3b-gsm8k-grpo-lora", ["data.train_batch_size=15"]),
    "batch15_p40": ("qwen2.5-0.5b-gsm8k-ppo", ["data.train_batch_size=15"]),
    "hf_p40": ("qwen2.5-0.5b-gsm8k-ppo", ["actor_rollout_ref.rollout.name=hf"]),
    "type_int": ("smoke-grpo-lora", ["trainer.log_val_generations=abc"]),  # a key rlrecipes.recipe.values leaves to verl
    "type_bool": ("smoke-grpo-lora", ["trainer.val_before_train=1"]),
    "add_existing": ("smoke-grpo-lora", ["+trainer.total_epochs=3"]),
    "delete_missing": ("smoke-grpo-lora", ["~trainer.no_such_key"]),
    # the Hopper image (verl 0.9.1)
    "batch15_h200x2": ("qwen2.5-3b-gsm8k-grpo-lora", ["data.train_batch_size=15"], "h200-141gb-2gpu"),
    "lora1024_h200": ("qwen2.5-3b-gsm8k-grpo-lora", ["actor_rollout_ref.model.lora_rank=1024"], "h200-141gb"),
    "hf_hopper": ("smoke-grpo-lora", ["actor_rollout_ref.rollout.name=hf"], "any-1gpu-hopper"),
    "misspelled_hopper": ("smoke-ppo", ["critic.ppo_micro_batchsize_per_gpu=2"], "any-1gpu-hopper"),
    # the algorithm canaries' keys, misspelled: unknown keys (Hydra) ...
    "adv_key_p40": ("canary-rloo", ["algorithm.adv_estimater=rloo"]),
    "norm_key_hopper": ("canary-dr-grpo", ["algorithm.norm_adv_by_std_in_grp=false"], "any-1gpu-hopper"),
    "loss_mode_key_hopper": ("canary-gspo", ["actor_rollout_ref.actor.policy_loss.loss_mod=gspo"], "any-1gpu-hopper"),
    "clip_key_vllm": ("canary-dapo", ["actor_rollout_ref.actor.clip_ratio_hihg=0.28"], "any-1gpu-vllm"),
    # ... and their values: verl's registries (rlrecipes.verl.check._check_algorithm_names) and verl's ActorConfig
    "adv_value_hopper": ("canary-rloo", ["algorithm.adv_estimator=rlooo"], "any-1gpu-hopper"),
    "adv_value_vllm": ("canary-reinforce-pp", ["algorithm.adv_estimator=reinforce_plus_plus_baselin"], "any-1gpu-vllm"),
    "loss_mode_value_hopper": ("canary-gspo", ["actor_rollout_ref.actor.policy_loss.loss_mode=gspoo"],
                               "any-1gpu-hopper"),
    "loss_mode_value_p40": ("canary-grpo-lora", ["actor_rollout_ref.actor.policy_loss.loss_mode=gspo"], "any-1gpu"),
    "agg_value_hopper": ("canary-dr-grpo", ["actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-sum-nrom"],
                         "any-1gpu-hopper"),
    # the flagship family: one key turns the 3B GRPO recipe into another algorithm (README, "Other algorithms")
    "flagship_rloo": ("qwen2.5-3b-gsm8k-grpo-lora", ["algorithm.adv_estimator=rloo"]),
    "flagship_rloo_h200": ("qwen2.5-3b-gsm8k-grpo-lora", ["algorithm.adv_estimator=rloo"], "h200-141gb"),
    "flagship_gspo_h200": ("qwen2.5-3b-gsm8k-grpo-lora", ["actor_rollout_ref.actor.policy_loss.loss_mode=gspo"],
                           "h200-141gb"),
    "flagship_typo": ("qwen2.5-3b-gsm8k-grpo-lora", ["algorithm.adv_estimator=rlooo"]),
    "flagship_loss_typo_h200": ("qwen2.5-3b-gsm8k-grpo-lora", ["actor_rollout_ref.actor.policy_loss.loss_mode=gpso"],
                                "h200-141gb"),
}


@pytest.fixture(scope="module")
def case(envs):
    """All single-run cases validated in one verl process per version (verl's import is the cost)."""
    names = list(CASES)
    results = validate_runs([resolve(CASES[n][0], overrides=CASES[n][1], profile=(CASES[n][2:] or [None])[0])
                             for n in names])
    return dict(zip(names, results))


def test_every_shipped_recipe_on_every_profile_passes_real_verl(models_dir):
    env = {"MODELS_DIR": str(models_dir), "WANDB_API_KEY": ""}
    runs = [resolve(n, profile=p, env=env) for n in list_recipes() for p in load_recipe(n).profiles]
    assert len(runs) >= 12
    results = validate_runs(runs)
    failures = [r.describe() for r in results if not r.ok]
    assert failures == []
    versions = {(r.run.name, r.run.profile.name): r.verl for r in results}
    assert versions[("qwen2.5-0.5b-gsm8k-ppo", "p40-24gb")] == "0.5.0"
    assert versions[("qwen2.5-3b-gsm8k-grpo-lora", "a100-80gb")] == "0.8.0"
    for name, profile in (("qwen2.5-3b-gsm8k-grpo-lora", "h200-141gb"), ("qwen2.5-3b-gsm8k-grpo-lora", "h200-141gb-2gpu"),
                          ("smoke-grpo-lora", "any-1gpu-hopper"), ("smoke-ppo", "any-1gpu-hopper")):
        assert versions[(name, profile)] == "0.9.1"
    by_key = {(r.run.name, r.run.profile.name): r for r in results}
    composed = by_key[("qwen2.5-3b-gsm8k-grpo-lora", "a100-80gb")].config
    assert composed["trainer"]["max_actor_ckpt_to_keep"] == 3
    assert composed["actor_rollout_ref"]["model"]["lora_rank"] == 64
    assert by_key[("qwen2.5-0.5b-gsm8k-ppo", "p40-24gb")].config["critic"]["model"]["fsdp_config"][
        "model_dtype"] == "fp32"


def test_recipes_with_a_critic_validate_on_a_fresh_clone_without_their_assets(envs, tmp_path):
    """A fresh clone has no model directories: canary-ppo and smoke-ppo (whose models only their offline
    `assets:` builder makes) failed on verl 0.8/0.9, whose critic config reads its model directory. Validation
    checks the config, not the assets; a bad critic setting is still verl's error."""
    env = {"MODELS_DIR": str(tmp_path / "models"), "WANDB_API_KEY": ""}  # nothing built there
    runs = [resolve(n, profile=p, env=env) for n in list_recipes() for p in load_recipe(n).profiles]
    runs = [r for r in runs if r.use_critic and r.image.verl != "0.5.0"]
    assert {(r.name, r.image.verl) for r in runs} >= {("canary-ppo", "0.8.0"), ("canary-ppo", "0.9.1"),
                                                      ("smoke-ppo", "0.8.0"), ("smoke-ppo", "0.9.1")}
    bad = resolve("smoke-ppo", profile="any-1gpu-hopper", env=env, overrides=["critic.ppo_micro_batch_size=8"])
    *results, refused = validate_runs([*runs, bad])
    assert [r.describe() for r in results if not r.ok] == []
    for result in results:
        assert any("the critic's settings were checked without reading its model directory" in n
                   for n in result.notices), result.notices
    assert not refused.ok
    assert "You have set both 'critic.micro_batch_size' AND 'critic.micro_batch_size_per_gpu'" in refused.message


def test_save_total_limit_is_rejected_naming_the_real_key(envs, capsys):
    code = main(["validate", "qwen2.5-3b-gsm8k-grpo-lora", "trainer.save_total_limit=3"])
    out = capsys.readouterr().out
    assert code == 2
    assert "'trainer.save_total_limit' is not a key of verl's config" in out
    assert "did you mean: trainer.max_actor_ckpt_to_keep" in out


def test_misspelled_key_gets_nearest_names(case):
    result = case["misspelled"]
    assert not result.ok and result.kind == "unknown_key"
    assert result.key == "actor_rollout_ref.actor.ppo_micro_batchsize_per_gpu"
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" in result.suggestions


def test_indivisible_batch_fails_with_verls_own_message(case):
    a100 = case["batch15_a100"]
    assert not a100.ok
    assert a100.message == ("AssertionError: real_train_batch_size (75) must be divisible by minimal possible "
                            "batch size (4)")
    # one GPU divides everything; 0.5.0's bare assert on the mini batch fires, shown with its line
    p40 = case["batch15_p40"]
    assert not p40.ok
    assert "AssertionError at verl/trainer/ppo/ray_trainer.py" in p40.message
    assert "train_batch_size >= config.actor_rollout_ref.actor.ppo_mini_batch_size" in p40.message


def test_p40_worker_side_micro_batch_check(case):
    result = case["micro3"]
    assert not result.ok
    assert "normalized ppo_mini_batch_size 64 should be divisible by ppo_micro_batch_size_per_gpu 3" in result.message


def test_hf_rollout_accepted_on_p40_rejected_on_a100(case, capsys):
    assert case["hf_p40"].ok and case["hf_p40"].verl == "0.5.0"
    assert main(["validate", "qwen2.5-3b-gsm8k-grpo-lora", "--profile", "a100-80gb",
                 "actor_rollout_ref.rollout.name=hf"]) == 2
    out = capsys.readouterr().out
    assert "Rollout hf with mode async not found" in out and "vllm (async)" in out


def test_lora_rank_above_vllm_limit_is_rejected(case):
    result = case["lora1024"]
    assert not result.ok and "lora_rank must be less than or equal to 512" in result.message


def test_render_writes_a_reproducible_run_dir(envs, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["render", "qwen2.5-0.5b-gsm8k-ppo", "--out", str(out), "trainer.total_epochs=3"]) == 0
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["trainer"]["total_epochs"] == 3 and config["actor_rollout_ref"]["rollout"]["name"] == "hf"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["cli_overrides"] == ["trainer.total_epochs=3"]
    assert manifest["image"]["verl"] == "0.5.0"
    assert len(manifest["recipe_sha256"]) == 64
    assert "trainer.total_epochs=3" in (out / "train.sh").read_text()
    assert (out / "train.sh").stat().st_mode & 0o111


def test_render_refuses_an_invalid_run_and_writes_nothing(envs, tmp_path):
    out = tmp_path / "run"
    assert main(["render", "qwen2.5-0.5b-gsm8k-ppo", "--out", str(out), "trainer.save_total_limit=3"]) == 2
    assert not out.exists()


def test_python_dash_m_works(envs):
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "rlrecipes", "validate", "smoke-grpo-lora"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "OK    smoke-grpo-lora on any-1gpu (verl 0.5.0)" in proc.stdout


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("type_int", "'trainer.log_val_generations' must be an integer (verl's default is 0), got 'abc'"),
        ("type_bool", "'trainer.val_before_train' must be a boolean"),
        ("add_existing", "Could not append to config. An item is already at 'trainer.total_epochs'"),
        ("delete_missing", "Could not delete from config. 'trainer.no_such_key' does not exist"),
    ],
)
def test_wrong_types_and_bad_prefixes_are_named(case, name, message):
    assert not case[name].ok
    assert message in case[name].message


def test_hopper_image_runs_verl_091_checks(case):
    """verl 0.9.1's own checks fire on the Hopper profiles: batch divisibility over 2 GPUs, vLLM's LoRA rank
    list, the rollout registry (no HF rollout after 0.5), unknown keys with the nearest names."""
    assert {case[n].verl for n in ("batch15_h200x2", "lora1024_h200", "hf_hopper", "misspelled_hopper")} == {"0.9.1"}
    assert case["batch15_h200x2"].message == ("AssertionError: real_train_batch_size (75) must be divisible by "
                                              "minimal possible batch size (2)")
    assert "lora_rank must be less than or equal to 512" in case["lora1024_h200"].message
    assert "Rollout hf with mode async not found" in case["hf_hopper"].message
    misspelled = case["misspelled_hopper"]
    assert misspelled.kind == "unknown_key" and "critic.ppo_micro_batch_size_per_gpu" in misspelled.suggestions


def test_hopper_profile_composes_the_091_config(models_dir):
    env = {"MODELS_DIR": str(models_dir), "WANDB_API_KEY": ""}
    (result,) = validate_runs([resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="h200-141gb", env=env)])
    assert result.ok and result.verl == "0.9.1"
    model = result.config["actor_rollout_ref"]["model"]
    # 0.9.1 reads the key without the underscore (0.5.0's `_attn_implementation` is ignored there)
    assert model["override_config"] == {"attn_implementation": "sdpa"}
    # padded, not verl's packed default: rlrecipes refuses packing without FlashAttention (tests/recipe/test_packing.py)
    assert model["lora_rank"] == 64 and model["use_remove_padding"] is False
    rollout = result.config["actor_rollout_ref"]["rollout"]
    assert (rollout["name"], rollout["mode"], rollout["gpu_memory_utilization"]) == ("vllm", "async", 0.6)
    assert result.config["trainer"]["logger"] == ["console", "file"]
    assert result.config["trainer"]["n_gpus_per_node"] == 1


@pytest.mark.parametrize(
    ("name", "key", "suggestion"),
    [
        ("adv_key_p40", "algorithm.adv_estimater", "algorithm.adv_estimator"),
        ("norm_key_hopper", "algorithm.norm_adv_by_std_in_grp", "algorithm.norm_adv_by_std_in_grpo"),
        ("loss_mode_key_hopper", "actor_rollout_ref.actor.policy_loss.loss_mod",
         "actor_rollout_ref.actor.policy_loss.loss_mode"),
        ("clip_key_vllm", "actor_rollout_ref.actor.clip_ratio_hihg", "actor_rollout_ref.actor.clip_ratio_high"),
    ],
)
def test_misspelled_algorithm_keys_are_refused_with_the_real_name(case, name, key, suggestion):
    result = case[name]
    assert not result.ok and result.kind == "unknown_key" and result.key == key
    assert suggestion in result.suggestions


@pytest.mark.parametrize(
    ("name", "verl", "message"),
    [
        ("adv_value_hopper", "0.9.1", "ValueError: Unknown advantage estimator simply: rlooo"),
        ("adv_value_vllm", "0.8.0", "ValueError: Unknown advantage estimator simply: reinforce_plus_plus_baselin"),
        ("loss_mode_value_hopper", "0.9.1", "ValueError: Unsupported loss mode: gspoo."),
        # verl 0.5.0 has no gspo loss: why canary-gspo leaves the P40 profile out
        ("loss_mode_value_p40", "0.5.0", "ValueError: Unsupported loss mode: gspo."),
        ("agg_value_hopper", "0.9.1", "Invalid loss_agg_mode: seq-mean-token-sum-nrom"),
        ("flagship_typo", "0.8.0", "ValueError: Unknown advantage estimator simply: rlooo"),
        ("flagship_loss_typo_h200", "0.9.1", "ValueError: Unsupported loss mode: gpso."),
    ],
)
def test_misspelled_algorithm_values_are_refused_before_a_launch(case, name, verl, message):
    """verl's config takes any string for the estimator and the loss; verl itself would fail only at the first
    training step. validate looks them up in verl's own registries (and verl's ActorConfig checks the loss
    aggregation)."""
    result = case[name]
    assert result.verl == verl and not result.ok and result.kind == "validation"
    assert message in result.message


def test_flagship_recipe_takes_another_algorithm_by_one_key(case):
    for name, verl in (("flagship_rloo", "0.8.0"), ("flagship_rloo_h200", "0.9.1"), ("flagship_gspo_h200", "0.9.1")):
        result = case[name]
        assert result.ok and result.verl == verl, result.describe()
    assert case["flagship_rloo"].config["algorithm"]["adv_estimator"] == "rloo"
    assert case["flagship_gspo_h200"].config["actor_rollout_ref"]["actor"]["policy_loss"]["loss_mode"] == "gspo"


def test_algorithm_canaries_compose_their_keys_in_verl(models_dir):
    env = {"MODELS_DIR": str(models_dir), "WANDB_API_KEY": ""}
    runs = [resolve(n, profile="any-1gpu-hopper", env=env) for n in ("canary-gspo", "canary-dapo", "canary-dr-grpo")]
    gspo, dapo, dr = validate_runs(runs)
    assert [r.verl for r in (gspo, dapo, dr)] == ["0.9.1"] * 3 and gspo.ok and dapo.ok and dr.ok
    actor = gspo.config["actor_rollout_ref"]["actor"]
    assert (actor["policy_loss"]["loss_mode"], actor["clip_ratio_low"], actor["clip_ratio_high"]) == (
        "gspo", 3e-4, 4e-4)
    # where verl 0.9.1's DAPORewardManager reads its settings (experimental/reward_loop/reward_manager/dapo.py:33-35)
    assert dapo.config["reward"]["reward_manager"]["name"] == "dapo"
    assert dapo.config["reward"]["reward_kwargs"] == {
        "max_resp_len": 80, "overlong_buffer_cfg": {"enable": True, "len": 16, "penalty_factor": 1.0, "log": False}}
    assert dapo.config["reward"]["reward_kwargs"]["max_resp_len"] == dapo.config["data"]["max_response_length"]
    assert dr.config["algorithm"]["norm_adv_by_std_in_grpo"] is False
    assert dr.config["actor_rollout_ref"]["actor"]["loss_agg_mode"] == "seq-mean-token-sum-norm"


def test_every_startup_lever_of_the_gpu_script_validates_on_verl_091(models_dir):
    """benchmarks/gpu/startup_levers.sh's levers are `make train` ARGS on the canary's Hopper profile: each, as the
    script prints it, composes and passes verl 0.9.1's own checks here, so a misspelled key costs no GPU time."""
    import subprocess

    script = REPO / "benchmarks" / "gpu" / "startup_levers.sh"
    printed = subprocess.run(["bash", str(script), "--print"], capture_output=True, text=True, check=True)
    levers = dict(line.split(" ", 1) for line in printed.stdout.splitlines())  # every lever, in the default order
    default = list(levers)
    assert {"shipped-warm", "poll", "lean", "eager", "awake", "agents2", "workers0", "uni", "timeline",
            "profile", "nocompile", "graphs", "reward2", "micro512", "profile-stack", "rows-on-device"} <= set(default)
    named = subprocess.run(["bash", str(script), "--print", "uni", "eager"], capture_output=True, text=True, check=True)
    assert named.stdout.splitlines() == [f"uni {levers['uni']}", f"eager {levers['eager']}"]
    env = {"MODELS_DIR": str(models_dir), "WANDB_API_KEY": ""}
    runs = [resolve("canary-grpo-lora", overrides=levers[name].split(), profile="any-1gpu-hopper", env=env)
            for name in default]
    results = dict(zip(default, validate_runs(runs)))
    for name, result in results.items():
        assert result.ok and result.verl == "0.9.1", f"{name}: {result.describe()}"
        assert result.config["trainer"]["total_training_steps"] == 5, name
    rollout = {name: results[name].config["actor_rollout_ref"]["rollout"] for name in default}
    assert rollout["awake"]["free_cache_engine"] is False and rollout["shipped-warm"]["free_cache_engine"] is True
    assert rollout["agents2"]["agent"]["num_workers"] == 2 and rollout["shipped-warm"]["agent"]["num_workers"] == 8
    assert rollout["eager"]["enforce_eager"] is True
    assert results["timeline"].config["ray_kwargs"]["timeline_json_file"].endswith("/timeline/ray-timeline.json")
    assert results["shipped-warm"].config["ray_kwargs"]["timeline_json_file"] is None
    profiled = results["profile"].config
    assert profiled["global_profiler"]["tool"] == "torch" and profiled["global_profiler"]["steps"] == [4]
    actor_profiler = profiled["actor_rollout_ref"]["actor"]["profiler"]
    assert actor_profiler["enable"] is True and actor_profiler["tool_config"]["torch"]["contents"] == ["cpu", "cuda"]
    # the actor's tool and folder follow the global ones, as verl's actor.yaml interpolates them
    assert actor_profiler["tool"] == "${oc.select:global_profiler.tool,null}"
    assert profiled["global_profiler"]["save_path"] == "/root/w/out/levers/profile/trace"
    # poll, uni and workers0 are shipped on the Hopper profile since the third lever sitting: the lever and the
    # profile as shipped compose to the same setting, the one measured
    for name in ("workers0", "uni", "poll", "shipped-warm"):
        config = results[name].config
        assert config["data"]["dataloader_num_workers"] == 0, name
        assert config["actor_rollout_ref"]["rollout"]["engine_kwargs"]["vllm"] == {
            "distributed_executor_backend": "uni"}, name
        sampler = config["trainer"]["v1"]["sampler"]
        assert sampler["custom_sampler"] == {"path": "pkg://rlrecipes.verl.replay_poll", "name": "PollReplayBuffer"}
        assert sampler["sampler_kwargs"] == {"poll_interval": 0.1}, name
    # the vLLM engine levers of the fifth sitting's plan: verl passes engine_kwargs.vllm.compilation_config to vLLM
    # as given, with its own cudagraph_mode default where none is named, and the capture sizes from the rollout key
    vllm = {name: results[name].config["actor_rollout_ref"]["rollout"]["engine_kwargs"]["vllm"]
            for name in ("nocompile", "graphs")}
    assert vllm["nocompile"]["compilation_config"] == {"mode": 0, "cudagraph_mode": "FULL_DECODE_ONLY"}
    assert vllm["graphs"]["compilation_config"] == {"cudagraph_specialize_lora": False}
    assert rollout["graphs"]["cudagraph_capture_sizes"] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    assert rollout["shipped-warm"]["cudagraph_capture_sizes"] is None
    assert results["reward2"].config["reward"]["num_workers"] == 2
    assert results["shipped-warm"].config["reward"]["num_workers"] == 8
    # micro512: each of the three passes takes the step's 512 responses at once; the recipe takes 128 / 256 / 256
    for name, expected in (("micro512", (512, 512, 512)), ("shipped-warm", (128, 256, 256))):
        ref = results[name].config["actor_rollout_ref"]
        assert (ref["actor"]["ppo_micro_batch_size_per_gpu"], ref["rollout"]["log_prob_micro_batch_size_per_gpu"],
                ref["ref"]["log_prob_micro_batch_size_per_gpu"]) == expected, name
    stacked = results["profile-stack"].config["actor_rollout_ref"]["actor"]["profiler"]["tool_config"]["torch"]
    assert stacked["contents"] == ["cpu", "cuda", "stack"]
    assert results["profile-stack"].config["global_profiler"]["save_path"].endswith("/profile-stack/trace")
    # rows-on-device takes a verl edit out for its launch (benchmarks/gpu/verl_trial.py), not the run's configuration
    assert results["rows-on-device"].config == results["shipped-warm"].config
    lean = results["lean"].config
    assert lean["transfer_queue"]["backend"]["SimpleStorage"]["num_data_storage_units"] == 1
    assert lean["ray_kwargs"]["ray_init"]["include_dashboard"] is False
    unknown = subprocess.run(["bash", str(script), "--print", "lean", "tq-one"], capture_output=True, text=True)
    assert unknown.returncode == 2 and "tq-one: unknown lever" in unknown.stderr


POLL = ["trainer.v1.sampler.custom_sampler.path=pkg://rlrecipes.verl.replay_poll",
        "trainer.v1.sampler.custom_sampler.name=PollReplayBuffer"]
# the Hopper profiles' sampler dropped, as the DAPO refusal's hint says: verl's own ReplayBuffer
VERLS_OWN_SAMPLER = ["trainer.v1.sampler.custom_sampler.path=null", "trainer.v1.sampler.custom_sampler.name=null"]


@pytest.mark.parametrize("extra, expected", [
    (["+trainer.v1.sampler.sampler_kwargs.poll_interval=0"], "sampler_kwargs.poll_interval=0: PollReplayBuffer needs"),
    (["+trainer.v1.sampler.sampler_kwargs.poll_interval=null"], "sampler_kwargs.poll_interval=None"),
    (["+trainer.v1.sampler.sampler_kwargs.poll_interval=0.1", "trainer.v1.trainer_mode=colocate_async"],
     "trainer.v1.trainer_mode=colocate_async: PollReplayBuffer serves the sync trainer only"),
    (["+trainer.v1.sampler.sampler_kwargs.poll_interval=0.1", "algorithm.filter_groups.enable=true"],
     "algorithm.filter_groups.enable=true beside trainer.v1.sampler.custom_sampler (PollReplayBuffer)"),
    (["+trainer.v1.sampler.sampler_kwargs.poll_interval=0.1", "trainer.v1.sampler.sync_refill_failed_groups=true"],
     "trainer.v1.sampler.sync_refill_failed_groups=true beside trainer.v1.sampler.custom_sampler"),
    (["+trainer.v1.sampler.sampler_kwargs.poll_interval=0.1", "trainer.v1.sampler.custom_sampler.name=PollBuffer"],
     "Object not found in module: object_name='PollBuffer'"),
])
def test_a_custom_sampler_is_built_as_verl_091_builds_it_and_a_wrong_one_is_refused(models_dir, extra, expected):
    """rlrecipes/verl/check.py builds a custom replay-buffer sampler with verl's own PPOTrainer._build_replay_buffer:
    the poll lever's class refuses a missing or zero interval and an async trainer; DAPO's group filtering and
    failed-group refill, which verl never hands a custom sampler, are refused beside one; a wrong class name is
    verl's own error."""
    env = {"MODELS_DIR": str(models_dir), "WANDB_API_KEY": ""}
    run = resolve("canary-grpo-lora", overrides=[*POLL, *extra], profile="any-1gpu-hopper", env=env)
    [result] = validate_runs([run])
    assert not result.ok and expected in result.describe(), result.describe()


def test_the_poll_sampler_is_verls_replay_buffer_polling_at_its_interval(run_in_verl, models_dir):
    """Built from the Hopper profile's composed config (the poll lever, shipped there) by verl 0.9.1's own
    PPOTrainer._build_replay_buffer, the sampler is a subclass of verl's sync ReplayBuffer, and between two
    TransferQueue polls it sleeps the configured 0.1 s, where verl's own sampler (the profile's dropped) sleeps
    2.0 s -- the wait every generation on verl's own sampler is rounded up to."""
    env = {"MODELS_DIR": str(models_dir), "WANDB_API_KEY": ""}
    configs = {}
    # the Hopper profile as shipped polls every 0.1 s
    for name, extra in (("shipped", []), ("verl's-own", VERLS_OWN_SAMPLER)):
        [result] = validate_runs([resolve("canary-grpo-lora", overrides=extra, profile="any-1gpu-hopper", env=env)])
        assert result.ok, result.describe()
        configs[name] = result.config
    code = f"""
import json, time, types
from omegaconf import OmegaConf
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
slept = []
time.sleep = slept.append
for name, config in json.loads({json.dumps(json.dumps(configs))}).items():
    cfg = OmegaConf.create(config)
    trainer = types.SimpleNamespace(config=cfg, trainer_mode=cfg.trainer.v1.trainer_mode,
                                    _add_prompts_to_generate=lambda n: None)
    trainer._resolve_filter_groups_metric = lambda: PPOTrainer._resolve_filter_groups_metric(trainer)
    buffer = PPOTrainer._build_replay_buffer(trainer)
    assert isinstance(buffer, ReplayBuffer)
    buffer._wait_for_next_poll("train", time.time())
    print(name, type(buffer).__name__, type(buffer).__mro__[1].__name__, slept.pop())
"""
    done = run_in_verl("0.9.1", code)
    assert done.returncode == 0, done.stderr[-3000:]
    # the shipped config's sampler is the poll lever's, a subclass of verl's ReplayBuffer; verl's own is ReplayBuffer
    assert done.stdout.splitlines() == ["shipped PollReplayBuffer ReplayBuffer 0.1",
                                        "verl's-own ReplayBuffer object 2.0"]


def test_dapo_filtering_runs_on_verls_own_sampler_once_the_profiles_is_dropped(models_dir):
    """DAPO's group filtering is refused beside the Hopper profiles' poll sampler (verl hands a custom sampler none);
    with the sampler dropped as the refusal's hint says, the same run validates on verl 0.9.1."""
    env = {"MODELS_DIR": str(models_dir), "WANDB_API_KEY": ""}
    dapo = ["algorithm.filter_groups.enable=true"]
    refused, accepted = validate_runs([resolve("canary-dapo", overrides=over, profile="any-1gpu-hopper", env=env)
                                       for over in (dapo, dapo + VERLS_OWN_SAMPLER)])
    assert not refused.ok and "custom_sampler.path=null trainer.v1.sampler.custom_sampler.name=null drops" in \
        refused.describe()
    assert accepted.ok, accepted.describe()


def test_vllms_uni_executor_is_refused_beside_a_rollout_over_several_gpus():
    """The Hopper profiles run vLLM's `uni` executor (one model worker in the engine process); a rollout tensor
    parallel size above 1 beside it is refused naming the key and where it was set, before any GPU is touched;
    `mp`, verl's own choice, lifts it."""
    tp2 = ["actor_rollout_ref.rollout.tensor_model_parallel_size=2"]
    with pytest.raises(RecipeError) as refused:
        resolve("qwen2.5-3b-gsm8k-grpo-lora", overrides=tp2, profile="h200-141gb", env={"WANDB_API_KEY": ""})
    text = str(refused.value)
    assert "h200-141gb.yaml: actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend" in text
    assert "vLLM's 'uni' executor runs one model worker, and actor_rollout_ref.rollout.tensor_model_parallel_size " \
           "is 2" in text
    run = resolve("qwen2.5-3b-gsm8k-grpo-lora", profile="h200-141gb", env={"WANDB_API_KEY": ""},
                  overrides=[*tp2, "+actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=mp"])
    assert run.get("actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend") == "mp"
