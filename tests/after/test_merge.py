"""`rlrecipes merge` on real verl checkpoints: a tiny LoRA run saved by verl's own FSDPCheckpointManager on
CPU (1-process gloo group), merged with verl's model_merger inside the verl venvs, fused with PEFT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.verl_checkpoint import build_checkpoint, run_merge

from rlrecipes.errors import RecipeError, StageFailed
from rlrecipes.after.merge import lora_alpha_for
from rlrecipes.verl.checkpoints import TRACKER_NAME as TRACKER
from rlrecipes.verl.checkpoint_ref import actor_complete, locate_checkpoint
from rlrecipes.watchdog.simulate import write_pt

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.verl
@pytest.mark.parametrize("version, fsdp", [("0.5.0", 1), ("0.8.0", 1), ("0.8.0", 2)])
def test_merge_fuses_lora_from_verl_checkpoint(run_in_verl, tmp_path, version, fsdp):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run_dir = build_checkpoint(run_in_verl, tmp_path, version, fsdp=fsdp)
    actor = run_dir / "global_step_2" / "actor"
    assert json.loads((actor / "fsdp_config.json").read_text())["FSDP_version"] == fsdp
    if version == "0.5.0":  # the fact this stage exists for: verl 0.5.0's own adapter file is empty
        assert (actor / "lora_adapter" / "adapter_model.safetensors").stat().st_size == 16
    else:
        assert json.loads((actor / "lora_train_meta.json").read_text())["lora_alpha"] == 8
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "console-20260101T000000Z.log").write_text(
        "(TaskRunner pid=7) step:0 - val-core/openai/gsm8k/reward/mean@1:0.125\n"
        "(TaskRunner pid=7) step:1 - critic/score/mean:0.5\n"
        "(TaskRunner pid=7) step:2 - critic/score/mean:0.625\n")
    out = tmp_path / "merged"
    argv = ["merge", str(run_dir), "--out", str(out), "--dtype", "fp32", "--log-dir", str(logs)]
    if version == "0.8.0":  # its checkpoint does not name the base model (0.5.0's PEFT config does)
        argv += ["--base", str(tmp_path / "base")]
    proc = run_merge(run_in_verl, version, argv)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "merged model ready" in proc.stdout

    merged = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
    base = AutoModelForCausalLM.from_pretrained(tmp_path / "base", torch_dtype=torch.float32)
    assert merged.dtype == torch.float32
    truth = torch.load(tmp_path / "lora_truth.pt")
    merged_sd, base_sd = merged.state_dict(), base.state_dict()
    targeted = set()
    for key in truth:
        if ".lora_A." not in key:
            continue
        module = key.split("base_model.model.", 1)[1].split(".lora_A.")[0]
        weight = f"{module}.weight"
        targeted.add(weight)
        # verl's merger hands the adapter over in bf16; PEFT fuses with scaling alpha / r = 8 / 4
        a = truth[key].to(torch.bfloat16).float()
        b = truth[key.replace("lora_A", "lora_B")].to(torch.bfloat16).float()
        delta = merged_sd[weight] - base_sd[weight]
        assert torch.allclose(delta, 2.0 * (b @ a), atol=1e-6), weight
        assert not torch.allclose(delta, b @ a, atol=1e-4), weight  # alpha 0 or alpha=r would give this
    assert len(targeted) == 6  # q, v, up in 2 layers
    for key, value in base_sd.items():
        if key not in targeted:
            assert torch.equal(merged_sd[key], value), key

    tokenizer = AutoTokenizer.from_pretrained(out)
    enc = tokenizer("Natalia sold 48 clips", return_tensors="pt", return_token_type_ids=False)
    generated = merged.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert generated.shape[1] == enc["input_ids"].shape[1] + 5

    adapter_cfg = json.loads((out / "lora_adapter" / "adapter_config.json").read_text())
    assert (adapter_cfg["r"], adapter_cfg["lora_alpha"]) == (4, 8)
    info = json.loads((out / "merge-info.json").read_text())
    assert info["step"] == 2 and info["lora"]["scaling"] == 2.0
    assert info["verification"]["changed_targeted"] == 6 and info["verification"]["changed_other"] == 0
    card = (out / "README.md").read_text()
    assert "| Step | 2 |" in card and "r=4, alpha=8" in card
    assert "| critic/score/mean | 0.6250 |" in card
    assert "val-core/openai/gsm8k/reward/mean@1 (step 0) | 0.1250 |" in card
    assert not list(tmp_path.glob(".merged.partial-*"))  # the work directory is gone


@pytest.mark.verl
def test_merge_refuses_a_zero_adapter(run_in_verl, tmp_path):
    run_dir = build_checkpoint(run_in_verl, tmp_path, "0.5.0", kind="zero")
    out = tmp_path / "merged"
    proc = run_merge(run_in_verl, "0.5.0", ["merge", str(run_dir), "--out", str(out)])
    assert proc.returncode == 1
    assert "adapter is zero" in proc.stderr
    assert not out.exists() and not list(tmp_path.glob(".merged.partial-*"))


@pytest.mark.verl
def test_merge_full_fine_tune(run_in_verl, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    run_dir = build_checkpoint(run_in_verl, tmp_path, "0.5.0", kind="full")
    out = tmp_path / "merged"
    proc = run_merge(run_in_verl, "0.5.0", ["merge", str(run_dir), "--step", "2", "--out", str(out),
                                            "--dtype", "fp32", "--base", str(tmp_path / "base")])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    merged = AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32).state_dict()
    truth = torch.load(tmp_path / "lora_truth.pt")
    for key, value in truth.items():
        # verl's merger gathers every tensor as bf16 (fsdp_model_merger.py), whatever the training dtype
        assert torch.equal(merged[key], value.to(torch.bfloat16).float()), key
    info = json.loads((out / "merge-info.json").read_text())
    assert info["lora"] is None and info["dtype"] == "float32"
    # every stored tensor moved in this "training" (lm_head is tied to the embeddings: not stored)
    assert info["verification"]["changed_other"] == info["verification"]["compared"] == len(merged) - 1
    assert not (out / "lora_adapter").exists()


def test_merge_needs_verl_in_this_interpreter(tmp_path, capsys):
    pytest.importorskip("transformers")
    import importlib.util

    if importlib.util.find_spec("verl") is not None:
        pytest.skip("verl is installed here")
    from rlrecipes.cli import main

    actor = make_actor(tmp_path / "run" / "global_step_1" / "actor")
    (actor / "huggingface" / "config.json").write_text('{"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}')
    assert main(["merge", str(tmp_path / "run" / "global_step_1"), "--out", str(tmp_path / "o")]) == 1
    assert "model_merger is not importable" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# -- locating checkpoints (pure filesystem) ---------------------------------------------------------

def make_actor(actor: Path, world: int = 2, ranks=None, fsdp_config: bool = True) -> Path:
    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text("{}")
    for rank in (range(world) if ranks is None else ranks):
        write_pt(actor / f"model_world_size_{world}_rank_{rank}.pt", 64)  # a zip, like torch.save's
    if fsdp_config:
        (actor / "fsdp_config.json").write_text('{"FSDP_version": 1, "world_size": 2}')
    return actor


@pytest.mark.parametrize("tracker, step, expected_step, error", [
    ("3", "latest", 3, None),
    ("3\n", "latest", 3, None),
    (None, "latest", None, "no usable latest_checkpointed_iteration.txt"),
    ("", "latest", None, "no usable latest_checkpointed_iteration.txt"),
    ("9", "latest", None, "step 9 not on disk"),
    (None, "2", 2, None),
    ("3", "2", 2, None),
    ("3", "7", None, "step 7 not on disk"),
    ("3", "two", None, "--step must be a number"),
])
def test_locate_checkpoint_in_run_dir(tmp_path, tracker, step, expected_step, error):
    for n in (2, 3):
        make_actor(tmp_path / f"global_step_{n}" / "actor")
    if tracker is not None:
        (tmp_path / TRACKER).write_text(tracker)
    if error:
        with pytest.raises(RecipeError, match=error) as info:
            locate_checkpoint(tmp_path, step)
        if "not on disk" in error or "tracker" in error:
            assert "2, 3" in str(info.value)
        return
    ref = locate_checkpoint(tmp_path, step)
    assert ref.step == expected_step
    assert ref.actor_dir == tmp_path / f"global_step_{expected_step}" / "actor"
    assert ref.run_dir == tmp_path


def test_locate_checkpoint_step_or_actor_dir(tmp_path):
    actor = make_actor(tmp_path / "global_step_5" / "actor")
    assert locate_checkpoint(tmp_path / "global_step_5").step == 5
    assert locate_checkpoint(actor).actor_dir == actor
    with pytest.raises(RecipeError, match="checkpoint directory not found"):
        locate_checkpoint(tmp_path / "nope")


@pytest.mark.parametrize("kwargs, why", [
    ({}, ""),
    ({"ranks": [0]}, "missing shard(s) for rank(s) [1] of 2"),
    ({"fsdp_config": False}, "no fsdp_config.json"),
    ({"ranks": []}, "no model_world_size_*_rank_*.pt shards"),
])
def test_actor_complete(tmp_path, kwargs, why):
    actor = make_actor(tmp_path / "actor", **kwargs)
    ok, message = actor_complete(actor)
    assert ok == (why == "") and message.startswith(why) and bool(message) == bool(why)


def test_a_truncated_shard_is_refused_before_verls_merger(tmp_path, capsys):
    from rlrecipes.cli import main

    actor = make_actor(tmp_path / "run" / "global_step_4" / "actor")
    (tmp_path / "run" / TRACKER).write_text("4")
    shard = actor / "model_world_size_2_rank_1.pt"
    shard.write_bytes(shard.read_bytes()[:-30])  # the disk filled up mid-save
    assert actor_complete(actor) == (False, "model_world_size_2_rank_1.pt is truncated (not a whole torch.save "
                                            "archive)")
    assert main(["merge", str(tmp_path / "run"), "--out", str(tmp_path / "merged")]) == 2
    err = capsys.readouterr().err
    assert "incomplete actor checkpoint: model_world_size_2_rank_1.pt is truncated" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def _fence_case(tmp_path, case):
    run = tmp_path / "ckpt" / "run"
    for n in (1, 2):
        make_actor(run / f"global_step_{n}" / "actor")
    (run / TRACKER).write_text("2")
    (run / "notes.txt").write_text("mine")
    base = tmp_path / "models" / "base"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "thesis.tex").write_text("years of work")
    out = {"run dir": run, "inside the run dir": run / "merged", "a step dir": run / "global_step_2",
           "inside a step": run / "global_step_2" / "actor" / "merged", "contains the run": tmp_path / "ckpt",
           "the base model": base, "inside the base model": base / "merged",
           "an unrelated full directory": tmp_path / "other", "a file": tmp_path / "other" / "thesis.tex"}[case]
    return run, base, out


@pytest.mark.parametrize(("case", "message"), [
    ("run dir", "--out is the run directory"),
    ("inside the run dir", "--out lies inside the run directory"),
    ("a step dir", "--out is the checkpoint"),
    ("inside a step", "--out lies inside the run directory"),
    ("contains the run", "--out contains the run directory"),
    ("the base model", "--out is the base model"),
    ("inside the base model", "--out lies inside the base model"),
    ("an unrelated full directory", "--force replaces only an empty directory or an earlier merge output"),
    ("a file", "--out exists and is not a directory"),
])
def test_merge_never_deletes_the_run_or_anything_not_a_merge(tmp_path, capsys, case, message):
    """`merge RUN --out RUN --force` exited 0 after deleting every global_step_* and notes.txt."""
    from rlrecipes.cli import main

    run, base, out = _fence_case(tmp_path, case)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert main(["merge", str(run), "--out", str(out), "--force", "--base", str(base)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert (run / "notes.txt").read_text() == "mine"


def test_incomplete_actor_is_refused(tmp_path):
    make_actor(tmp_path / "global_step_4" / "actor", ranks=[1])
    (tmp_path / TRACKER).write_text("4")
    with pytest.raises(RecipeError, match=r"incomplete actor checkpoint: missing shard\(s\) for rank\(s\) \[0\]"):
        locate_checkpoint(tmp_path)


# -- LoRA alpha: what training used, never verl's merged adapter config ----------------------------

@pytest.mark.parametrize("files, cli, recipe, expected", [
    ({"lora_train_meta.json": {"r": 8, "lora_alpha": 16}}, None, 32, (16.0, "lora_train_meta.json")),
    ({"lora_adapter/adapter_config.json": {"r": 8, "lora_alpha": 32}}, None, None, (32.0, "adapter_config.json")),
    ({"lora_adapter/adapter_config.json": {"r": 8, "lora_alpha": 0}}, None, 16, (16.0, "recipe")),
    ({}, None, 16, (16.0, "recipe")),
    ({"lora_train_meta.json": {"r": 8, "lora_alpha": 16}}, 4.0, None, (4.0, "--lora-alpha")),
    ({}, None, None, RecipeError),
    ({"lora_train_meta.json": {"r": 64, "lora_alpha": 32}}, None, None, StageFailed),
])
def test_lora_alpha_for(tmp_path, files, cli, recipe, expected):
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(json.dumps(data))
    if isinstance(expected, type):
        with pytest.raises(expected):
            lora_alpha_for(tmp_path, 8, cli, recipe)
        return
    alpha, source = lora_alpha_for(tmp_path, 8, cli, recipe)
    assert alpha == expected[0] and expected[1] in source


# -- recipe context and dtype ---------------------------------------------------------------------

@pytest.mark.parametrize("run_name, explicit, expected", [
    ("qwen2.5-3b-gsm8k-grpo-lora", None, ("qwen2.5-3b-gsm8k-grpo-lora", "bf16", 32.0, "Qwen2.5-3B-Instruct")),
    ("qwen2.5-0.5b-gsm8k-ppo", None, ("qwen2.5-0.5b-gsm8k-ppo", "fp32", None, "Qwen2.5-0.5B-Instruct")),
    ("my-run", "smoke-grpo-lora", ("smoke-grpo-lora", "fp32", 16.0, "smoke-tiny")),
    ("my-run", None, (None, None, None, None)),
])
def test_recipe_context(tmp_path, monkeypatch, run_name, explicit, expected):
    from rlrecipes.after.merge import recipe_context

    monkeypatch.setenv("MODELS_DIR", str(tmp_path / "models"))
    ctx = recipe_context(explicit, tmp_path / run_name)
    got = (ctx.name, ctx.dtype, ctx.lora_alpha, ctx.model_path.name if ctx.model_path else None)
    assert got == expected
    if ctx.model_path:
        assert ctx.model_path.parent == tmp_path / "models"


def test_recipe_context_unknown_explicit_recipe(tmp_path):
    from rlrecipes.after.merge import recipe_context

    with pytest.raises(RecipeError):
        recipe_context("no-such-recipe", tmp_path)


@pytest.mark.parametrize("requested, recipe_dtype, config_dtype, expected", [
    ("auto", "fp32", "bfloat16", "float32"),
    ("auto", "bf16", "float32", "bfloat16"),
    ("auto", None, "float32", "float32"),
    ("auto", None, None, "bfloat16"),
    ("fp16", "fp32", "float32", "float16"),
])
def test_resolve_dtype(requested, recipe_dtype, config_dtype, expected):
    from rlrecipes.after.merge import RecipeContext, resolve_dtype

    assert resolve_dtype(requested, RecipeContext(dtype=recipe_dtype), config_dtype) == expected


def test_existing_output_needs_force(tmp_path):
    from rlrecipes.after.merge import merge_checkpoint
    from rlrecipes.verl.checkpoint_ref import CheckpointRef

    pytest.importorskip("transformers")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    ref = CheckpointRef(tmp_path / "run", 1, make_actor(tmp_path / "run" / "global_step_1" / "actor"))
    with pytest.raises(RecipeError, match="output directory exists"):
        merge_checkpoint(ref, out)
    assert (out / "keep.txt").read_text() == "x"


def test_force_replaces_an_earlier_merge_or_an_empty_directory(tmp_path):
    from rlrecipes.after.merge_output import check_output
    from rlrecipes.verl.checkpoint_ref import CheckpointRef

    ref = CheckpointRef(tmp_path / "run", 1, make_actor(tmp_path / "run" / "global_step_1" / "actor"))
    earlier, empty = tmp_path / "merged", tmp_path / "empty"
    earlier.mkdir()
    (earlier / "merge-info.json").write_text("{}")
    (earlier / "model.safetensors").write_text("old")
    empty.mkdir()
    for out in (earlier, empty, tmp_path / "new"):
        check_output(out, ref, [], force=True)  # no error: these may be replaced
    with pytest.raises(RecipeError, match="output directory exists"):
        check_output(earlier, ref, [], force=False)


# -- the fused model reproduces base + adapter (no verl needed) --------------------------------------

def _tiny_base_and_adapter(tmp_path: Path, b_scale: float) -> tuple[Path, Path]:
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                         max_position_embeddings=64)
    base_dir = tmp_path / "base"
    Qwen2ForCausalLM(config).save_pretrained(base_dir)
    model = get_peft_model(Qwen2ForCausalLM.from_pretrained(base_dir),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], bias="none"))
    state = {}
    for name, param in model.named_parameters():
        if "lora_" in name:
            value = param.detach().clone() if "lora_A" in name else torch.randn_like(param) * b_scale
            state[name.replace(".default.weight", ".weight")] = value.contiguous()
    adapter = tmp_path / "verl_adapter"
    adapter.mkdir()
    save_file(state, str(adapter / "adapter_model.safetensors"))
    return base_dir, adapter


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_logits_equal_base_plus_adapter_and_differ_from_base(tmp_path, dtype):
    import torch

    from rlrecipes.after.lora_fuse import check_fused_logits, fuse_lora

    base_dir, adapter = _tiny_base_and_adapter(tmp_path, b_scale=0.1)
    (tmp_path / "work").mkdir()
    model, _, reference = fuse_lora(base_dir, adapter, 4, 8.0, ["q_proj", "v_proj"], tmp_path / "work")
    result = check_fused_logits(model.to(getattr(torch, dtype)), reference, dtype)
    assert result["max_rel_error_vs_base_plus_adapter"] <= result["tolerance"]
    assert result["max_rel_adapter_effect"] > 10 * result["tolerance"]


def test_a_fuse_that_does_not_reproduce_the_adapter_is_refused(tmp_path):
    import torch

    from rlrecipes.after.lora_fuse import check_fused_logits, fuse_lora

    base_dir, adapter = _tiny_base_and_adapter(tmp_path, b_scale=0.1)
    (tmp_path / "work").mkdir()
    model, _, reference = fuse_lora(base_dir, adapter, 4, 8.0, ["q_proj", "v_proj"], tmp_path / "work")
    with torch.no_grad():  # what alpha 0 (verl 0.5's merged adapter config) would have given: the base
        for module in model.modules():
            if hasattr(module, "q_proj"):
                module.q_proj.weight.add_(torch.randn_like(module.q_proj.weight) * 0.5)
    with pytest.raises(StageFailed, match="differ from base \\+ adapter"):
        check_fused_logits(model, reference, "float32")


def test_a_merged_model_equal_to_the_base_is_refused(tmp_path):
    from rlrecipes.after.lora_fuse import check_fused_logits, fuse_lora

    base_dir, adapter = _tiny_base_and_adapter(tmp_path, b_scale=0.0)  # an untrained adapter: B = 0
    (tmp_path / "work").mkdir()
    model, _, reference = fuse_lora(base_dir, adapter, 4, 8.0, ["q_proj", "v_proj"], tmp_path / "work")
    with pytest.raises(StageFailed, match="the merged model is the base model"):
        check_fused_logits(model, reference, "float32")


# A merge as far as its work directory: claims OUT the way merge_checkpoint does, makes the work dir with
# merge's own prefix, writes into it, says where, then waits (to be killed, or to hold the claim).
HALF_MERGE = r'''
import sys, tempfile, time
from pathlib import Path
from rlrecipes.fsutil import PARTIAL_PREFIX, claim_output
out = Path(sys.argv[1])
claim = claim_output(out, "merge")
work = Path(tempfile.mkdtemp(prefix=PARTIAL_PREFIX.format(name=out.name), dir=out.parent))
(work / "verl_merged").mkdir()
(work / "verl_merged" / "model.safetensors").write_bytes(b"half" * 1000)
print(work, flush=True)
time.sleep(600)
'''


def _half_merge(out: Path):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", HALF_MERGE, str(out)], stdout=subprocess.PIPE, text=True,
                            env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    return proc, Path(proc.stdout.readline().strip())


def test_the_next_merge_removes_what_a_killed_merge_left_and_spares_a_live_one(tmp_path, capsys):
    import signal

    from rlrecipes.fsutil import claim_output

    models = tmp_path / "models"
    models.mkdir()
    killed, killed_work = _half_merge(models / "merged")
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    live, live_work = _half_merge(models / "other")  # another output's merge, still running
    # not work dirs of "merged": another output's (named like one), a look-alike, a user's file
    decoys = [models / ".merged.partial-x.partial-abcd1234", models / ".merged.partialXabcd1234"]
    for decoy in decoys:
        decoy.mkdir()
    (models / "notes.txt").write_text("keep\n")
    try:
        assert killed_work.is_dir() and live_work.is_dir()
        claim = claim_output(models / "merged", "merge")
        try:
            assert not killed_work.exists(), "the killed merge's work directory is still there"
            err = capsys.readouterr().err
            assert err == (f"removed {killed_work}: the work directory of an earlier merge into merged that did "
                           "not finish\n")
            assert live_work.is_dir() and all(d.is_dir() for d in decoys)
            assert (models / "notes.txt").read_text() == "keep\n"
        finally:
            claim.close()
        # the live merge keeps its claim: a second merge into its output is refused, its work left alone
        with pytest.raises(StageFailed, match=rf"another merge is writing this output \(pid {live.pid}\)") as info:
            claim_output(models / "other", "merge")
        assert info.value.exit_code == 1
        assert (live_work / "verl_merged" / "model.safetensors").stat().st_size == 4000
    finally:
        live.kill()
        live.wait(timeout=30)
    # its claim died with it: now its work directory is stale too
    claim_output(models / "other", "merge").close()
    assert not live_work.exists()
