"""rlrecipes.recipe.load, rule by rule, on small literal recipes and profiles written into a scratch
RLRECIPES_HOME: each field's default and type check, each error's exact message and `where`, the name
rules, the verl keys a profile derives, precedence, sources and what `ResolvedRun.get` reads.

Fast and self-contained (no shipped recipe is read), so that `make mutation`'s recipe-schema target can
run it against every mutant of load.py.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from rlrecipes.errors import RecipeError
from rlrecipes.paths import PACKAGE_DIR
from rlrecipes.recipe import load
from rlrecipes.recipe.images import IMAGES
from rlrecipes.recipe.load import (
    DatasetSpec,
    GpuSpec,
    ModelSpec,
    Profile,
    ResolvedRun,
    base_loggers,
    list_profiles,
    list_recipes,
    load_profile,
    load_recipe,
    logger_value,
    needs_critic,
    recipe_name,
    resolve,
)
from rlrecipes.verl.specs import spec_for

ENV = {"WANDB_API_KEY": ""}

# A profile on the P40 image (verl 0.5.0: fp32 by config, no file logger, hf rollout) with only its required keys.
P40 = {
    "description": "  small P40 profile  ",
    "image": "p40",
    "gpus_per_node": 2,
    "gpu": {"name": "Tesla P40", "memory_gib": 24, "compute_capability": "6.1"},
    "dtype": "fp32",
    "attention": "eager",
    "rollout": {"engine": "hf"},
}
# A profile on the A100 image (verl 0.8.0: file logger, vLLM rollout) with FlashAttention.
A100 = {
    "description": "A100 profile",
    "image": "a100",
    "gpus_per_node": 4,
    "gpu": {"name": "A100", "memory_gib": 80.0, "compute_capability": "8.0"},
    "dtype": "bf16",
    "attention": "flash_attention_2",
    "rollout": {"engine": "vllm", "gpu_memory_utilization": 0.7},
}
EXPECT = {"accuracy": {"not_measured": "a"}, "reward": {"not_measured": "b"}, "profiles": {"p": {"not_measured": "c"}}}
# A recipe with only its required keys.
RECIPE = {
    "description": "  tiny recipe \n",
    "profile": "p",
    "model": {"hub_id": "org/team/Model-1B/"},
    "dataset": {"name": "toy"},
    "verl": {"algorithm.adv_estimator": "grpo"},
    "expect": EXPECT,
}


def _write(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A scratch RLRECIPES_HOME with profile `p` (P40) and `a` (A100) and recipe `r` (minimal, on p)."""
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    for key in ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR", "CACHE_DIR", "REWARD_FN", "WANDB_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    _write(tmp_path / "recipes" / "profiles" / "p.yaml", P40)
    _write(tmp_path / "recipes" / "profiles" / "a.yaml", A100)
    _write(tmp_path / "recipes" / "r.yaml", RECIPE)
    return tmp_path


def profile_file(home: Path, name: str = "p", **changes) -> Path:
    data = {**P40, **changes}
    return _write(home / "recipes" / "profiles" / f"{name}.yaml", {k: v for k, v in data.items() if v is not DROP})


def recipe_file(home: Path, name: str = "r", **changes) -> Path:
    data = {**RECIPE, **changes}
    return _write(home / "recipes" / f"{name}.yaml", {k: v for k, v in data.items() if v is not DROP})


DROP = object()  # a key to leave out


def error(call, *args, **kwargs) -> RecipeError:
    with pytest.raises(RecipeError) as info:
        call(*args, **kwargs)
    return info.value


# ------------------------------------------------------------------------------------------- profiles
def test_minimal_profile_gets_every_default(home):
    prof = load_profile("p")
    path = home / "recipes" / "profiles" / "p.yaml"
    assert prof == Profile(
        name="p", path=path, description="small P40 profile", image_name="p40", nnodes=1, gpus_per_node=2,
        gpu=GpuSpec("Tesla P40", 24.0, "6.1"), dtype="fp32", attention="eager", rollout="hf", tensor_parallel=1,
        gpu_memory_utilization=None, micro_batch_per_gpu={}, offload={}, gradient_checkpointing=True, verl={})
    assert type(prof.gpu.memory_gib) is float
    assert prof.image is IMAGES["p40"]
    assert prof.n_gpus == 2


def test_full_profile_reads_every_field(home):
    profile_file(home, "full", nnodes=3, gpus_per_node=5,
                 gpu={"name": "G", "memory_gib": 16.5, "compute_capability": 7.0},
                 rollout={"engine": "hf", "tensor_parallel": 2, "gpu_memory_utilization": 0.6},
                 micro_batch_per_gpu={"actor": 1, "log_prob": 2, "critic": 3},
                 offload={"param": True, "optimizer": False, "ref_param": True},
                 gradient_checkpointing=False, verl={"trainer": {"x": 1}, "+a.b": {"c": 2}})
    prof = load_profile("full")
    assert (prof.nnodes, prof.gpus_per_node, prof.n_gpus) == (3, 5, 15)
    assert prof.gpu == GpuSpec("G", 16.5, "7.0")
    assert (prof.tensor_parallel, prof.gpu_memory_utilization) == (2, 0.6)
    assert prof.micro_batch_per_gpu == {"actor": 1, "log_prob": 2, "critic": 3}
    assert prof.offload == {"param": True, "optimizer": False, "ref_param": True}
    assert prof.gradient_checkpointing is False
    assert prof.verl == {"trainer.x": 1, "+a.b": {"c": 2}}


def test_profile_counts_take_integral_floats_as_verl_keys_do(home):
    # one rule (values.at_least) for a count in a profile and for the verl key it becomes: 2.0 / 1e0 are 2 / 1
    profile_file(home, "f", nnodes=1e0, gpus_per_node=2.0, rollout={"engine": "hf", "tensor_parallel": 2.0},
                 micro_batch_per_gpu={"actor": 4.0})
    prof = load_profile("f")
    values = (prof.nnodes, prof.gpus_per_node, prof.tensor_parallel, prof.micro_batch_per_gpu["actor"])
    assert values == (1, 2, 2, 4) and all(type(v) is int for v in values)


@pytest.mark.parametrize("key", ["description", "image", "gpus_per_node", "gpu", "dtype", "attention", "rollout"])
def test_profile_required_keys(home, key):
    path = profile_file(home, "bad", **{key: DROP})
    exc = error(load_profile, "bad")
    assert (exc.message, exc.where) == (f"missing required key '{key}'", str(path))


