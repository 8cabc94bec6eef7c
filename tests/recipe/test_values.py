"""Semantic value checks, lazy plan schedules, the plan's memory gate and recipe names (bad input that
used to be accepted silently, crash with a traceback, or grow to 23 GB)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.errors import RecipeError
from rlrecipes.plan.plan import SaveSteps, build_plan
from rlrecipes.recipe.load import resolve

ENV = {"WANDB_API_KEY": ""}
PPO = "qwen2.5-0.5b-gsm8k-ppo"
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("override", "message"), [
    ("trainer.total_epochs=abc", "trainer.total_epochs: must be an integer, got 'abc'"),
    ("trainer.total_epochs=0", "trainer.total_epochs: must be >= 1, got 0"),
    ("trainer.total_epochs=-3", "must be >= 1, got -3"),
    ("trainer.total_epochs=1.5", "must be an integer, got 1.5"),
    ("trainer.total_epochs=true", "must be an integer, got True"),
    ("trainer.total_epochs=null", "must be an integer, got null (set to null or deleted with ~)"),
    ("~trainer.total_epochs", "trainer.total_epochs: must be an integer, got null (set to null or deleted with ~)"),
    ("trainer.total_epochs=${trainer.total_epochs}", "interpolation loop"),
    ("data.train_batch_size=0", "data.train_batch_size: must be >= 1, got 0"),
    ("data.max_response_length=-5", "data.max_response_length: must be >= 1, got -5"),
    ("data.max_prompt_length=-1", "data.max_prompt_length: must be >= 1"),
    ("actor_rollout_ref.rollout.n=abc", "actor_rollout_ref.rollout.n: must be an integer"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size=0", "ppo_mini_batch_size: must be >= 1"),
    ("actor_rollout_ref.actor.optim.lr=nan", "optim.lr: must be a finite number >= 0, got nan"),
    ("actor_rollout_ref.actor.optim.lr=-1e-6", "optim.lr: must be a finite number >= 0, got -1e-06"),
    ("actor_rollout_ref.actor.optim.lr=inf", "got inf"),
    ("critic.optim.lr=abc", "critic.optim.lr: must be a finite number >= 0, got 'abc'"),
    ("actor_rollout_ref.model.lora_rank=abc", "lora_rank: must be an integer"),
    ("actor_rollout_ref.model.lora_rank=-4", "lora_rank: must be >= 0"),
])
def test_bad_values_are_rejected_naming_key_and_source(override, message):
    with pytest.raises(RecipeError) as err:
        build_plan(resolve(PPO, overrides=[override], env=ENV))
    assert message in str(err.value)
    assert str(err.value).startswith("command line: ") or "interpolation" in str(err.value)


@pytest.mark.parametrize(("override", "warning"), [
    ("trainer.save_freq=0", "trainer.save_freq=0: no checkpoint is saved"),
    ("trainer.save_freq=-5", "trainer.save_freq=-5: no checkpoint is saved"),
    ("trainer.test_freq=0", "trainer.test_freq=0: validation never runs"),
    ("actor_rollout_ref.actor.optim.lr=0", "the weights never change"),
])
def test_values_verl_accepts_but_no_one_means_are_warnings(override, warning):
    run = resolve(PPO, overrides=[override], env=ENV)
    assert any(warning in w for w in run.warnings), run.warnings


def test_interpolations_of_other_keys_are_followed():
    plan = build_plan(resolve(PPO, overrides=["trainer.total_epochs=${trainer.save_freq}"], env=ENV))
    assert plan.schedule.epochs == 20 and plan.schedule.total_steps == 58 * 20


def test_shipped_recipes_pass_the_value_checks():
    from rlrecipes.recipe.load import list_recipes, load_recipe

    for name in list_recipes():
        for profile in load_recipe(name).profiles:
            assert not [w for w in resolve(name, profile=profile, env=ENV).warnings if "never" in w]


@pytest.mark.parametrize(("freq", "total", "expected"), [
    (20, 35, [20, 35]), (20, 40, [20, 40]), (20, 105, [20, 40, 60, 80, 100, 105]), (50, 35, [35]),
    (1, 3, [1, 2, 3]), (-1, 100, []), (0, 100, []), (10, 0, []),
])
def test_save_steps_match_the_list_verl_would_save_at(freq, total, expected):
    saves = SaveSteps(freq, total)
    assert list(saves) == expected and len(saves) == len(expected) and saves == expected
    assert saves[-1:] == expected[-1:] and saves[:8] == expected[:8]


def test_a_trillion_epochs_plan_at_once_in_constant_memory():
    """`trainer.total_epochs=1000000000000` grew to 23 GB enumerating every save step and was killed."""
    # The child reports its own peak, VmHWM of its own address space. getrusage's ru_maxrss is no measure of it:
    # Linux carries the forking process's high-water mark into the child across exec (pytest's own, 15 GB in
    # one CI run, once a fuzzed canary-assets had built rows in memory).
    code = ("import atexit, re, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31)); "
            "atexit.register(lambda: print('maxrss-kib', re.search(r'VmHWM:\\s+(\\d+)', "
            "open('/proc/self/status').read()).group(1), file=sys.stderr)); "
            "from rlrecipes.cli import main; sys.exit(main(sys.argv[1:]))")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code, "plan", PPO, "trainer.total_epochs=1000000000000", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env={"PYTHONPATH": str(REPO),
                                                                                        "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 60
    assert '"count": 2900000000000' in done.stdout and '"last": 58000000000000' in done.stdout
    peak = re.search(r"^maxrss-kib (\d+)$", done.stderr, re.M)
    assert peak, done.stderr[-2000:]
    assert int(peak.group(1)) < 2 * 1024 * 1024  # KiB: under 2 GiB


def test_plan_fails_when_the_memory_estimate_exceeds_the_gpu(capsys):
    argv = ["plan", "qwen2.5-3b-gsm8k-grpo-lora", "--profile", "p40-24gb"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "needs ~681" in err and "Tesla P40 has 24 GiB" in err and "--force" in err
    assert len(err.strip().splitlines()) == 1
    assert main([*argv, "--force", "--json"]) == 0
    assert '"total_gib": 681' in capsys.readouterr().out


@pytest.mark.parametrize(("name", "message"), [
    ("../recipes/smoke-ppo", "no absolute path and no '..'"),
    ("/etc/passwd", "no absolute path and no '..'"),
    ("smoke-ppo/..", "no absolute path and no '..'"),
    ("profiles/a100-80gb", "is a hardware profile, not a recipe"),
    ("", "not a recipe name"),
    ("smoke-ppo\n", "not a recipe name"),
])
def test_recipe_names_stay_under_recipes(name, message):
    with pytest.raises(RecipeError, match=message):
        resolve(name, env=ENV)


def test_profile_names_stay_under_profiles():
    with pytest.raises(RecipeError, match="no absolute path and no"):
        resolve(PPO, profile="../../etc/x", env=ENV)
