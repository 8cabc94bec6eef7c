"""`plan` rejects override keys that verl's config lacks, without verl: it checks them against the committed
snapshot of each pinned verl's composed config (rlrecipes/verl/schema/verl-<version>.json).

- the snapshots are what the real verl gives today (regenerated here; stale -> fail, `make verl-schema`);
- on a literal table of overrides, the snapshot's verdict is Hydra's: the real compose in each pinned verl
  refuses exactly the rows the snapshot refuses;
- the plan CLI names the key, where it was set and the nearest names, the same names validate suggests;
  every shipped recipe on every profile it lists passes; `+key` (a key verl lacks) stays allowed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlrecipes.cli import main
from rlrecipes.recipe.overrides import parse_cli
from rlrecipes.plan.plan import key_problems
from rlrecipes.recipe.load import list_recipes, load_recipe, resolve
from rlrecipes.verl import schema
from rlrecipes.verl.specs import SPECS

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

# (overrides in order, the key the snapshot must name as unknown -- None: verl accepts them)
CASES = [
    (["trainer.total_epochs=3"], None),
    (["trainer.total_epoch=3"], "trainer.total_epoch"),
    (["trainer.save_total_limit=2"], "trainer.save_total_limit"),
    (["+trainer.total_epochs=3"], "trainer.total_epochs"),  # '+' on a key that exists: Hydra refuses it
    (["+trainer.max_actor_ckpt_to_keep=2"], None),  # ... unless its value is null
    (["++trainer.total_epochs=3"], None),
    (["+new.key=1"], None),
    (["new.key=1"], "new.key"),
    (["~trainer.nope"], "trainer.nope"),
    (["~trainer.total_epochs"], None),
    (["actor_rollout_ref.actr.optim.lr=1"], "actor_rollout_ref.actr.optim.lr"),
    (["trainer.total_epochs.x=1"], "trainer.total_epochs.x"),
    (["actor_rollout_ref.actor.optim={lr:1e-6}"], None),
    (["actor_rollout_ref.actor.optim={lrr:1e-6}"], "actor_rollout_ref.actor.optim.lrr"),  # merged: keys must exist
    (["actor_rollout_ref.model.override_config={x:1}"], "actor_rollout_ref.model.override_config.x"),
    (["actor_rollout_ref.model.override_config.attn_implementation=eager"],
     "actor_rollout_ref.model.override_config.attn_implementation"),
    (["+actor_rollout_ref.model.override_config.attn_implementation=eager"], None),
    (["+actor_rollout_ref.model.override_config={a:1}", "actor_rollout_ref.model.override_config.a=2"], None),
    (["+actor_rollout_ref.model.override_config={a:1}", "actor_rollout_ref.model.override_config.b=2"],
     "actor_rollout_ref.model.override_config.b"),
    (["+trainer={x:1}"], None),
    (["trainer={total_epochs:1}"], None),
    (["trainer={total_epoch:1}"], "trainer.total_epoch"),
    (["trainer.max_actor_ckpt_to_keep={a:1}"], None),  # a mapping replaces a null value
    (["trainer.max_actor_ckpt_to_keep.a=1"], "trainer.max_actor_ckpt_to_keep.a"),
    (["+trainer.max_actor_ckpt_to_keep.a=1"], None),
    (["++trainer.total_epochs.a=1"], None),
    (["~trainer.total_epochs", "trainer.total_epochs=3"], "trainer.total_epochs"),  # in order: deleted first
    (["~trainer.total_epochs", "+trainer.total_epochs=3"], None),
    (["+trainer.logger=[a]"], None),
    (["+trainer.total_epochs={a:1}"], None),
    (["data.train_batch_size=abc"], None),  # a bad value, not a bad key (the value checks' business)
]


@pytest.mark.parametrize("version", list(SPECS))
@pytest.mark.parametrize("overrides, unknown", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_the_snapshot_names_the_unknown_key(version, overrides, unknown):
    problems = schema.load(version).problems(parse_cli(overrides).items())
    assert [p.key for p in problems] == ([unknown] if unknown else [])


COMPOSE_ALL = r"""
import json, sys
from rlrecipes.verl import check
verdicts = []
for overrides in json.load(sys.stdin):
    try:
        check._compose(overrides)
        verdicts.append(None)
    except Exception as exc:  # noqa: BLE001 -- whatever Hydra raises is a refusal; validate's answer to it:
        verdicts.append(check._composition_error(exc, overrides))