@pytest.mark.parametrize(("block", "key"), [("gpu", "name"), ("gpu", "memory_gib"), ("gpu", "compute_capability"),
                                            ("rollout", "engine")])
def test_profile_required_sub_keys(home, block, key):
    path = profile_file(home, "bad", **{block: {k: v for k, v in P40[block].items() if k != key}})
    exc = error(load_profile, "bad")
    assert (exc.message, exc.where) == (f"missing required key '{key}'", f"{path}: {block}")


@pytest.mark.parametrize(("changes", "where", "message", "hint"), [
    ({"gpus": 1}, ".gpus", "unknown key 'gpus'", "did you mean gpu?"),
    ({"gpu": {**P40["gpu"], "memry_gib": 1}}, ": gpu.memry_gib", "unknown key 'memry_gib'", "did you mean memory_gib?"),
    ({"rollout": {"engine": "hf", "tp": 1}}, ": rollout.tp", "unknown key 'tp'",
     "valid keys: engine, tensor_parallel, gpu_memory_utilization"),
    ({"micro_batch_per_gpu": {"actr": 1}}, ": micro_batch_per_gpu.actr", "unknown key 'actr'", "did you mean actor?"),
    ({"offload": {"params": True}}, ": offload.params", "unknown key 'params'", "did you mean param, ref_param?"),
    ({"image": "h100"}, ": image", "'h100' is not one of a100, hopper, p40", None),
    ({"rollout": {"engine": "trt"}}, ": rollout.engine", "'trt' is not one of vllm, sglang, hf", None),
    ({"rollout": {"engine": "vllm"}}, ": rollout.engine", "rollout engine 'vllm' is not installed in image 'p40' "
                                                          "(it has: hf)", None),
    ({"nnodes": True}, ": nnodes", "must be an integer, got True", None),
    ({"gpus_per_node": "2"}, ": gpus_per_node", "must be an integer, got '2'", None),
    ({"gpu": {**P40["gpu"], "memory_gib": "24G"}}, ": gpu.memory_gib", "expected int or float, got str ('24G')", None),
    ({"dtype": "bf8"}, ": dtype", "'bf8' is not one of bf16, fp16, fp32", None),
    ({"attention": "flash"}, ": attention", "'flash' is not one of flash_attention_2, sdpa, eager", None),
    ({"rollout": {"engine": "hf", "tensor_parallel": 1.5}}, ": rollout.tensor_parallel",
     "must be an integer, got 1.5", None),
    ({"micro_batch_per_gpu": {"log_prob": "4"}}, ": micro_batch_per_gpu.log_prob", "must be an integer, got '4'", None),
    ({"offload": {"optimizer": 1}}, ": offload.optimizer", "expected bool, got int (1)", None),
    ({"gradient_checkpointing": "yes please"}, ": gradient_checkpointing", "expected bool, got str ('yes please')",
     None),
    ({"verl": [1]}, ": verl", "expected dict, got list ([1])", None),
    # hardware counts and shares are checked here, by the rules check_values applies to the verl keys they become
    # (values.at_least, values.fraction): they reach verl as derived keys, not through a verl: block
    ({"gpus_per_node": 0}, ": gpus_per_node", "must be >= 1, got 0", None),
    ({"nnodes": -1}, ": nnodes", "must be >= 1, got -1", None),
    ({"rollout": {"engine": "hf", "tensor_parallel": 0}}, ": rollout.tensor_parallel", "must be >= 1, got 0", None),
    ({"micro_batch_per_gpu": {"actor": 0}}, ": micro_batch_per_gpu.actor", "must be >= 1, got 0", None),
    ({"rollout": {"engine": "hf", "gpu_memory_utilization": "lots"}}, ": rollout.gpu_memory_utilization",
     "must be a fraction in (0, 1], got 'lots'", None),
    ({"rollout": {"engine": "hf", "gpu_memory_utilization": True}}, ": rollout.gpu_memory_utilization",
     "must be a fraction in (0, 1], got True", None),
    ({"rollout": {"engine": "hf", "gpu_memory_utilization": 0}}, ": rollout.gpu_memory_utilization",
     "must be a fraction in (0, 1], got 0", None),
    ({"rollout": {"engine": "hf", "gpu_memory_utilization": 1.2}}, ": rollout.gpu_memory_utilization",
     "must be a fraction in (0, 1], got 1.2", None),
])
def test_profile_errors_name_the_key(home, changes, where, message, hint):
    path = profile_file(home, "bad", **changes)
    exc = error(load_profile, "bad")
    assert (exc.message, exc.where, exc.hint) == (message, f"{path}{where}", hint)


def test_an_engine_missing_from_the_image_lists_the_ones_it_has(home, monkeypatch):
    monkeypatch.setitem(IMAGES, "p40", dataclasses.replace(IMAGES["p40"], rollout_engines=("hf", "sglang")))
    profile_file(home, rollout={"engine": "vllm"})
    assert error(load_profile, "p").message == ("rollout engine 'vllm' is not installed in image 'p40' "
                                                "(it has: hf, sglang)")


# -------------------------------------------------------------------------------------------- recipes
def test_minimal_recipe_gets_every_default(home):
    recipe = load_recipe("r")
    assert recipe.name == "r" and recipe.path == home / "recipes" / "r.yaml"
    assert recipe.description == "tiny recipe"
    assert (recipe.profile, recipe.profiles) == ("p", ("p",))
    assert recipe.model == ModelSpec(hub_id="org/team/Model-1B/", dir_name="Model-1B")
    assert recipe.dataset == DatasetSpec(name="toy", dir_name="toy", template="verl", train_rows=None, test_rows=None)
    assert recipe.reward_mode == "strict"
    assert recipe.loggers == ("console", "file")
    assert (recipe.wandb, recipe.project) == ("auto", "rlrecipes")
    assert recipe.verl == {"algorithm.adv_estimator": "grpo"}
    assert recipe.assets is None
    assert recipe.expect.profiles["p"].reason == "c"


