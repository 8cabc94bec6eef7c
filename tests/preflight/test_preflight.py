"""Preflight doctor: a corpus of known-bad set-ups (inventory JSON + recipe overrides + host facts), each
caught by the right check with its specific message; the shipped recipes pass on their hardware; the
inventory readers and the host-facts gatherer against real inputs (nvidia-smi text, a real tmpfs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.require import skip_or_fail

from rlrecipes.cli import main
from rlrecipes.errors import RecipeError
from rlrecipes.plan.architectures import ARCHITECTURES
from rlrecipes.preflight.chat import ChatTokenizer
from rlrecipes.preflight.checks import CHECK_NAMES, Context, offline_env, run_checks
from rlrecipes.preflight.host import DiskFacts, HostFacts, gather_host_facts, wandb_netrc_login
from rlrecipes.preflight.inventory import Inventory, inventory_from_dict, load_inventory, parse_smi_csv
from rlrecipes.recipe.load import resolve

REPO = Path(__file__).resolve().parents[2]
INV = REPO / "tests" / "fixtures" / "inventories"
GIB = 1024 ** 3
TIB = 1024 * GIB


# ----------------------------------------------------------------------------------- fixtures
def write_model_dir(path: Path, arch_name: str, chat_template: bool = True, merges: bool = True) -> Path:
    """A model directory as `rlrecipes model` leaves it: the real architecture's config.json, a
    weights file, a byte-level BPE tokenizer.json with Qwen's special tokens and a chat template.
    merges=False: no BPE merges at all, so a text's token count is its UTF-8 byte count (plus one per
    special token) -- token counts a test can work out by hand."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from support.tinytok import CHAT_TEMPLATE, DEFAULT_CORPUS, SPECIAL_TOKENS

    arch = ARCHITECTURES[arch_name]
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "num_hidden_layers": arch.layers,
        "hidden_size": arch.hidden, "intermediate_size": arch.intermediate, "num_attention_heads": arch.heads,
        "num_key_value_heads": arch.kv_heads, "vocab_size": arch.vocab, "tie_word_embeddings": arch.tie_embeddings,
        "max_position_embeddings": arch.max_position}))
    (path / "model.safetensors").write_bytes(b"\0" * 64)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=400 if merges else len(alphabet) + len(SPECIAL_TOKENS),
                                  special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(DEFAULT_CORPUS, trainer)
    tok.save(str(path / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "model_max_length": 32768}
    if chat_template:
        config["chat_template"] = CHAT_TEMPLATE
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def write_data_dir(path: Path, questions: list[str]) -> Path:
    from rlrecipes.data.gsm8k import write_dataset

    rows = [{"question": q, "answer": f"step\n#### {i}"} for i, q in enumerate(questions)]
    write_dataset({"train": rows, "test": rows[:2]}, path, source="test")
    return path


QUESTIONS = ["Natalia sold clips to 48 of her friends in April. How many clips did she sell?",
             "Weng earns $12 an hour for babysitting. How much did she earn?",
             "What is 2 + 2?"]


def run_for(tmp_path: Path, recipe: str, profile: str | None = None, overrides: list[str] | None = None,
            env: dict | None = None):
    base = {"MODELS_DIR": str(tmp_path / "models"), "DATA_DIR": str(tmp_path / "data"),
            "CKPT_DIR": str(tmp_path / "ckpt"), "LOG_DIR": str(tmp_path / "logs")}
    return resolve(recipe, profile=profile, overrides=overrides or [], env={**base, **(env or {})})


def host_for(run, free: float = 10 * TIB, shm: int | None = 16 * GIB, ram: int = 512 * GIB,
             ram_available: int | None = None, nofile: int | None = 1048576, memlock: int | None = None,
             env: dict | None = None, netrc: bool = False, watchdog: dict | None = None,
             ports: tuple[int, int] | None = (10240, 65535), tw_reuse: int | None = 1) -> HostFacts:
    """A healthy host unless told otherwise; every path the run writes lies on one filesystem."""
    paths = [run.ckpt_dir, run.model_path, run.get("data.train_files")]
    disk = {str(p): DiskFacts(str(p), "/workspace", int(free), int(20 * TIB), 42) for p in paths}
    return HostFacts(disk=disk, shm_bytes=shm, ram_total_bytes=ram, ram_available_bytes=ram_available or ram,
                     nofile_soft=nofile, memlock_soft=memlock, env=env or {}, wandb_netrc=netrc, watchdog=watchdog,
                     port_range=ports, tw_reuse=tw_reuse)


def checks_by_name(run, inventory: Inventory, host: HostFacts) -> dict:
    return {c.name: c for c in run_checks(run, inventory, host)}


def inv(name: str) -> Inventory:
    return load_inventory(INV / f"{name}.json")


def save_steps(experiment: Path, steps: list[int], tracker: int | None, critic: bool = False) -> None:
    from rlrecipes.watchdog.simulate import save_checkpoint

    for step in steps:
        save_checkpoint(experiment, step, world_size=1, shard_bytes=1024, critic=critic, tracker=False)
    if tracker is not None:
        (experiment / "latest_checkpointed_iteration.txt").write_text(str(tracker))


PPO, GRPO = "qwen2.5-0.5b-gsm8k-ppo", "qwen2.5-3b-gsm8k-grpo-lora"
ONE_GRPO_CKPT = None  # filled lazily: bytes of one checkpoint of the GRPO recipe


def grpo_checkpoint_bytes(tmp_path: Path) -> int:
    from rlrecipes.plan.plan import build_plan

    return build_plan(run_for(tmp_path, GRPO)).checkpoints.bytes_per_checkpoint


# ------------------------------------------------------------------------ the bad set-up corpus
# (id, recipe, profile, overrides, inventory, host changes, check, status, message fragments)
CORPUS = [
    ("bf16-on-p40", PPO, None, ["+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=bf16"], "p40x1", {},
     "compute-dtype", "fail", ["bf16 needs compute capability >= 8.0", "Tesla P40 is sm_61", "actor"]),
    ("bf16-profile-on-p40", "smoke-grpo-lora", "any-1gpu-vllm", [], "p40x1", {},
     "compute-dtype", "fail", ["bf16 needs compute capability >= 8.0", "sm_61"]),
    ("bf16-on-v100", GRPO, None, [], "v100-x4", {},
     "compute-dtype", "fail", ["Tesla V100-SXM2-32GB is sm_70: actor, rollout would compute in bf16"]),
    ("flash-attn-on-v100", GRPO, None, [], "v100-x4", {},
     "attention", "fail", ["FlashAttention-2 needs compute capability >= 8.0", "Tesla V100-SXM2-32GB is sm_70"]),
    ("vllm-override-on-p40-image", PPO, None, ["actor_rollout_ref.rollout.name=vllm"], "p40x1", {},
     "rollout-engine", "fail", ["rollout engine 'vllm' is not installed in image 'p40'"]),
    ("vllm-on-p40-gpu", "smoke-grpo-lora", "any-1gpu-vllm", [], "p40x1", {},
     "rollout-engine", "fail", ["vLLM needs compute capability >= 7.0", "Tesla P40 is sm_61"]),
    ("hf-rollout-on-verl-0.8", "smoke-grpo-lora", "any-1gpu-vllm", ["actor_rollout_ref.rollout.name=hf"],
     "rtx3090-x1", {}, "rollout-engine", "fail", ["HF generate rollout exists only in verl <= 0.5.0"]),
    ("4-gpus-on-2-gpu-host", GRPO, None, [], "a100-40gb-x2", {},
     "gpu-count", "fail", ["needs 4 GPUs per node", "this host has 2"]),
    ("tp4-on-2-gpus", GRPO, None, ["trainer.n_gpus_per_node=2", "actor_rollout_ref.rollout.tensor_model_parallel_size=4"],
     "a100-40gb-x2", {}, "tensor-parallel", "fail", ["tensor parallel 4 needs 4 GPUs on one node, this host has 2"]),
    ("3b-full-ft-critic-hf-on-p40", GRPO, "p40-24gb", ["algorithm.adv_estimator=gae", "actor_rollout_ref.model.lora_rank=0",
                                                        "actor_rollout_ref.actor.use_kl_loss=false",
                                                        "data.train_batch_size=16", "actor_rollout_ref.rollout.n=1",
                                                        "actor_rollout_ref.actor.ppo_mini_batch_size=16"],
     "p40x1", {}, "gpu-memory", "fail", ["GiB per GPU at peak", "> 24.0 GiB on Tesla P40", "Adam"]),
    ("3b-full-ft-critic-vllm-on-24gb", GRPO, "any-1gpu-vllm", ["algorithm.adv_estimator=gae",
                                                               "actor_rollout_ref.model.lora_rank=0"],
     "rtx3090-x1", {}, "gpu-memory", "fail", ["vllm takes gpu_memory_utilization 0.40", "does not fit in the other"]),
    ("vllm-share-too-big-on-40gb", GRPO, None, ["actor_rollout_ref.rollout.gpu_memory_utilization=0.97"],
     "a100-40gb-x4", {}, "gpu-memory", "fail", ["gpu_memory_utilization 0.97 x 40 GiB", "does not fit"]),
    ("64mb-shm-4-gpus", GRPO, None, [], "a100-80gb-x4", {"shm": 64 * 1024 * 1024},
     "shm", "fail", ["/dev/shm is 64.0 MiB", "NCCL between 4 GPUs"]),
    ("64mb-shm-1-gpu", PPO, None, [], "p40x1", {"shm": 64 * 1024 * 1024},
     "shm", "warn", ["/dev/shm is 64.0 MiB", "Ray's object store falls back to /tmp"]),
    ("room-for-one-checkpoint-keeps-3", GRPO, None, ["trainer.total_epochs=15"], "a100-80gb-x4", {"free_checkpoints": 1.2},
     "disk", "fail", ["3 kept + 1 in flight", "free"]),
    ("watchdog-quota-too-small", GRPO, None, [], "a100-80gb-x4", {"quota_checkpoints": 2.5},
     "disk", "fail", ["the watchdog's quota leaves"]),
    ("missing-model-dir", PPO, None, [], "p40x1", {},
     "model", "fail", ["Qwen2.5-0.5B-Instruct does not exist"]),
    ("wandb-without-key", GRPO, None, ["trainer.logger=[console,wandb]"], "a100-80gb-x4", {},
     "tracking", "warn", ["no WANDB_API_KEY", "WANDB_MODE=offline will be used"]),
    ("tracker-at-deleted-step", PPO, None, [], "p40x1", {"ckpt": ([2, 3], 4)},
     "tracker", "fail", ["names step 4, whose directory is gone", "set to step 3"]),
    ("tracker-no-complete-checkpoint", PPO, None, [], "p40x1", {"ckpt": ([], 6)},
     "tracker", "fail", ["no complete checkpoint exists"]),
    ("driver-470-for-cuda-12.8", GRPO, None, [], "a100-80gb-x4-driver470", {},
     "driver", "fail", ["driver 470.256.02 is too old for CUDA 12.8.1", "needs driver >= 525"]),
    ("driver-535-minor-compat", GRPO, None, [], "a100-40gb-x4", {"driver": "535.183.01"},
     "driver", "warn", ["minor-version compatibility"]),
    ("a100-image-on-p40", "smoke-grpo-lora", "any-1gpu-vllm", [], "p40x1", {},
     "image-arch", "fail", ["has no kernels for sm_61"]),
    ("torch-compile-on-p40", PPO, None, ["actor_rollout_ref.actor.use_torch_compile=true"], "p40x1", {},
     "triton", "fail", ["Triton needs compute capability >= 7.0", "torch.compile"]),
    # remove-padding-on-p40 is refused before preflight now (tests/recipe/test_packing.py: qwen2.5-0.5b on p40-24gb)
    ("flash-attn-override-on-p40", PPO, None,
     ["+actor_rollout_ref.model.override_config._attn_implementation=flash_attention_2"], "p40x1", {},
     "attention", "fail", ["FlashAttention-2 needs compute capability >= 8.0"]),
    ("open-files-1024", GRPO, None, [], "a100-80gb-x4", {"nofile": 1024},
     "ulimits", "fail", ["open files limit is 1024"]),
    ("memlock-64k-multi-gpu", GRPO, None, [], "a100-80gb-x4", {"memlock": 65536},
     "ulimits", "warn", ["memlock limit 64.0 KiB"]),
    ("default-port-range-hopper", GRPO, "h200-141gb", [], "h200-x1", {"ports": (32768, 60999)},
     "ports", "warn", ["ephemeral port range 32768-60999 holds 28232 ports", "verl 0.9.1's TransferQueue",
                       "[Errno 98] Address already in use"]),
    ("8gb-host-ram-p40", PPO, None, [], "p40x1", {"ram": 8 * GIB},
     "host-ram", "fail", ["but the host has 8.0 GiB", "Adam state offloaded"]),
    ("no-gpu-at-all", PPO, None, [], None, {},
     "gpu-inventory", "fail", ["no GPU detected"]),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c[0] for c in CORPUS])