print(json.dumps(verdicts))
"""


@pytest.mark.verl
@pytest.mark.parametrize("version", list(SPECS))
def test_real_verl_refuses_exactly_the_rows_the_snapshot_refuses(run_in_verl, version):
    proc = run_in_verl(version, COMPOSE_ALL, input=json.dumps([c[0] for c in CASES]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = json.loads(proc.stdout.strip().splitlines()[-1])
    disagree = [(c[0], c[1], v) for c, v in zip(CASES, verdicts) if (c[1] is None) != (v is None)]
    assert not disagree, disagree
    # where validate names the same key (a plain key=value; for a mapping value Hydra names the mapping) of
    # a lone override, it suggests the same names: one suggestion function, on the composed config there,
    # the snapshot here (validate suggests from the config without the bad override; plan after the ones before)
    same = 0
    snapshot = schema.load(version)
    for (overrides, unknown), verdict in zip(CASES, verdicts):
        if verdict and verdict["key"] == unknown and len(overrides) == 1:
            (problem,) = snapshot.problems(parse_cli(overrides).items())
            assert (problem.message, problem.suggestions) == (verdict["message"], verdict["suggestions"]), overrides
            same += 1
    assert same == 7


@pytest.mark.verl
@pytest.mark.parametrize("version", list(SPECS))
def test_committed_snapshot_is_what_the_real_verl_gives(verl_python, version):
    import verl_schema

    verl_python(version)
    committed = schema.snapshot_path(version).read_text(encoding="utf-8")
    assert verl_schema.generate(version) == committed, (
        f"{schema.snapshot_path(version).relative_to(REPO)} is stale: regenerate it with `make verl-schema`")


def test_every_pinned_verl_has_a_snapshot():
    for version, spec in SPECS.items():
        snapshot = schema.load(version)
        assert snapshot is not None and snapshot.verl == version
        # the keys the specs name exist in their own verl (a "+" key is one verl lacks, by definition)
        for key in (spec.critic_fsdp, spec.reward_path_key, spec.reward_name_key):
            assert not snapshot.problems([(key, "x")]), (version, key)


@pytest.mark.parametrize("name, profile", [(n, p) for n in list_recipes() for p in load_recipe(n).profiles])
def test_every_shipped_recipe_and_profile_plans(name, profile):
    assert key_problems(resolve(name, profile=profile, env={"WANDB_API_KEY": ""})) == []


def test_plan_rejects_a_misspelled_key_naming_source_and_nearest(capsys):
    code = main(["plan", "qwen2.5-3b-gsm8k-grpo-lora", "actor_rollout_ref.actor.ppo_micro_batchsize_per_gpu=2"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert ("error: command line: 'actor_rollout_ref.actor.ppo_micro_batchsize_per_gpu' is not a key of verl's "
            "config (hint: did you mean actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu") in err


def test_plan_names_the_real_key_of_a_misnomer_and_the_recipe_that_set_it(capsys, tmp_path, monkeypatch):
    assert main(["plan", "qwen2.5-0.5b-gsm8k-ppo", "trainer.save_total_limit=2"]) == 2
    assert "did you mean trainer.max_actor_ckpt_to_keep, trainer.max_critic_ckpt_to_keep?" in capsys.readouterr().err
    # set in a recipe file, the error names that recipe
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    path = tmp_path / "recipes" / "smoke-ppo.yaml"
    text = path.read_text()
    assert "\nverl:\n" in text
    path.write_text(text.replace("\nverl:\n", "\nverl:\n  trainer.totl_epochs: 2\n"))
    monkeypatch.setenv("RLRECIPES_HOME", str(tmp_path))
    assert main(["plan", "smoke-ppo"]) == 2
    err = capsys.readouterr().err
    assert "recipe smoke-ppo: 'trainer.totl_epochs' is not a key of verl's config" in err
    assert "did you mean trainer.total_epochs?" in err


def test_plan_allows_new_keys_with_plus(capsys):
    assert main(["plan", "qwen2.5-3b-gsm8k-grpo-lora", "+trainer.brand_new_key=1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recipe"] == "qwen2.5-3b-gsm8k-grpo-lora"


def test_plan_imports_neither_verl_nor_torch():
    code = ("import sys; from rlrecipes.cli import main; code = main(['plan', 'qwen2.5-3b-gsm8k-grpo-lora', "
            "'trainer.total_epoch=3']); heavy = [m for m in ('torch', 'verl', 'transformers') if m in sys.modules]; "
            "print(code, heavy)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.stdout.strip() == "2 []", proc.stdout + proc.stderr