def test_full_recipe_reads_every_field(home):
    recipe_file(home, "sub/full", description=5, profile="p", profiles=["a", "p"],
                model={"hub_id": "org/M", "dir": "mdir"},
                dataset={"name": "gsm8k", "dir": "ddir", "template": "think", "train_rows": 10, "test_rows": 2},
                reward={"mode": "think"}, logging={"project": "proj", "loggers": ["file"], "wandb": "disabled"},
                verl={"data": {"train_batch_size": 4}, "+x.y": 1}, assets="canary-assets",
                expect={**EXPECT, "profiles": {"a": {"not_measured": "x"}, "p": {"not_measured": "y"}}})
    recipe = load_recipe("sub/full")
    assert recipe.name == "sub/full" and recipe.description == "5"
    assert recipe.profiles == ("a", "p")
    assert recipe.model == ModelSpec(hub_id="org/M", dir_name="mdir")
    assert recipe.dataset == DatasetSpec(name="gsm8k", dir_name="ddir", template="think", train_rows=10, test_rows=2)
    assert (recipe.reward_mode, recipe.loggers, recipe.wandb, recipe.project) == ("think", ("file",), "disabled",
                                                                                    "proj")
    assert recipe.verl == {"data.train_batch_size": 4, "+x.y": 1}
    assert recipe.assets == "canary-assets"
    assert list(recipe.expect.profiles) == ["a", "p"]


def test_known_dataset_fills_in_its_rows(home):
    recipe_file(home, dataset={"name": "gsm8k"})
    assert load_recipe("r").dataset == DatasetSpec("gsm8k", "gsm8k", "verl", 7473, 1319)
    recipe_file(home, dataset={"name": "gsm8k", "test_rows": 0, "train_rows": 0})
    assert load_recipe("r").dataset == DatasetSpec("gsm8k", "gsm8k", "verl", 0, 0)


ACCURACY = {"source": "log", "metric": "val-core/openai/gsm8k/reward/mean@1", "before": {"step": 0, "max": 0.1},
            "after": {"step": "last", "min": 0.5}, "min_problems": 1000}


def test_expect_sees_the_test_rows_of_a_known_dataset(home):
    recipe_file(home, dataset={"name": "gsm8k"}, expect={**EXPECT, "accuracy": ACCURACY})
    assert load_recipe("r").expect.accuracy.min_problems == 1000  # 1319 known test rows >= 1000
    path = recipe_file(home, dataset={"name": "gsm8k", "test_rows": 999}, expect={**EXPECT, "accuracy": ACCURACY})
    exc = error(load_recipe, "r")
    assert exc.message == "the recipe's test split has 999 rows, fewer than min_problems 1000"
    assert exc.where == f"{path}: expect.accuracy.min_problems"


def test_expect_profiles_follow_the_profiles_list(home):
    path = recipe_file(home, profiles=["p", "a"])
    exc = error(load_recipe, "r")
    assert (exc.message, exc.where) == ("missing required key 'a'", f"{path}: expect.profiles")


def test_model_dir_defaults_to_the_last_part_of_the_hub_id(home):
    for hub_id, expected in (("a/b/c", "c"), ("a/b//", "b"), ("solo", "solo"), ("x/y", "y"), ("o/Model-X", "Model-X")):
        recipe_file(home, model={"hub_id": hub_id})
        assert load_recipe("r").model.dir_name == expected, hub_id
    recipe_file(home, model={"hub_id": "a/b", "dir": ""})  # an empty dir counts as none
    assert load_recipe("r").model.dir_name == "b"
    recipe_file(home, dataset={"name": "toy", "dir": ""})
    assert load_recipe("r").dataset.dir_name == "toy"


@pytest.mark.parametrize("key", ["description", "profile", "model", "dataset", "verl", "expect"])
def test_recipe_required_keys(home, key):
    path = recipe_file(home, **{key: DROP})
    exc = error(load_recipe, "r")
    assert (exc.message, exc.where) == (f"missing required key '{key}'", str(path))


@pytest.mark.parametrize(("changes", "where", "message", "hint"), [
    ({"profil": "p"}, ".profil", "unknown key 'profil'", "did you mean profile, profiles?"),
    ({"model": {"hub_id": "a/b", "revision": "x"}}, ": model.revision", "unknown key 'revision'",
     "valid keys: hub_id, dir"),
    ({"model": {"dir": "x"}}, ": model", "missing required key 'hub_id'", None),
    ({"dataset": {"name": "toy", "test_row": 1}}, ": dataset.test_row", "unknown key 'test_row'",
     "did you mean test_rows, train_rows?"),
    ({"dataset": {"dir": "d"}}, ": dataset", "missing required key 'name'", None),
    ({"reward": {"mod": "think"}}, ": reward.mod", "unknown key 'mod'", "did you mean mode?"),
    ({"logging": {"logger": ["file"]}}, ": logging.logger", "unknown key 'logger'", "did you mean loggers?"),
    ({"logging": {"loggers": ["console", "wandb"]}}, ": logging.loggers", "'wandb' is not one of console, file", None),
    ({"model": {"hub_id": 7}}, ": model.hub_id", "expected str, got int (7)", None),
    ({"profile": ["p"]}, ": profile", "expected str, got list (['p'])", None),
    ({"dataset": {"name": "toy", "template": "chat"}}, ": dataset.template", "'chat' is not one of verl, think", None),
    ({"reward": {"mode": "lenient"}}, ": reward.mode", "'lenient' is not one of strict, flexible, think", None),
    ({"logging": {"wandb": "on"}}, ": logging.wandb", "'on' is not one of auto, disabled", None),
    ({"verl": "x=1"}, ": verl", "expected dict, got str ('x=1')", None),
    ({"assets": "make-assets"}, ": assets", "'make-assets' is not one of smoke-assets, canary-assets", None),
    ({"expect": None}, ": expect", "the expect: block is empty", "see docs/expect.md"),
])
def test_recipe_errors_name_the_key(home, changes, where, message, hint):
    path = recipe_file(home, "bad", **changes)
    exc = error(load_recipe, "bad")
    assert (exc.message, exc.where, exc.hint) == (message, f"{path}{where}", hint)


def test_expect_errors_come_after_the_other_keys(home):
    path = recipe_file(home, "bad", expect=None, assets="nope")
    assert error(load_recipe, "bad").where == f"{path}: assets"


def test_optional_blocks_may_be_null(home):
    recipe_file(home, reward=None, logging=None, assets=None, profiles=None)
    recipe = load_recipe("r")
    assert (recipe.reward_mode, recipe.loggers, recipe.assets, recipe.profiles) == ("strict", ("console", "file"),
                                                                                    None, ("p",))
    profile_file(home, micro_batch_per_gpu=None, offload=None, verl=None)
    prof = load_profile("p")
    assert (prof.micro_batch_per_gpu, prof.offload, prof.verl) == ({}, {}, {})


# ------------------------------------------------------------------------------------------ names
def test_recipe_name_is_the_path_under_recipes(home):
    recipe_file(home, "deep/er/x")
    assert recipe_name(home / "recipes" / "deep" / "er" / "x.yaml") == "deep/er/x"
    assert load_recipe("deep/er/x").name == "deep/er/x"
    assert list_recipes() == ["deep/er/x", "r"]
    assert list_profiles() == ["a", "p"]