def test_known_bad_setup_is_caught(case, tmp_path):
    _id, recipe, profile, overrides, inventory, changes, check, status, fragments = case
    run = run_for(tmp_path, recipe, profile, overrides)
    inventory_obj = inv(inventory) if inventory else Inventory([], source="none", error="test: no GPU")
    if "driver" in changes:
        inventory_obj.driver_version = changes["driver"]
        inventory_obj.cuda_driver_version = None
    host_kwargs = {k: changes[k] for k in ("shm", "nofile", "memlock", "ram", "ports") if k in changes}
    if "free_checkpoints" in changes:
        host_kwargs["free"] = changes["free_checkpoints"] * grpo_checkpoint_bytes(tmp_path)
    if "quota_checkpoints" in changes:
        host_kwargs["watchdog"] = {"status": "ckpt/.watchdog/status.json", "root_bytes": 0,
                                   "quota_bytes": int(changes["quota_checkpoints"] * grpo_checkpoint_bytes(tmp_path))}
    if "ckpt" in changes:
        steps, tracker = changes["ckpt"]
        run.ckpt_dir.mkdir(parents=True)
        save_steps(run.ckpt_dir, steps, tracker, critic=run.use_critic)
    results = checks_by_name(run, inventory_obj, host_for(run, **host_kwargs))
    got = results[check]
    assert got.status == status, got
    for fragment in fragments:
        assert fragment in got.message, (fragment, got.message)
    assert got.fix, "every warn/fail names its fix"


