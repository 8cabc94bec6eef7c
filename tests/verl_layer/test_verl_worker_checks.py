"""Our copy of verl 0.5.0's worker-side batch checks against verl's own code, on the same configs.

verl 0.5.0 checks the mini/micro batch arithmetic only inside its GPU workers (`ActorRolloutRefWorker`
and `CriticWorker.__init__` in workers/fsdp_workers.py), so `rlrecipes validate` runs a copy of those
checks (rlrecipes/verl/check.py `_worker_checks_050`). Here the real constructors run on the CPU, in
the verl 0.5.0 venv: a one-process gloo group stands in for the GPUs, and the world size the config asks
for is what `torch.distributed.get_world_size()` and the FSDP device mesh report (the only two things
the checks read from the cluster). Both must accept the same configs and reject the others with the
same message.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.verl

CODE = r"""
import json, os, socket, sys, types
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
import torch.distributed as dist
dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{port}")
from omegaconf import OmegaConf
from verl.workers import fsdp_workers
from rlrecipes.verl import check

def verls_own(cfg, use_critic):
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    dist.get_world_size = lambda *a, **k: world
    fsdp_workers.create_device_mesh = lambda world_size, fsdp_size: types.SimpleNamespace(size=lambda: world)
    full = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))  # the workers edit their config
    fsdp_workers.ActorRolloutRefWorker(full.actor_rollout_ref, role="actor_rollout_ref")
    if use_critic:
        fsdp_workers.CriticWorker(full.critic)

out = []
for overrides in json.loads(sys.argv[1]):
    cfg = check._compose(overrides)
    use_critic = cfg.algorithm.adv_estimator == "gae"
    result = []
    for run in (lambda: check._worker_checks_050(cfg, use_critic), lambda: verls_own(cfg, use_critic)):
        try:
            run()
            result.append(None)
        except AssertionError as exc:
            result.append(str(exc))
    out.append(result)
print("RESULT" + json.dumps(out))
"""

BASE = ["trainer.n_gpus_per_node=4", "trainer.nnodes=1", "data.train_batch_size=64",
        "actor_rollout_ref.actor.ppo_mini_batch_size=32", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
        "critic.ppo_mini_batch_size=32", "critic.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.rollout.n=1"]
GAE = ["algorithm.adv_estimator=gae"]
GRPO = ["algorithm.adv_estimator=grpo"]
# (overrides on top of BASE, expected message or None): verl's answer is the reference, these only make
# sure that each case exercises what its name says.
CASES = {
    "valid": (GAE, None),
    "actor micro does not divide mini": (GAE + ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"],
                                         "normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 3"),
    "actor micro larger than mini": (GRPO + ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16"],
                                     "normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 16"),
    "mini below one per GPU": (GRPO + ["actor_rollout_ref.actor.ppo_mini_batch_size=2"],
                               "ppo_mini_batch_size 0 should be larger than 0 after normalization"),
    "rollout.n scales the mini batch": (GRPO + ["actor_rollout_ref.rollout.n=3",
                                                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=6"], None),
    "global micro batch split over GPUs": (GRPO + ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null",
                                                   "actor_rollout_ref.actor.ppo_micro_batch_size=12"],
                                           "normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 3"),
    "dynamic bsz does not skip the actor check": (GRPO + ["actor_rollout_ref.actor.use_dynamic_bsz=true",
                                                         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"],
                                                  "normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 3"),
    "critic micro does not divide mini": (GAE + ["critic.ppo_micro_batch_size_per_gpu=3"],
                                          "normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 3"),
    "dynamic bsz does not skip the critic check": (GAE + ["critic.use_dynamic_bsz=true", "critic.ppo_micro_batch_size_per_gpu=3"],
                                                   "normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 3"),
    "critic scales by its own rollout_n": (GAE + ["critic.rollout_n=3", "critic.ppo_micro_batch_size_per_gpu=24"], None),
    "critic rollout_n unset by actor n": (GAE + ["critic.rollout_n=1", "actor_rollout_ref.rollout.n=3",
                                                 "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=24",
                                                 "critic.ppo_micro_batch_size_per_gpu=24"],
                                          "normalized ppo_mini_batch_size 8 should be divisible by ppo_micro_batch_size_per_gpu 24"),
}


def test_our_worker_checks_are_verls(run_in_verl):
    names = list(CASES)
    overrides = [BASE + CASES[name][0] for name in names]
    proc = run_in_verl("0.5.0", CODE.replace("json.loads(sys.argv[1])", repr(overrides)), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.split("RESULT", 1)[1])
    for name, (ours, verls) in zip(names, results):
        assert verls == CASES[name][1], (name, verls)
        assert ours == verls, (name, ours, verls)


LORA_CODE = r"""
import json, sys
from rlrecipes.verl import check
assert "vllm" not in sys.modules and __import__("importlib").util.find_spec("vllm") is None
out = []
for overrides in OVERRIDES:
    result = check.check(overrides)
    out.append([result["ok"], result.get("message"), result.get("notices", [])[-1:]])
leftover = [m for m in sys.modules if m.startswith("verl.workers.rollout.vllm_rollout")]
with check._vllm_rollout_utils_without_vllm() as utils:
    ranks = [utils.get_vllm_max_lora_rank(r) for r in (1, 2, 9, 64, 300, 512)]
print("RESULT" + json.dumps({"results": out, "leftover": leftover, "ranks": ranks}))
"""
LORA_BASE = ["actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.mode=async",
             "algorithm.adv_estimator=grpo", "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
             "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "trainer.n_gpus_per_node=1",
             "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
             "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2"]
NOTICE = "NOTICE: vLLM is not installed here; LoRA rank checked against verl's fallback list of vLLM ranks."
LORA_CASES = [
    (["actor_rollout_ref.model.lora_rank=64"], True, None),
    (["actor_rollout_ref.model.lora_rank=512"], True, None),
    (["actor_rollout_ref.model.lora_rank=513"], False, "ValueError: lora_rank must be less than or equal to 512, but got 513"),
    # verl reads the newer `model.lora.rank` first and skips the check when the adapter is merged
    (["actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora.rank=1024"], False,
     "ValueError: lora_rank must be less than or equal to 512, but got 1024"),
    (["actor_rollout_ref.model.lora_rank=1024", "actor_rollout_ref.model.lora.merge=true"], True, None),
]


def test_lora_rank_without_vllm_is_verls_own_check(run_in_verl):
    """verl 0.8.0 checks the LoRA rank with vLLM's list (`get_vllm_max_lora_rank`, in a module that
    imports vllm). Without vLLM the validator runs verl's own function from that file, which falls back to
    verl's list of ranks: no copy of the rule lives in rlrecipes."""
    overrides = [LORA_BASE + extra for extra, _ok, _message in LORA_CASES]
    proc = run_in_verl("0.8.0", LORA_CODE.replace("OVERRIDES", repr(overrides)), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.split("RESULT", 1)[1])
    for (extra, ok, message), (got_ok, got_message, notices) in zip(LORA_CASES, got["results"]):
        assert (got_ok, got_message if not ok else None) == (ok, message), extra
        if ok:
            assert notices == [NOTICE], extra
    assert got["leftover"] == []  # the stand-in module is gone after each validation
    assert got["ranks"] == [1, 8, 16, 64, 320, 512]  # verl rounds up to the next rank vLLM allows