def test_names_with_x_and_dots_are_names(home):
    recipe_file(home, "XX.v2")
    assert load_recipe("XX.v2").name == "XX.v2"


@pytest.mark.parametrize("name", ["", "  ", " r", "r ", "r\n", "a\tb", "a\rb", "a\0b"])
def test_blank_or_padded_or_control_names_are_refused(home, name):
    exc = error(load_recipe, name)
    root = home / "recipes"
    assert (exc.message, exc.where) == (f"not a recipe name: {name!r}", None)
    assert exc.hint == f"recipes are named by their path under {root} without .yaml (`rlrecipes recipes` lists them)"
    exc = error(load_profile, name)
    assert exc.message == f"not a profile name: {name!r}"
    assert exc.hint == (f"profiles are named by their path under {root / 'profiles'} without .yaml "
                        "(`rlrecipes recipes` lists them)")


@pytest.mark.parametrize("name", ["/etc/passwd", "../r", "sub/../../r"])
def test_absolute_and_parent_names_are_refused(home, name):
    root = home / "recipes"
    exc = error(load_recipe, name)
    assert exc.message == f"recipe names are paths under {root}: no absolute path and no '..'"
    assert exc.where == name
    assert exc.hint.startswith("recipes are named by their path under")


def test_a_yaml_path_inside_the_root_is_accepted_outside_refused(home, tmp_path_factory):
    path = home / "recipes" / "r.yaml"
    assert load_recipe(str(path)).name == "r"
    assert load_profile(str(home / "recipes" / "profiles" / "a.yaml")).name == "a"
    outside = _write(tmp_path_factory.mktemp("elsewhere") / "r.yaml", RECIPE)
    exc = error(load_recipe, str(outside))
    assert (exc.message, exc.where) == (f"recipe file lies outside {home / 'recipes'}", str(outside))
    assert exc.hint.startswith("recipes are named")
    exc = error(load_profile, str(path))  # a recipe is not under the profiles folder
    assert (exc.message, exc.where) == (f"profile file lies outside {home / 'recipes' / 'profiles'}", str(path))


def test_a_relative_yaml_path_counts_only_when_the_file_exists(home, monkeypatch):
    monkeypatch.chdir(home)
    assert load_recipe("recipes/r.yaml").name == "r"
    assert load_recipe("r").name == "r"
    (home / "r").write_text("not a recipe")  # a file named like the recipe in the working directory: ignored
    assert load_recipe("r").name == "r"
    exc = error(load_recipe, "nope.yaml")
    assert (exc.message, exc.where) == ("no recipe named 'nope.yaml'", str(home / "recipes" / "nope.yaml"))
    assert error(load_recipe, "rr.yaml").hint == "did you mean r?"
    monkeypatch.chdir(home / "recipes" / "profiles")  # a name with .yaml that is no file here: looked up as a name
    assert load_recipe("r.yaml").path == home / "recipes" / "r.yaml"


def test_a_profile_is_not_a_recipe(home):
    exc = error(load_recipe, "profiles/p")
    path = home / "recipes" / "profiles" / "p.yaml"
    assert (exc.message, exc.where, exc.hint) == ("'profiles/p' is a hardware profile, not a recipe", str(path),
                                                  "pass it as --profile p")
    exc = error(load_recipe, str(path))
    assert (exc.message, exc.hint) == (f"{str(path)!r} is a hardware profile, not a recipe", "pass it as --profile p")


def test_unknown_names_suggest_close_ones_or_list_all(home):
    exc = error(load_recipe, "rr")
    assert (exc.message, exc.where, exc.hint) == ("no recipe named 'rr'", str(home / "recipes" / "rr.yaml"),
                                                  "did you mean r?")
    exc = error(load_recipe, "zzzzzz")
    assert exc.hint == "available: r"
    exc = error(load_profile, "aa")
    assert (exc.message, exc.where, exc.hint) == (
        "no profile named 'aa'", str(home / "recipes" / "profiles" / "aa.yaml"), "did you mean a?")
    exc = error(load_profile, "zzzz")
    assert exc.hint == "available: a, p"


def test_at_most_three_suggestions_above_a_40_percent_match(home):
    for name in ("abcd1", "abcd2", "abcd3", "abcd4"):
        recipe_file(home, name)
    assert error(load_recipe, "abcd").hint == "did you mean abcd4, abcd3, abcd2?"


def test_suggestions_need_a_40_percent_match(home):
    recipe_file(home, "qrstuvwxyz")
    assert error(load_recipe, "qrstabcdef").hint == "did you mean qrstuvwxyz?"  # ratio 0.4: just enough
    assert error(load_recipe, "qrsabcdefg").hint == "available: qrstuvwxyz, r"  # ratio 0.3


# ------------------------------------------------------------------------- profile -> verl keys
def _profile(**changes) -> Profile:
    base = dict(name="t", path=Path("/t.yaml"), description="", image_name="p40", nnodes=1, gpus_per_node=1,
                gpu=GpuSpec("g", 1.0, "6.1"), dtype="fp32", attention="eager", rollout="hf", tensor_parallel=1,
                gpu_memory_utilization=None, micro_batch_per_gpu={}, offload={}, gradient_checkpointing=False,
                verl={})
    return Profile(**{**base, **changes})


FP32 = {"param_dtype": "fp32", "reduce_dtype": "fp32", "buffer_dtype": "fp32"}


def test_p40_profile_keys_with_critic_and_lora():
    prof = _profile(nnodes=2, gpus_per_node=3, tensor_parallel=2, micro_batch_per_gpu={"actor": 1, "log_prob": 2,
                                                                                       "critic": 3},
                    offload={"param": True, "optimizer": False, "ref_param": True})
    assert load._profile_overrides(prof, uses_critic=True, lora=True) == {
        "trainer.n_gpus_per_node": 3,
        "trainer.nnodes": 2,
        "actor_rollout_ref.rollout.name": "hf",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
        "actor_rollout_ref.model.enable_gradient_checkpointing": False,
        "+actor_rollout_ref.model.override_config._attn_implementation": "eager",
        "actor_rollout_ref.model.use_remove_padding": False,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 1,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 2,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 2,
        "actor_rollout_ref.actor.fsdp_config.param_offload": True,
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": False,
        "actor_rollout_ref.ref.fsdp_config.param_offload": True,
        "critic.ppo_micro_batch_size_per_gpu": 3,
        "critic.model.fsdp_config.param_offload": True,
        "critic.model.fsdp_config.optimizer_offload": False,
        "critic.model.enable_gradient_checkpointing": False,
        "+critic.model.override_config._attn_implementation": "eager",
        "critic.model.use_remove_padding": False,
        "+actor_rollout_ref.actor.fsdp_config.model_dtype": "fp32",
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision": FP32,
        "+actor_rollout_ref.ref.fsdp_config.model_dtype": "fp32",
        "+critic.model.fsdp_config.model_dtype": "fp32",
        "+critic.model.fsdp_config.mixed_precision": FP32,
        "+actor_rollout_ref.actor.fsdp_config.use_orig_params": True,
    }