def test_corpus_is_large_and_distinct():
    assert len(CORPUS) >= 15
    assert len({c[0] for c in CORPUS}) == len(CORPUS)
    assert len({c[6] for c in CORPUS}) >= 12  # many different checks are exercised


def _healthy_assets(tmp_path: Path, run) -> None:
    write_model_dir(run.model_path, "qwen2.5-3b" if "3B" in str(run.model_path) else "qwen2.5-0.5b")
    write_data_dir(run.data_dir, QUESTIONS)


@pytest.mark.parametrize("recipe,inventory", [(GRPO, "a100-80gb-x4"), (PPO, "p40x1"), (GRPO, "h100-x8")])
def test_shipped_recipes_pass_on_their_hardware(recipe, inventory, tmp_path):
    profile = "h100-80gb" if inventory == "h100-x8" else None
    run = run_for(tmp_path, recipe, profile)
    _healthy_assets(tmp_path, run)
    results = run_checks(run, inv(inventory), host_for(run))
    assert [c.name for c in results] == CHECK_NAMES
    bad = [c for c in results if c.status != "pass"]
    assert bad == [], bad


def test_override_on_command_line_is_seen(tmp_path):
    """The same P40 run passes until a command-line override switches the rollout to vLLM."""
    good = checks_by_name(run_for(tmp_path, PPO), inv("p40x1"), host_for(run_for(tmp_path, PPO)))
    assert good["rollout-engine"].status == "pass"
    run = run_for(tmp_path, PPO, overrides=["actor_rollout_ref.rollout.name=vllm"])
    assert checks_by_name(run, inv("p40x1"), host_for(run))["rollout-engine"].status == "fail"


def test_disk_passes_with_room_and_counts_existing_checkpoints(tmp_path):
    run = run_for(tmp_path, GRPO)
    one = grpo_checkpoint_bytes(tmp_path)
    write_model_dir(run.model_path, "qwen2.5-3b")  # no data dir: the schedule uses GSM8K's known size
    ok = checks_by_name(run, inv("a100-80gb-x4"), host_for(run, free=4 * one + GIB))["disk"]
    # 5 epochs = 35 steps: saves at 20 and 35, so only 2 are ever kept although the recipe allows 3
    assert ok.status == "pass" and "2 kept + 1 in flight" in ok.message
    run = run_for(tmp_path, GRPO, overrides=["trainer.total_epochs=15"])
    tight = checks_by_name(run, inv("a100-80gb-x4"), host_for(run, free=3.5 * one))["disk"]
    assert tight.status == "fail" and "trainer.max_actor_ckpt_to_keep=2" in tight.fix
    no_saves = run_for(tmp_path, GRPO, overrides=["trainer.save_freq=-1"])
    assert checks_by_name(no_saves, inv("a100-80gb-x4"), host_for(no_saves, free=GIB))["disk"].status == "pass"


def _checkpoint_term(check) -> str:
    """The checkpoints' term of the disk check's "needs ..." message: 'what) SIZE'."""
    import re

    return re.search(r"checkpoints \((.*\) [\d.]+ \S+) \+ base model", check.message)[1]


