"""A tiny LoRA (or full) actor checkpoint saved by verl's own FSDPCheckpointManager on CPU, inside a verl venv,
and `rlrecipes merge` run there: the merge tests and the watchdog's completeness test share them."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

# Runs inside a verl venv: a random Qwen2 (hidden 64, 2 layers, tied embeddings) with the tiny tokenizer,
# wrapped with PEFT LoRA and FSDP exactly as verl's actor is, saved the way verl's worker saves an actor
# checkpoint (FSDPCheckpointManager.save_checkpoint; on 0.5.0 also the worker's actor/lora_adapter/ step,
# whose safetensors comes out empty without an FSDP wrap policy), then the tracker.
BUILD_CHECKPOINT = r'''
import json, os, sys
from dataclasses import asdict
from pathlib import Path
import torch
import torch.distributed as dist

root, version, kind = Path(sys.argv[1]), sys.argv[2], sys.argv[3]  # kind: lora | zero (B = 0) | full
sys.path.insert(0, sys.argv[4])
from support.tinytok import build_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

tok_dir = build_tokenizer(root / "tok", vocab_size=300)
tokenizer = AutoTokenizer.from_pretrained(tok_dir)
torch.manual_seed(0)
config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                     max_position_embeddings=256, eos_token_id=tokenizer.eos_token_id,
                     pad_token_id=tokenizer.pad_token_id)
base_dir = root / "base"
Qwen2ForCausalLM(config).save_pretrained(base_dir)
tokenizer.save_pretrained(base_dir)

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[5], RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
dist.init_process_group("gloo", rank=0, world_size=1)
from peft import LoraConfig, TaskType, get_peft_model
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

model = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
if kind == "full":  # full fine-tuning (the PPO recipe): every weight trains
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.01)
else:
    model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=4, lora_alpha=8,
                                             target_modules=["q_proj", "v_proj", "up_proj"], bias="none"))
if kind == "lora":  # what training does: B leaves zero
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
if sys.argv[6] == "2":  # FSDP2 (fully_shard), as verl's engine uses with actor strategy fsdp2
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",)))
    fsdp = model
else:
    fsdp = FSDP(model, use_orig_params=True, device_id=torch.device("cpu"))
optimizer = torch.optim.AdamW([p for p in fsdp.parameters() if p.requires_grad], lr=1e-3)
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

run_dir = root / "ckpt" / "tiny-lora"
actor = run_dir / "global_step_2" / "actor"
manager = FSDPCheckpointManager(model=fsdp, optimizer=optimizer, lr_scheduler=None, processing_class=tokenizer,
                                checkpoint_config={"save_contents": ["model", "optimizer", "extra"],
                                                   "load_contents": ["model", "optimizer", "extra"]})
manager.save_checkpoint(local_path=str(actor), global_step=2)
if version == "0.5.0" and kind != "full":  # ActorRolloutRefWorker.save_checkpoint's LoRA branch (fsdp_workers.py)
    from safetensors.torch import save_file
    from verl.utils.fsdp_utils import layered_summon_lora_params
    peft_config = asdict(model.peft_config["default"])
    peft_config["task_type"] = peft_config["task_type"].value
    peft_config["peft_type"] = peft_config["peft_type"].value
    peft_config["target_modules"] = list(peft_config["target_modules"])
    (actor / "lora_adapter").mkdir()
    save_file(layered_summon_lora_params(fsdp), str(actor / "lora_adapter" / "adapter_model.safetensors"))
    (actor / "lora_adapter" / "adapter_config.json").write_text(json.dumps(peft_config, indent=4))
(run_dir / "latest_checkpointed_iteration.txt").write_text("2")
torch.save({k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone()
            for k, v in model.state_dict().items() if "lora_" in k or kind == "full"}, root / "lora_truth.pt")
dist.destroy_process_group()
'''


def build_checkpoint(run_in_verl, tmp_path: Path, version: str, kind: str = "lora", fsdp: int = 1) -> Path:
    script = tmp_path / "build_checkpoint.py"
    script.write_text(BUILD_CHECKPOINT)
    port = str(29500 + (hash((str(tmp_path), version)) % 400))
    code = (f"import runpy, sys; sys.argv = ['x', {str(tmp_path)!r}, {version!r}, {kind!r}, "
            f"{str(TESTS)!r}, {port!r}, '{fsdp}']; runpy.run_path({str(script)!r}, run_name='__main__')")
    proc = run_in_verl(version, code, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return tmp_path / "ckpt" / "tiny-lora"


def run_merge(run_in_verl, version: str, argv: list[str]):
    code = f"import sys; from rlrecipes.cli import main; sys.exit(main({argv!r}))"
    return run_in_verl(version, code, timeout=300)