def test_p40_profile_keys_without_critic_lora_or_knobs():
    prof = _profile(dtype="fp16", gradient_checkpointing=True, micro_batch_per_gpu={"critic": 3},
                    offload={"ref_param": False})
    assert load._profile_overrides(prof, uses_critic=False, lora=False) == {
        "trainer.n_gpus_per_node": 1,
        "trainer.nnodes": 1,
        "actor_rollout_ref.rollout.name": "hf",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.model.enable_gradient_checkpointing": True,
        "+actor_rollout_ref.model.override_config._attn_implementation": "eager",
        "actor_rollout_ref.model.use_remove_padding": False,
        "actor_rollout_ref.ref.fsdp_config.param_offload": False,
    }
    # fp32 without a critic: no critic keys; a critic without micro/offload knobs: only its attention keys
    assert "+critic.model.fsdp_config.model_dtype" not in load._profile_overrides(_profile(), False, False)
    with_critic = load._profile_overrides(_profile(offload={"optimizer": True}), True, False)
    assert with_critic["critic.model.fsdp_config.optimizer_offload"] is True
    assert "critic.model.fsdp_config.param_offload" not in with_critic
    assert "critic.ppo_micro_batch_size_per_gpu" not in with_critic
    assert "actor_rollout_ref.actor.fsdp_config.param_offload" not in with_critic


def test_flash_attention_vllm_profile_keys():
    prof = _profile(image_name="a100", dtype="fp32", attention="flash_attention_2", rollout="vllm",
                    gpu_memory_utilization=0.7, micro_batch_per_gpu={"log_prob": 8}, offload={"param": False})
    assert load._profile_overrides(prof, uses_critic=True, lora=True) == {
        "trainer.n_gpus_per_node": 1,
        "trainer.nnodes": 1,
        "actor_rollout_ref.rollout.name": "vllm",
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.model.enable_gradient_checkpointing": False,
        "+actor_rollout_ref.model.override_config.attn_implementation": "flash_attention_2",
        "actor_rollout_ref.rollout.gpu_memory_utilization": 0.7,
        "actor_rollout_ref.rollout.calculate_log_probs": True,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 8,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 8,
        "actor_rollout_ref.actor.fsdp_config.param_offload": False,
        "critic.fsdp.param_offload": False,
        "critic.model.enable_gradient_checkpointing": False,
        "+critic.model.override_config.attn_implementation": "flash_attention_2",
    }  # 0.8.0 sets FP32 only through the P40 image's switches: none here
    fa3 = load._profile_overrides(_profile(image_name="a100", attention="flash_attention_3", rollout="vllm"), True, 0)
    assert "actor_rollout_ref.model.use_remove_padding" not in fa3 and "critic.model.use_remove_padding" not in fa3
    hf_lora_without_need = _profile(image_name="a100", rollout="hf", gpu_memory_utilization=0.0)
    keys = load._profile_overrides(hf_lora_without_need, False, True)
    assert keys["actor_rollout_ref.rollout.gpu_memory_utilization"] == 0.0
    assert "+actor_rollout_ref.actor.fsdp_config.use_orig_params" not in keys
    assert "actor_rollout_ref.rollout.calculate_log_probs" not in keys


def test_profile_properties():
    prof = _profile(nnodes=3, gpus_per_node=4, image_name="hopper")
    assert prof.n_gpus == 12 and prof.image is IMAGES["hopper"]


# ------------------------------------------------------------------------------------- needs_critic
@pytest.mark.parametrize(("config", "expected"), [
    ({}, True), ({"algorithm.adv_estimator": "gae"}, True), ({"algorithm.adv_estimator": "grpo"}, False),
    ({"critic.enable": True, "algorithm.adv_estimator": "grpo"}, True),
    ({"critic.enable": False, "algorithm.adv_estimator": "gae"}, False),
    ({"critic.enable": 0}, False), ({"algorithm.adv_estimator": ""}, True),
])
def test_needs_critic(config, expected):
    assert needs_critic(config.get) is expected


# ------------------------------------------------------------------------------------ ResolvedRun
def _run(overrides: dict, variables: dict | None = None, image: str = "p40", **recipe) -> ResolvedRun:
    rec = load.Recipe(name=recipe.get("name", "grp/x"), path=Path("/r.yaml"), description="", profile="t",
                      profiles=("t",), model=ModelSpec("o/m", "m"),
                      dataset=DatasetSpec("d", recipe.get("data_dir", "dd"), "verl", None, None),
                      reward_mode="strict", loggers=("console",), wandb="auto", project="p", verl={}, assets=None,
                      expect=None)
    return ResolvedRun(recipe=rec, profile=_profile(image_name=image), overrides=overrides, sources={},
                       variables={"MODELS_DIR": "/m", "DATA_DIR": "/d", "CKPT_DIR": "/c", "LOG_DIR": "/l",
                                  "CACHE_DIR": "/k", **(variables or {})}, use_critic=False)


def test_get_takes_the_last_setting_of_a_key_whatever_its_prefix():
    run = _run({"a.b": 1, "++a.b": 2, "c": 3, "+c": 4})
    assert run.get("a.b") == 2 and run.get("c") == 4


def test_get_after_a_removal():
    run = _run({"a.b": 1, "~a.b": None, "x.y": 1, "~x": None, "x.z": 5, "ab.c": 7, "~a": None, "q": 1, "~q.r": None})
    assert run.get("a.b", "D") == "D"
    assert run.get("x.y", "D") == "D"  # removed with its parent
    assert run.get("x.z") == 5  # set after the removal
    assert run.get("ab.c") == 7  # `~a` is not a prefix of `ab`
    assert run.get("q") == 1  # removing a child keeps the parent
    assert _run({"~a.b": None, "a.b": 3}).get("a.b") == 3