@pytest.mark.parametrize("watchdog_keep, held", [(None, 2), (1, 1), (2, 2)])
def test_disk_counts_the_checkpoints_a_resume_leaves_behind(tmp_path, watchdog_keep, held):
    """A resume: verl prunes only what its own launch saved, so a checkpoint an earlier launch wrote stays beside the
    new ones (seen on the GPU: docs/bench/gpu-reliability.md, the seventh sitting) -- unless the watchdog's
    --keep-last removes it. The canary keeps 1: without the watchdog the disk holds the old one, the kept one and the
    one in flight (3); with --keep-last 1 or 2, 1 or 2 besides the one in flight. The check asks for that much more
    than is on disk (before: the old one was counted as one of the kept, and the resume was short by one)."""
    from rlrecipes.fsutil import human_bytes
    from rlrecipes.plan.plan import build_plan

    run = run_for(tmp_path, "canary-grpo-lora", "any-1gpu-hopper")
    one = build_plan(run).checkpoints.bytes_per_checkpoint
    step = run.ckpt_dir / "global_step_30" / "actor"
    step.mkdir(parents=True)
    (step / "model_world_size_1_rank_0.pt").write_bytes(b"\1" * one)
    watchdog = None if watchdog_keep is None else {"status": "ckpt/.watchdog/status.json", "root_bytes": None,
                                                    "quota_bytes": None, "keep_last": watchdog_keep}
    disk = checks_by_name(run, inv("h100-x8"), host_for(run, watchdog=watchdog))["disk"]
    on_disk = sum(f.stat().st_blocks * 512 for f in step.iterdir())
    term = _checkpoint_term(disk)
    assert term.endswith(f") {human_bytes((held + 1) * one - on_disk)}"), term  # held, and the one in flight
    assert ("1 already on disk, which stay: verl prunes only what this launch saves" in term if watchdog_keep is None
            else f"1 already on disk (the watchdog keeps the last {watchdog_keep})" in term)


@pytest.mark.parametrize("recipe, profile, inventory, ports, status, said", [
    # the Hopper stack (verl 0.9.1, TransferQueue): room for two canaries' TIME_WAIT ports, or a warning
    ("canary-ppo", "any-1gpu-hopper", "h200-x1", (32768, 60999), "warn", "holds 28232 ports"),
    ("canary-ppo", "any-1gpu-hopper", "h200-x1", (10240, 65535), "pass", "10240-65535 (55296 ports)"),
    ("canary-ppo", "any-1gpu-hopper", "h200-x1", None, "pass", "not readable"),
    # verl 0.5.0 and 0.8.0 trainers move their data through Ray, not TransferQueue: the default range is fine
    (PPO, None, "p40x1", (32768, 60999), "pass", "verl 0.5.0 moves no data through TransferQueue"),
    (GRPO, None, "a100-80gb-x4", (32768, 60999), "pass", "verl 0.8.0 moves no data through TransferQueue"),
])
def test_the_port_range_is_checked_where_transferqueue_runs(tmp_path, recipe, profile, inventory, ports, status,
                                                              said):
    run = run_for(tmp_path, recipe, profile)
    got = checks_by_name(run, inv(inventory), host_for(run, ports=ports))["ports"]
    assert got.status == status and said in got.message, got
    assert (got.fix == 'sysctl -w net.ipv4.ip_local_port_range="10240 65535" (compose.yaml sets it per container)'
            if status == "warn" else not got.fix)


RANGE_FIX = 'sysctl -w net.ipv4.ip_local_port_range="10240 65535" (compose.yaml sets it per container)'
REUSE_FIX = "sysctl -w net.ipv4.tcp_tw_reuse=1 (compose.yaml sets it per container)"


@pytest.mark.parametrize("ports, reuse, status, said, fix", [
    # the kernel's default (2: loopback only): TransferQueue's connections to Ray's node address spill
    ((10240, 65535), 2, "warn", "net.ipv4.tcp_tw_reuse is 2", REUSE_FIX),
    ((10240, 65535), 0, "warn", "net.ipv4.tcp_tw_reuse is 0", REUSE_FIX),
    ((32768, 60999), 2, "warn", "holds 28232 ports", f"{RANGE_FIX}; {REUSE_FIX}"),
    ((10240, 65535), 1, "pass", "10240-65535 (55296 ports), tcp_tw_reuse 1", ""),
    ((10240, 65535), None, "pass", "10240-65535 (55296 ports)", ""),
])
def test_time_wait_reuse_is_checked_where_transferqueue_runs(tmp_path, ports, reuse, status, said, fix):
    run = run_for(tmp_path, "canary-grpo-lora", "any-1gpu-hopper")
    got = checks_by_name(run, inv("h200-x1"), host_for(run, ports=ports, tw_reuse=reuse))["ports"]
    assert got.status == status and said in got.message and (got.fix or "") == fix, got
    # verl 0.8.0 moves its data through Ray: nothing to reuse
    a100 = run_for(tmp_path, GRPO)
    assert checks_by_name(a100, inv("a100-80gb-x4"), host_for(a100, tw_reuse=2))["ports"].status == "pass"


def test_tracker_states(tmp_path):
    run = run_for(tmp_path, PPO)
    host = host_for(run)
    assert "nothing to resume" in checks_by_name(run, inv("p40x1"), host)["tracker"].message
    run.ckpt_dir.mkdir(parents=True)
    save_steps(run.ckpt_dir, [2, 4], 4, critic=True)
    ok = checks_by_name(run, inv("p40x1"), host)["tracker"]
    assert ok.status == "pass" and "step 4" in ok.message
    # the preflight only reports: it never rewrites the tracker
    (run.ckpt_dir / "latest_checkpointed_iteration.txt").write_text("9")
    bad = checks_by_name(run, inv("p40x1"), host)["tracker"]
    assert bad.status == "fail" and "resume-check" in bad.fix
    assert (run.ckpt_dir / "latest_checkpointed_iteration.txt").read_text() == "9"
    disabled = run_for(tmp_path, PPO, overrides=["trainer.resume_mode=disable"])
    assert checks_by_name(disabled, inv("p40x1"), host)["tracker"].status == "pass"


# (recipe, profile, overrides, world sizes the resumed step was saved with, status, message fragments)
RESUME_WORLD_SIZES = [
    (GRPO, "a100-80gb", [], [4], "pass", ["saved by 4 rank(s), as this run has"]),
    # docs/multinode-and-runpod.md before the fix: `sbatch --nodes=2` then `--nodes=4` on the same run
    (GRPO, "a100-80gb", ["trainer.nnodes=4"], [8], "fail", ["saved by 8 rank(s)", "this run has 16",
                                                           "model_world_size_16_rank_*.pt", "FileNotFoundError"]),
    (GRPO, "a100-80gb-2node", [], [4], "fail", ["saved by 4 rank(s)", "this run has 8"]),
    (GRPO, "a100-80gb", ["trainer.n_gpus_per_node=2"], [4], "fail", ["this run has 2"]),
    # a step re-saved by a run of another size holds both shard sets: verl finds its own
    (GRPO, "a100-80gb-2node", [], [4, 8], "pass", ["saved by 8 rank(s)"]),
    (GRPO, "a100-80gb", ["trainer.resume_mode=disable"], [8], "pass", ["nothing is resumed"]),
    (PPO, None, [], [1], "pass", ["saved by 1 rank(s)"]),       # actor and critic, one GPU
    (PPO, None, [], [2], "fail", ["saved by 2 rank(s) (actor/", "this run has 1"]),
    (GRPO, "a100-80gb", [], [], "pass", ["no checkpoint to resume"]),
]