def test_get_reads_inside_a_mapping_valued_parent():
    run = _run({"a.b": 2, "+a": {"c": {"d": 1}, "e": None}, "x.y": 1, "+x": {"z": 2}})
    assert run.get("a.c.d") == 1 and run.get("a.c") == {"d": 1}
    assert run.get("a.b") == 2  # the mapping does not name it: the earlier setting stands
    assert run.get("a.e", "D") is None  # set to null inside the mapping
    assert run.get("a.c.d.f", "D") == "D" and run.get("a.zz", "D") == "D"
    assert run.get("x.y") == 1 and run.get("x.z") == 2
    assert _run({"+a": {"b": 1}, "a.b": 5}).get("a.b") == 5
    assert _run({"a.b": 5, "+a": {"b": 6}}).get("a.b") == 6
    assert _run({"a": {"b.c": 1}}).get("a.b.c", "D") == "D"  # a dotted key inside a mapping is one key


def test_get_substitutes_variables_also_inside_a_mapping():
    run = _run({"k": "${MODELS_DIR}/x", "+p": {"q": "${LIST}", "r": ["${DATA_DIR}"]}}, {"LIST": ["a", "b"]})
    assert run.get("k") == "/m/x"
    assert run.get("p.q") == ["a", "b"] and run.get("p.r") == ["/d"]
    assert run.get("p") == {"q": ["a", "b"], "r": ["/d"]}


def test_get_follows_interpolations_up_to_ten_hops():
    chain = {f"k.k{i}": f"${{k.k{i + 1}}}" for i in range(13)}
    run = _run({**chain, "k.k13": 7, "s.a": "${t.u}", "t.u": "${s.a}", "v": "${w.x}"})
    assert run.get("k.k3") == 7  # 10 hops
    assert run.get("k.k2") == "${k.k13}"  # 10 hops, then the text of the eleventh
    assert run.get("k.k0") == "${k.k11}"
    assert run.get("s.a") == "${s.a}" and run.get("t.u") == "${t.u}"  # a loop stops where it closes
    assert run.get("v", "D") == "D"  # an interpolation of an unset key verl has no known default for: as unset
    # ... of an unset key with a known verl default: that default (0.5.0's total_epochs is 30), not the asked key's
    pointer = _run({"trainer.max_actor_ckpt_to_keep": "${trainer.total_epochs}"})
    assert pointer.get("trainer.max_actor_ckpt_to_keep") == 30 == pointer.get("trainer.total_epochs")
    assert pointer.get("trainer.max_actor_ckpt_to_keep", kind=int) == 30
    assert _run({"a": "${b}", "b": 1}).get("a") == "${b}"  # a name without a dot names no config key


def test_get_defaults_and_kinds():
    run = _run({"a": None, "b": "", "c": "5", "d": 0, "e": "${X}", "f": False}, {"X": ""})
    assert run.get("a", "D") is None and run.get("b", "D") == ""
    assert run.get("a", "D", kind=int) == "D" and run.get("b", "D", kind=str) == "D"
    assert run.get("e", "D", kind=str) == "D"  # empty after substitution
    assert run.get("c", kind=int) == 5 and run.get("d", kind=str) == "0" and run.get("d", "D", kind=int) == 0
    assert run.get("f", "D", kind=bool) is False
    assert run.get("trainer.total_epochs") == 30  # verl's default
    assert run.get("trainer.total_epochs", kind=int) == 30
    assert run.get("a", kind=int) is None and run.get("no.such") is None
    assert run.get("actor_rollout_ref.model.use_remove_padding") is False
    assert _run({}, image="a100").get("actor_rollout_ref.model.use_remove_padding") is True
    assert _run({}, image="a100").get("actor_rollout_ref.model.use_remove_padding", None) is None


def test_run_properties():
    run = _run({"actor_rollout_ref.model.path": "${MODELS_DIR}/m", "trainer.default_local_dir": "${CKPT_DIR}/x"},
               data_dir="gsm")
    assert run.name == "grp/x" and run.image is IMAGES["p40"]
    assert run.model_path == Path("/m/m") and run.ckpt_dir == Path("/c/x")
    assert run.log_dir == Path("/l/grp/x") and run.data_dir == Path("/d/gsm")
    assert run.paths == {"MODELS_DIR": "/m", "DATA_DIR": "/d", "CKPT_DIR": "/c", "LOG_DIR": "/l", "CACHE_DIR": "/k"}
    assert _run({}, {"MODELS_DIR": Path("/p")}).paths["MODELS_DIR"] == "/p"
    assert run.use_reference_policy is False and run.lora_rank == 0
    assert _run({"actor_rollout_ref.actor.use_kl_loss": True}).use_reference_policy is True
    assert _run({"algorithm.use_kl_in_reward": True}).use_reference_policy is True
    assert _run({"actor_rollout_ref.model.lora_rank": 8}).lora_rank == 8
    assert _run({"actor_rollout_ref.model.lora_rank": None}).lora_rank == 0


def test_hydra_and_launcher_overrides():
    run = _run({"a": "${MODELS_DIR}/x y", "~b": None, "+c": [1, "${DATA_DIR}"], "d": "${LIST}"}, {"LIST": ["u", "v"]})
    assert run.hydra_overrides() == ["a='/m/x y'", "~b", "+c=[1,/d]", "d=[u,v]"]
    assert run.launcher_overrides() == ["a='${MODELS_DIR}/x y'", "~b", "+c=[1,${DATA_DIR}]", "d=${LIST}"]


def test_loggers():
    def rec(loggers, wandb="auto"):
        return dataclasses.replace(_run({}).recipe, loggers=loggers, wandb=wandb)

    old, new = spec_for("0.5.0"), spec_for("0.8.0")
    both = rec(("console", "file"))
    assert base_loggers(both, old) == ["console"] and base_loggers(both, new) == ["console", "file"]
    assert base_loggers(rec(("file",)), new) == ["file"] and base_loggers(rec(("console",)), old) == ["console"]
    assert both.loggers == ("console", "file")  # not changed in place
    assert logger_value(both, new, wandb=True) == ["console", "file", "wandb"]
    assert logger_value(both, new, wandb=False) == ["console", "file"]
    assert logger_value(rec(("console", "file"), "disabled"), new, wandb=True) == ["console", "file"]
    assert logger_value(both, old, wandb=True) == ["console", "wandb"]


# ------------------------------------------------------------------------------------------ resolve
def test_resolve_a_minimal_recipe_exactly(home):
    run = resolve("r", env=ENV)
    assert run.profile == load_profile("p") and run.recipe == load_recipe("r")
    assert run.use_critic is False and run.warnings == []
    assert list(run.overrides.items()) == [
        ("actor_rollout_ref.model.path", "${MODELS_DIR}/Model-1B"),
        ("data.train_files", "${DATA_DIR}/toy/train.parquet"),
        ("data.val_files", "${DATA_DIR}/toy/test.parquet"),
        ("custom_reward_function.path", "${REWARD_FN}"),
        ("custom_reward_function.name", "compute_score"),
        ("trainer.logger", "${LOGGER}"),
        ("trainer.project_name", "rlrecipes"),
        ("trainer.experiment_name", "r"),
        ("trainer.default_local_dir", "${CKPT_DIR}/r"),
        ("trainer.n_gpus_per_node", 2),
        ("trainer.nnodes", 1),
        ("actor_rollout_ref.rollout.name", "hf"),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", 1),
        ("actor_rollout_ref.model.enable_gradient_checkpointing", True),
        ("+actor_rollout_ref.model.override_config._attn_implementation", "eager"),
        ("actor_rollout_ref.model.use_remove_padding", False),
        ("+actor_rollout_ref.actor.fsdp_config.model_dtype", "fp32"),
        ("+actor_rollout_ref.actor.fsdp_config.mixed_precision", FP32),
        ("+actor_rollout_ref.ref.fsdp_config.model_dtype", "fp32"),
        ("algorithm.adv_estimator", "grpo"),
    ]
    assert run.sources == {
        **{key: "engine" for key in ("actor_rollout_ref.model.path", "data.train_files", "data.val_files",
                                     "custom_reward_function.path", "custom_reward_function.name", "trainer.logger",
                                     "trainer.project_name", "trainer.experiment_name", "trainer.default_local_dir")},
        **{load.ov.bare_key(key): "profile p" for key in load._profile_overrides(run.profile, False, False)},
        "algorithm.adv_estimator": "recipe r",
    }
    assert run.variables == {"MODELS_DIR": "/workspace/models", "DATA_DIR": "/workspace/data",
                             "CKPT_DIR": "/workspace/checkpoints", "LOG_DIR": "/workspace/logs",
                             "CACHE_DIR": "/workspace/cache", "REWARD_FN": str(PACKAGE_DIR / "rewards" / "gsm8k.py"),
                             "LOGGER": ["console"]}
    assert run.hydra_overrides()[:3] == ["actor_rollout_ref.model.path=/workspace/models/Model-1B",
                                         "data.train_files=/workspace/data/toy/train.parquet",
                                         "data.val_files=/workspace/data/toy/test.parquet"]


def test_resolve_a100_recipe_with_critic_reward_mode_and_wandb(home):
    recipe_file(home, "team/c", profile="a", verl={"algorithm.adv_estimator": "gae"}, reward={"mode": "flexible"},
                logging={"project": "pp"}, model={"hub_id": "o/M", "dir": "md"},
                expect={**EXPECT, "profiles": {"a": {"not_measured": "x"}}})
    env = {"MODELS_DIR": "/mm", "DATA_DIR": "/dd", "CKPT_DIR": "/cc", "LOG_DIR": "/ll", "CACHE_DIR": "/kk",
           "REWARD_FN": "/r.py", "WANDB_API_KEY": "key"}
    run = resolve("team/c", env=env)
    assert run.use_critic is True
    assert run.variables == {"MODELS_DIR": "/mm", "DATA_DIR": "/dd", "CKPT_DIR": "/cc", "LOG_DIR": "/ll",
                             "CACHE_DIR": "/kk", "REWARD_FN": "/r.py", "LOGGER": ["console", "file", "wandb"]}
    o = run.overrides
    assert o["critic.model.path"] == "${MODELS_DIR}/md"
    assert o["+reward.custom_reward_function.reward_kwargs"] == {"mode": "flexible"}
    assert o["reward.custom_reward_function.path"] == "${REWARD_FN}"
    assert o["reward.custom_reward_function.name"] == "compute_score"
    assert (o["trainer.project_name"], o["trainer.experiment_name"], o["trainer.default_local_dir"]) == (
        "pp", "team-c", "${CKPT_DIR}/team/c")
    assert o["+critic.model.override_config.attn_implementation"] == "flash_attention_2"
    assert run.sources["critic.model.path"] == "engine" and run.sources["trainer.nnodes"] == "profile a"
    assert run.get("critic.model.path") == "/mm/md" and run.get("trainer.logger") == ["console", "file", "wandb"]
    assert resolve("team/c", env={"WANDB_API_KEY": ""}).get("trainer.logger") == ["console", "file"]
    assert "+reward.custom_reward_function.reward_kwargs" not in resolve("r", env=ENV).overrides
    assert "critic.model.path" not in resolve("r", env=ENV).overrides


def test_resolve_reads_the_process_environment_without_env(home, monkeypatch):
    monkeypatch.setenv("MODELS_DIR", "/from/env")
    assert resolve("r").model_path == Path("/from/env/Model-1B")
    assert resolve("r", env={}).model_path == Path("/workspace/models/Model-1B")


def test_resolve_on_another_profile_warns(home):
    recipe_file(home, profiles=["p", "a"], expect={**EXPECT, "profiles": {"p": {"not_measured": "x"},
                                                                         "a": {"not_measured": "y"}}})
    assert resolve("r", profile="a", env=ENV).warnings == []
    _write(home / "recipes" / "profiles" / "b.yaml", A100)
    assert resolve("r", profile="b", env=ENV).warnings == [
        "profile 'b' is not one this recipe was tuned for (p, a)"]
    recipe_file(home)
    run = resolve("r", profile="a", env=ENV)
    assert run.profile.name == "a"
    assert run.warnings == ["profile 'a' is not one this recipe was tuned for (p)"]


def test_later_layers_replace_the_value_and_its_prefix(home):
    profile_file(home, verl={"+x.a": 1, "x.b": 1, "x.c": 1, "trainer.nnodes": 2})
    recipe_file(home, verl={"algorithm.adv_estimator": "grpo", "x.a": 2, "++x.b": 2})
    run = resolve("r", overrides=["+x.b=3", "~x.c"], env=ENV)
    o = run.overrides
    assert "+x.a" not in o and o["x.a"] == 2
    assert "x.b" not in o and "++x.b" not in o and o["+x.b"] == 3
    assert "x.c" not in o and o["~x.c"] is None
    assert o["trainer.nnodes"] == 2 and run.sources["trainer.nnodes"] == "profile p"
    assert run.sources["x.a"] == "recipe r" and run.sources["x.b"] == "command line"
    assert run.sources["x.c"] == "command line"
    assert list(o)[-3:] == ["x.a", "+x.b", "~x.c"]  # a replaced key moves to its layer's place