@pytest.mark.parametrize("recipe,profile,overrides,saved,status,fragments", RESUME_WORLD_SIZES)
def test_resume_world_size(tmp_path, recipe, profile, overrides, saved, status, fragments):
    """verl resumes only the shards of its own world size (FSDPCheckpointManager.load_checkpoint)."""
    from rlrecipes.watchdog.simulate import save_checkpoint

    run = run_for(tmp_path, recipe, profile, overrides)
    for world in saved:
        save_checkpoint(run.ckpt_dir, 6, world_size=world, shard_bytes=64, critic=run.use_critic)
    got = checks_by_name(run, inv("a100-80gb-x4"), host_for(run))["resume-world-size"]
    assert got.status == status, got
    for fragment in fragments:
        assert fragment in got.message, (fragment, got.message)
    if status == "fail":
        assert "resume on the GPU count it was saved with" in got.fix and "trainer.resume_mode=disable" in got.fix


def test_resume_world_size_follows_resume_path(tmp_path):
    from rlrecipes.watchdog.simulate import save_checkpoint

    saved = save_checkpoint(tmp_path / "elsewhere", 3, world_size=2, shard_bytes=64, tracker=False)
    run = run_for(tmp_path, GRPO, "a100-80gb", ["trainer.resume_mode=resume_path",
                                                 f"trainer.resume_from_path={saved}"])
    got = checks_by_name(run, inv("a100-80gb-x4"), host_for(run))["resume-world-size"]
    assert got.status == "fail" and "global_step_3 was saved by 2 rank(s)" in got.message, got


@pytest.mark.parametrize("env,netrc,status,fragment", [
    ({}, False, "warn", "WANDB_MODE=offline will be used"),
    ({"WANDB_API_KEY": "k" * 40}, False, "pass", "WANDB_API_KEY"),
    ({}, True, "pass", "netrc"),
    ({"WANDB_MODE": "offline"}, False, "pass", "WANDB_MODE=offline"),
])
def test_wandb_never_crashes(env, netrc, status, fragment, tmp_path):
    run = run_for(tmp_path, GRPO, overrides=["trainer.logger=[console,wandb]"])
    ctx = Context(run, inv("a100-80gb-x4"), host_for(run, env=env, netrc=netrc))
    checks = run_checks(run, ctx.inventory, ctx.host, context=ctx)
    got = next(c for c in checks if c.name == "tracking")
    assert got.status == status and fragment in got.message
    assert offline_env(ctx, checks) == ({"WANDB_MODE": "offline"} if status == "warn" else {})


def test_launcher_adds_wandb_only_with_a_key(tmp_path):
    with_key = run_for(tmp_path, GRPO, env={"WANDB_API_KEY": "x" * 40})
    host = host_for(with_key, env={"WANDB_API_KEY": "x" * 40})
    assert checks_by_name(with_key, inv("a100-80gb-x4"), host)["tracking"].message == \
        "wandb with WANDB_API_KEY"
    without = run_for(tmp_path, GRPO)
    assert "no wandb" in checks_by_name(without, inv("a100-80gb-x4"), host_for(without))["tracking"].message


def test_wandb_netrc_login_reads_a_real_netrc(tmp_path):
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password " + "a" * 40 + "\n")
    netrc.chmod(0o600)
    assert wandb_netrc_login({"HOME": str(tmp_path)}) is True
    assert wandb_netrc_login({"HOME": str(tmp_path), "WANDB_BASE_URL": "https://wandb.example.com"}) is False
    assert wandb_netrc_login({"HOME": str(tmp_path / "nowhere")}) is False


# -------------------------------------------------------------------------- model, data, prompts
def test_chat_template_missing_fails(tmp_path):
    run = run_for(tmp_path, PPO)
    write_model_dir(run.model_path, "qwen2.5-0.5b", chat_template=False)
    got = checks_by_name(run, inv("p40x1"), host_for(run))
    assert got["model"].status == "pass"
    assert got["chat-template"].status == "fail" and "has no chat template" in got["chat-template"].message


@pytest.mark.parametrize("damage,fragment", [
    (lambda p: (p / "config.json").unlink(), "has no config.json"),
    (lambda p: (p / "model.safetensors").unlink(), "has no weights"),
    (lambda p: (p / "tokenizer.json").unlink(), "has no tokenizer"),
    (lambda p: (p / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"a": "model-00002-of-00002.safetensors"}})), "missing shards"),
    (lambda p: (p / "config.json").write_text("{not json"), "config.json is unreadable"),
])
def test_model_dir_problems(damage, fragment, tmp_path):
    run = run_for(tmp_path, PPO)
    write_model_dir(run.model_path, "qwen2.5-0.5b")
    damage(run.model_path)
    got = checks_by_name(run, inv("p40x1"), host_for(run))["model"]
    assert got.status == "fail" and fragment in got.message
    assert "rlrecipes model qwen2.5-0.5b-gsm8k-ppo" in got.fix


def test_data_problems(tmp_path):
    run = run_for(tmp_path, PPO)
    got = checks_by_name(run, inv("p40x1"), host_for(run))["data"]
    assert got.status == "fail" and "train.parquet does not exist" in got.message and "rlrecipes data gsm8k" in got.fix
    run.data_dir.mkdir(parents=True)
    (run.data_dir / "train.parquet").write_bytes(b"PAR1 truncated")
    got = checks_by_name(run, inv("p40x1"), host_for(run))["data"]
    assert got.status == "fail" and "not a readable parquet file" in got.message
    write_data_dir(run.data_dir, QUESTIONS)
    got = checks_by_name(run, inv("p40x1"), host_for(run))["data"]
    assert got.status == "pass" and "train.parquet: 3 rows" in got.message