@pytest.mark.parametrize("key", load.ENGINE_KEYS)
def test_engine_keys_cannot_be_set_in_a_recipe_or_profile(home, key):
    path = recipe_file(home, verl={f"+{key}": "x"})
    exc = error(resolve, "r", env=ENV)
    assert exc.message == f"'+{key}' is derived by rlrecipes and cannot be set in a recipe"
    assert exc.where == f"{path}: verl.+{key}"
    assert exc.hint == "set model.hub_id / dataset / logging in the recipe, or override it on the command line"
    recipe_file(home)
    path = profile_file(home, verl={key: "x"})
    exc = error(resolve, "r", env=ENV)
    assert (exc.message, exc.where) == (f"'{key}' is derived by rlrecipes and cannot be set in a profile",
                                        f"{path}: verl.{key}")
    profile_file(home)
    assert resolve("r", overrides=[f"{key}=/x"], env=ENV).overrides[key] == "/x"  # the command line may


def test_value_errors_name_the_layer_that_set_the_key(home):
    path = profile_file(home, verl={"data.train_batch_size": 0})
    exc = error(resolve, "r", env=ENV)
    assert (exc.message, exc.where) == ("must be >= 1, got 0", f"{path}: data.train_batch_size")
    rpath = recipe_file(home, verl={"data.train_batch_size": -1})
    exc = error(resolve, "r", env=ENV)
    assert exc.where == f"{rpath}: data.train_batch_size"
    exc = error(resolve, "r", overrides=["data.train_batch_size=-2"], env=ENV)
    assert (exc.message, exc.where) == ("must be >= 1, got -2", "command line: data.train_batch_size")
    recipe_file(home, verl={"+data.train_batch_size": -1})
    assert error(resolve, "r", env=ENV).where == f"{rpath}: data.train_batch_size"


def test_value_checks_see_all_layers_and_warn(home):
    profile_file(home, verl={"trainer.save_freq": 5})
    recipe_file(home, verl={"algorithm.adv_estimator": "grpo", "trainer.save_freq": 0})
    assert resolve("r", env=ENV).warnings == [
        "trainer.save_freq=0: no checkpoint is saved (verl reads <= 0 as never; write -1 to mean it)"]
    assert resolve("r", overrides=["trainer.save_freq=3"], env=ENV).warnings == []


def test_packing_check_names_where_the_attention_comes_from(home):
    # FlashAttention on the profile, SDPA pinned by the recipe, packing left at verl's default (on in 0.8.0)
    recipe_file(home, profile="a", verl={"algorithm.adv_estimator": "grpo",
                                         "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa"},
                expect={**EXPECT, "profiles": {"a": {"not_measured": "x"}}})
    exc = error(resolve, "r", env=ENV)
    assert exc.message.startswith("use_remove_padding=true needs flash_attention_2, and this model runs sdpa")
    assert exc.where == "verl default: actor_rollout_ref.model.use_remove_padding"
    assert resolve("r", overrides=["actor_rollout_ref.model.use_remove_padding=false"], env=ENV).warnings == []
    # the critic's attention is checked only when there is a critic
    recipe_file(home, profile="a", verl={"algorithm.adv_estimator": "gae",
                                         "+critic.model.override_config.attn_implementation": "eager"},
                expect={**EXPECT, "profiles": {"a": {"not_measured": "x"}}})
    exc = error(resolve, "r", env=ENV)
    assert exc.message.endswith("this model runs eager: verl packs each micro batch into one row, which it keeps "
                                "apart with FlashAttention's varlen kernel; under eager transformers masks the whole "
                                "packed row instead, unmeasured at a recipe's shape")
    assert exc.where == "verl default: critic.model.use_remove_padding"
    assert resolve("r", overrides=["algorithm.adv_estimator=grpo"], env=ENV).use_critic is False


def test_critic_and_lora_follow_interpolations_across_layers(home):
    profile_file(home, verl={"+my.est": "grpo", "+my.rank": 4})
    recipe_file(home, verl={"algorithm.adv_estimator": "${my.est}", "actor_rollout_ref.model.lora_rank": "${my.rank}"})
    run = resolve("r", env=ENV)
    assert run.use_critic is False
    assert run.overrides["+actor_rollout_ref.actor.fsdp_config.use_orig_params"] is True
    run = resolve("r", overrides=["+my.est=gae", "+my.rank=0"], env=ENV)
    assert run.use_critic is True and run.overrides["critic.model.path"] == "${MODELS_DIR}/Model-1B"
    assert "+actor_rollout_ref.actor.fsdp_config.use_orig_params" not in run.overrides
    assert "+critic.model.fsdp_config.mixed_precision" in run.overrides  # fp32 profile with a critic
    run = resolve("r", overrides=["+my.rank=1"], env=ENV)
    assert run.overrides["+actor_rollout_ref.actor.fsdp_config.use_orig_params"] is True


def test_unknown_variables_are_refused(home):
    recipe_file(home, verl={"algorithm.adv_estimator": "grpo", "+t.x": ["${NOPE}/${ALSO}", "${MODELS_DIR}"]})
    exc = error(resolve, "r", env=ENV)
    assert exc.message == "unknown variable(s) ALSO, NOPE in +t.x"
    assert exc.hint == "known variables: CACHE_DIR, CKPT_DIR, DATA_DIR, LOGGER, LOG_DIR, MODELS_DIR, REWARD_FN"
    exc = error(resolve, "r", overrides=["+t.x=${X}"], env=ENV)
    assert exc.message == "unknown variable(s) X in +t.x"
    assert resolve("r", overrides=["+t.x=${REWARD_FN}"], env={"REWARD_FN": "/f.py"}).get("t.x") == "/f.py"


@pytest.mark.parametrize(("field", "value"), [("gpus_per_node", 1), ("nnodes", 1)])
def test_the_smallest_counts_are_accepted(home, field, value):
    profile_file(home, "one", **{field: value})
    assert getattr(load_profile("one"), field) == value


@pytest.mark.parametrize("share", [1, 1.0, 0.05])
def test_a_whole_gpu_or_a_sliver_of_it_is_a_valid_share(home, share):
    profile_file(home, "share", rollout={"engine": "hf", "gpu_memory_utilization": share})
    assert load_profile("share").gpu_memory_utilization == float(share)