@pytest.mark.parametrize("recipe", ["canary-grpo-lora", "smoke-ppo"])
def test_missing_offline_assets_name_their_builder_not_a_download(recipe, tmp_path):
    run = run_for(tmp_path, recipe)
    checks = checks_by_name(run, inv("a100-80gb-x4"), host_for(run))
    builder = (f"rlrecipes {run.recipe.assets} --models-dir {tmp_path / 'models'} "
               f"--data-dir {tmp_path / 'data'}")
    for name in ("model", "data"):
        assert checks[name].status == "fail"
        assert builder in checks[name].fix, checks[name].fix
        assert "make model" not in checks[name].fix and "make data" not in checks[name].fix


@pytest.mark.parametrize("overrides,status,fragment", [
    (["data.max_prompt_length=800"], "pass", "<= data.max_prompt_length=800"),
    (["data.max_prompt_length=300", "data.filter_overlong_prompts=true"], "warn", "filter_overlong_prompts drops them"),
    (["data.max_prompt_length=300", "data.filter_overlong_prompts=false", "data.truncation=error"], "fail",
     "verl raises at the first one"),
    (["data.max_prompt_length=300", "data.filter_overlong_prompts=false", "data.truncation=left"], "warn", "cuts them"),
])
def test_prompt_length(overrides, status, fragment, tmp_path):
    run = run_for(tmp_path, PPO, overrides=overrides)
    write_model_dir(run.model_path, "qwen2.5-0.5b", merges=False)  # counts by hand: test_byte_bound_pruning_is_exact
    write_data_dir(run.data_dir, QUESTIONS + ["How many marbles? " * 30])
    got = checks_by_name(run, inv("p40x1"), host_for(run))["prompt-length"]
    assert got.status == status, got
    assert fragment in got.message
    if status != "pass":
        assert "1 of 4 prompts > 300 tokens (longest 704)" in got.message


@pytest.mark.parametrize("limit", [1, 177, 178, 179, 226, 241, 242, 243, 703, 704, 705, 10_000])
def test_byte_bound_pruning_is_exact(limit, tmp_path):
    """Counting only prompts longer than the limit in bytes gives the same answer as counting all."""
    from rlrecipes.data.gsm8k import make_prompt
    from rlrecipes.preflight.chat import prompt_token_counts

    tok = ChatTokenizer(write_model_dir(tmp_path / "m", "qwen2.5-0.5b", merges=False))
    contents = [make_prompt(q, "verl") for q in QUESTIONS + ["How many marbles? " * 30]]
    prompts = [[{"role": "user", "content": c}] for c in contents]
    full = [len(x) for x in tok.apply_chat_template(prompts, add_generation_prompt=True, tokenize=True)]
    # By hand: without merges every byte is a token and each of the 5 special tokens one more.
    # Template: <|im_start|>"system\n" + the default system message + <|im_end|>"\n" + <|im_start|>"user\n"
    # + content + <|im_end|>"\n" + <|im_start|>"assistant\n" = 5 + 7 + 68 + 1 + 5 + len(content) + 1 + 10.
    # The contents are the question + " Let's think step by step and output the final answer after
    # \"####\"." (67 bytes): 78+67, 62+67, 14+67 and 540+67 bytes.
    assert [len(c.encode()) for c in contents] == [145, 129, 81, 607]
    assert full == [97 + 145, 97 + 129, 97 + 81, 97 + 607]
    over, total, longest = prompt_token_counts(tok, prompts, limit)
    assert (over, total) == (sum(1 for n in full if n > limit), 4)
    if over:
        assert longest == max(full)


def test_prompt_token_counts_match_transformers(tmp_path):
    """The fast counter must agree with AutoTokenizer.apply_chat_template, which verl uses."""
    from transformers import AutoTokenizer

    model = write_model_dir(tmp_path / "m", "qwen2.5-0.5b")
    convs = [[{"role": "user", "content": q}] for q in QUESTIONS + ["x" * 300, "ünïcödé ✓ 12,345 #### -8"]]
    convs.append([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}])
    ours = ChatTokenizer(model).apply_chat_template(convs, add_generation_prompt=True, tokenize=True)
    reference = AutoTokenizer.from_pretrained(str(model))
    theirs = [reference.apply_chat_template(c, add_generation_prompt=True, tokenize=True) for c in convs]
    assert ours == theirs
    assert len(ours[-1]) != len(ours[-2])


# ---------------------------------------------------------------------------- inventory readers
def test_inventory_json_shape_and_count():
    got = inv("a100-80gb-x4")
    assert got.count == 4 and {g.index for g in got.gpus} == {0, 1, 2, 3}
    assert got.gpus[0].cc == (8, 0) and got.gpus[0].memory_gib == 80
    p40 = inventory_from_dict({"gpus": [{"name": "Tesla P40", "memory_mib": 24576, "compute_capability": "6.1"}],
                               "driver_version": "535.183.01"})
    assert p40.gpus[0].sm == "sm_61" and p40.driver_version == "535.183.01" and p40.cuda_driver_version is None


@pytest.mark.parametrize("data,fragment", [
    ({"gpu": []}, "unknown key 'gpu'"),
    ({"gpus": [{"name": "x", "memory_mib": 1024}]}, "missing required key 'compute_capability'"),
    ({"gpus": [{"name": "x", "memory_mib": "24GB", "compute_capability": "6.1"}]}, "memory_mib must be a positive"),
    ({"gpus": [{"name": "x", "memory_mib": 1024, "compute_capability": "sm_61"}]}, "must look like '8.0'"),
    ({"gpus": [{"name": "x", "memory_mib": 1024, "compute_capability": "6.1", "cnt": 2}]}, "unknown key 'cnt'"),
    ([1, 2], "JSON object"),
])
def test_inventory_json_errors(data, fragment):
    with pytest.raises(RecipeError) as err:
        inventory_from_dict(data, where="inv.json")
    assert fragment in str(err.value) and "inv.json" in str(err.value)


def test_inventory_file_errors(tmp_path):
    with pytest.raises(RecipeError, match="not found"):
        load_inventory(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{gpus:")
    with pytest.raises(RecipeError, match="malformed JSON"):
        load_inventory(bad)


@pytest.mark.parametrize("text,with_cc,expected,driver", [
    ("0, Tesla P40, 24576, 6.1, 535.183.01\n", True, [("Tesla P40", 24576, "6.1")], "535.183.01"),
    ("0, NVIDIA A100-SXM4-80GB, 81920, 8.0, 570.124.06\n1, NVIDIA A100-SXM4-80GB, 81920, 8.0, 570.124.06\n", True,
     [("NVIDIA A100-SXM4-80GB", 81920, "8.0")] * 2, "570.124.06"),
    ("0, Tesla V100-SXM2-32GB, 32768, 470.256.02\n", False, [("Tesla V100-SXM2-32GB", 32768, "7.0")], "470.256.02"),
    ("0, Tesla P40, 24576, [N/A], 535.183.01\n", True, [("Tesla P40", 24576, "6.1")], "535.183.01"),
])
def test_parse_nvidia_smi(text, with_cc, expected, driver):
    gpus, got_driver = parse_smi_csv(text, with_cc=with_cc)
    assert [(g.name, g.memory_mib, g.compute_capability) for g in gpus] == expected
    assert got_driver == driver


def test_parse_nvidia_smi_rejects_garbage():
    with pytest.raises(ValueError, match="expected 5 or 6"):
        parse_smi_csv("No devices were found\n")


@pytest.mark.parametrize("value,expected", [
    (None, [0, 1, 2, 3]),
    ("", []),
    ("2", [2]),
    ("3,1", [3, 1]),
    ("0,7,1", [0]),  # the CUDA runtime stops at the first invalid entry
    ("-1", []),
    ("GPU-c", [2]),
    ("1,1", [1]),
])
def test_cuda_visible_devices(value, expected):
    from rlrecipes.preflight.inventory import Gpu, visible

    full = Inventory([Gpu(i, "NVIDIA A100-SXM4-80GB", 81920, "8.0", f"GPU-{'abcd'[i]}{i}") for i in range(4)],
                     "570.124.06", source="nvml")
    got = visible(full, value)
    assert [int(g.uuid[-1]) for g in got.gpus] == expected
    assert [g.index for g in got.gpus] == list(range(len(expected)))


def test_fake_nvidia_smi_on_path_is_used(tmp_path, monkeypatch):
    """Without NVML, detect_inventory runs the real nvidia-smi command line (a stand-in script here)."""
    from rlrecipes.preflight import inventory as inventory_mod

    script = tmp_path / "bin" / "nvidia-smi"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\n"
                      'case "$1" in --query-gpu=index,name,memory.total,compute_cap,driver_version,uuid) '
                      'echo "0, Tesla P40, 24576, 6.1, 535.183.01, GPU-aaaa"; echo "1, Tesla P40, 24576, 6.1, '
                      '535.183.01, GPU-bbbb";; *) echo "bad args: $*" >&2; exit 2;; esac\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(inventory_mod, "from_nvml", lambda: (_ for _ in ()).throw(OSError("no libnvidia-ml")))
    got = inventory_mod.detect_inventory(env={})
    assert got.source == "nvidia-smi" and got.gpus[0].name == "Tesla P40" and got.driver_version == "535.183.01"
    assert [g.uuid for g in got.gpus] == ["GPU-aaaa", "GPU-bbbb"]
    only_second = inventory_mod.detect_inventory(env={"CUDA_VISIBLE_DEVICES": "GPU-bb"})
    assert [(g.index, g.uuid) for g in only_second.gpus] == [(0, "GPU-bbbb")]


def test_no_nvml_no_smi_says_so(monkeypatch, tmp_path):
    from rlrecipes.preflight import inventory as inventory_mod

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(inventory_mod, "from_nvml", lambda: (_ for _ in ()).throw(OSError("libnvidia-ml.so.1 missing")))
    got = inventory_mod.detect_inventory(env={})
    assert got.gpus == [] and "libnvidia-ml.so.1 missing" in got.error and "nvidia-smi is not on PATH" in got.error


# ------------------------------------------------------------------------------ real host facts
def test_real_tmpfs_64m_as_shm(tmp_path):
    """A real 64 MB tmpfs (Docker's default /dev/shm size), measured by the gatherer, fails a 4-GPU run."""
    mnt = tmp_path / "shm"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        skip_or_fail("fs", "mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        skip_or_fail("fs", f"cannot mount tmpfs here: {proc.stderr.strip()}")
    try:
        run = run_for(tmp_path, GRPO)
        host = gather_host_facts([run.ckpt_dir], shm_path=str(mnt), env={})
        assert host.shm_bytes == 64 * 1024 * 1024
        got = checks_by_name(run, inv("a100-80gb-x4"), host)["shm"]
        assert got.status == "fail" and f"{mnt} is 64.0 MiB" in got.message
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_real_small_disk_fails_the_checkpoint_budget(tmp_path):
    """A real 100 MB filesystem as CKPT_DIR: the smoke recipe's checkpoints do not fit when the base
    model is large -- use the GRPO recipe, whose checkpoints are GiBs."""
    mnt = tmp_path / "ckpt"
    mnt.mkdir()
    if os.geteuid() != 0:
        skip_or_fail("fs", "mounting a tmpfs needs root")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        skip_or_fail("fs", f"cannot mount tmpfs here: {proc.stderr.strip()}")
    try:
        run = run_for(tmp_path, GRPO)
        write_model_dir(run.model_path, "qwen2.5-3b")
        host = gather_host_facts([run.ckpt_dir, run.model_path, run.get("data.train_files")], env={})
        assert host.disk_for(run.ckpt_dir).checked == str(mnt)
        got = checks_by_name(run, inv("a100-80gb-x4"), host)["disk"]
        assert got.status == "fail" and f"{mnt} has 100.0 MiB free" in got.message
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_gather_host_facts_reads_this_host(tmp_path):
    host = gather_host_facts([tmp_path / "not" / "yet"], env={"WANDB_API_KEY": "k", "UNRELATED": "x"})
    facts = host.disk_for(tmp_path / "not" / "yet")
    assert facts is not None and facts.checked == str(tmp_path) and facts.free_bytes > 0
    assert host.ram_total_bytes and host.ram_total_bytes > GIB
    assert host.env == {"WANDB_API_KEY": "k"}
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert host.nofile_soft == (None if soft == resource.RLIM_INFINITY else soft)
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert host.port_range == (low, high)
    assert host.tw_reuse == int(Path("/proc/sys/net/ipv4/tcp_tw_reuse").read_text())


# ------------------------------------------------------------------------------------------ CLI
def test_cli_json_with_inventory(tmp_path, capsys, monkeypatch):
    for key, sub in (("MODELS_DIR", "models"), ("DATA_DIR", "data"), ("CKPT_DIR", "ckpt"), ("LOG_DIR", "logs")):
        monkeypatch.setenv(key, str(tmp_path / sub))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    code = main(["preflight", PPO, "--gpu-inventory", str(INV / "p40x1.json"), "--json",
                 "actor_rollout_ref.rollout.name=vllm"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert set(out) >= {"checks"}
    assert all(set(c) == {"check", "status", "message", "fix"} for c in out["checks"])
    by = {c["check"]: c for c in out["checks"]}
    assert by["rollout-engine"]["status"] == "fail" and by["model"]["status"] == "fail"
    assert out["inventory"]["gpus"][0]["name"] == "Tesla P40"


def test_cli_exit_0_when_nothing_fails(tmp_path, capsys, monkeypatch):
    for key, sub in (("MODELS_DIR", "models"), ("DATA_DIR", "data"), ("CKPT_DIR", "ckpt"), ("LOG_DIR", "logs")):
        monkeypatch.setenv(key, str(tmp_path / sub))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    code = main(["preflight", PPO, "--gpu-inventory", str(INV / "p40x1.json"), "--only", "compute-dtype",
                 "--only", "rollout-engine", "--only", "gpu-memory"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "3 passed, 0 warnings, 0 failed" in out


def test_cli_env_file_for_wandb_offline(tmp_path, capsys, monkeypatch):
    for key, sub in (("MODELS_DIR", "models"), ("DATA_DIR", "data"), ("CKPT_DIR", "ckpt"), ("LOG_DIR", "logs")):
        monkeypatch.setenv(key, str(tmp_path / sub))
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    env_file = tmp_path / "launch.env"
    code = main(["preflight", GRPO, "--gpu-inventory", str(INV / "a100-80gb-x4.json"), "--only", "tracking",
                 "--env-file", str(env_file), "trainer.logger=[console,wandb]"])
    assert code == 0
    assert env_file.read_text() == "WANDB_MODE=offline\n"


def test_preflight_does_not_import_torch(tmp_path):
    code = ("import sys, json; from rlrecipes.cli import main; "
            f"rc = main(['preflight', '{PPO}', '--gpu-inventory', '{INV / 'p40x1.json'}', '--json']); "
            "heavy = [m for m in ('torch', 'verl', 'transformers', 'ray', 'vllm') if m in sys.modules]; "
            "print('HEAVY', heavy, file=sys.stderr)")
    env = dict(os.environ, PYTHONPATH=str(REPO), MODELS_DIR=str(tmp_path), DATA_DIR=str(tmp_path),
               CKPT_DIR=str(tmp_path / "c"), LOG_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert "HEAVY []" in proc.stderr, proc.stderr[-2000:]


# ------------------------------------------------------------------------------------ rlrecipes env
@pytest.mark.parametrize("version,expected", [
    ("2.6.0+cu118", "11.8"), ("2.8.0+cu128", "12.8"), ("2.13.0+cpu", None), ("2.6.0", None), (None, None),
])
def test_torch_cuda_from_wheel_version(version, expected):
    from rlrecipes.preflight.envinfo import torch_cuda

    assert torch_cuda(version) == expected


def test_env_block_with_inventory(capsys):
    from importlib import metadata

    code = main(["env", "--json", "--gpu-inventory", str(INV / "a100-80gb-x4.json")])
    info = json.loads(capsys.readouterr().out)
    assert code == 0
    assert info["driver"] == "570.124.06" and info["driver_max_cuda"] == "12.8"
    assert all(" " not in key for key in info)  # identifiers: jq .driver_max_cuda
    assert info["gpus"][3] == "3: NVIDIA A100-SXM4-80GB, 81920 MiB, sm_80"
    assert info["packages"]["transformers"] == metadata.version("transformers")
    assert info["packages"]["verl"] is None  # not in the dev env: reported, not guessed
    main(["env", "--gpu-inventory", str(INV / "p40x1.json")])
    text = capsys.readouterr().out
    assert "- driver max CUDA: " in text and "- driver: 535.183.01" in text and "0: Tesla P40, 24576 MiB, sm_61" in text and "not installed: " in text


def test_nvml_reader_against_the_api_shape(monkeypatch):
    """from_nvml with nvidia-ml-py's functions answering as an H200 + P40 host would (names as bytes
    from old bindings, memory in bytes, CUDA version as 12080); the real library has these names."""
    import types

    import pynvml as real

    calls = []
    devices = [("NVIDIA H200", 143771 * 2**20, (9, 0), "GPU-1111"), (b"Tesla P40", 24576 * 2**20, (6, 1), b"GPU-2222")]
    fake = types.SimpleNamespace(
        NVMLError=real.NVMLError,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlSystemGetDriverVersion=lambda: b"580.159.04",
        nvmlSystemGetCudaDriverVersion_v2=lambda: 13000,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: devices[h][0],
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=devices[h][1], used=0, free=devices[h][1]),
        nvmlDeviceGetCudaComputeCapability=lambda h: devices[h][2],
        nvmlDeviceGetUUID=lambda h: devices[h][3],
    )
    for name in vars(fake):
        assert hasattr(real, name), name
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    from rlrecipes.preflight.inventory import from_nvml

    inv_ = from_nvml()
    assert calls == ["init", "shutdown"]
    assert inv_.driver_version == "580.159.04" and inv_.cuda_driver_version == "13.0"
    assert [(g.name, g.memory_mib, g.compute_capability, g.uuid) for g in inv_.gpus] == [
        ("NVIDIA H200", 143771, "9.0", "GPU-1111"), ("Tesla P40", 24576, "6.1", "GPU-2222")]
    assert inv_.lowest_cc().name == "Tesla P40" and inv_.smallest().name == "Tesla P40"
