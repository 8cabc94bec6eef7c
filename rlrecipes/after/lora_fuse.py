"""The LoRA half of `rlrecipes merge`: the adapter fused into the base with PEFT, and the checks that the fused
model is base + adapter (its logits) and not the base (its weights), with a short greedy generation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from rlrecipes.errors import StageFailed


def _torch_dtype(name: str):
    import torch

    return getattr(torch, name)


def fuse_lora(base_path: Path, adapter_dir: Path, rank: int, alpha: float, targets: list[str], work: Path):
    """PEFT: base + adapter (alpha fixed) -> merge_and_unload, computed in fp32. Returns the fused model."""
    import torch
    from peft import LoraConfig, PeftModel
    from transformers import AutoModelForCausalLM

    fixed = work / "adapter"
    fixed.mkdir()
    shutil.copy2(adapter_dir / "adapter_model.safetensors", fixed / "adapter_model.safetensors")
    LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, task_type="CAUSAL_LM", lora_dropout=0.0,
               bias="none", base_model_name_or_path=str(base_path)).save_pretrained(str(fixed))
    base = AutoModelForCausalLM.from_pretrained(str(base_path), torch_dtype=torch.float32)
    peft_model = PeftModel.from_pretrained(base, str(fixed))
    # PEFT only warns about adapter keys that match no module; a silent no-op fuse is what we must not ship.
    from safetensors.torch import load_file

    expected = load_file(str(fixed / "adapter_model.safetensors"))
    loaded = {k.replace(".default.weight", ".weight"): v for k, v in peft_model.state_dict().items() if "lora_" in k}
    absent = sorted(set(expected) - set(loaded))
    if absent:
        raise StageFailed(f"{len(absent)} adapter tensor(s) match no module of the base, e.g. {absent[0]}",
                          where=str(base_path))
    for key, tensor in expected.items():
        if not torch.equal(loaded[key].to(tensor.dtype), tensor):
            raise StageFailed(f"adapter tensor {key} did not load as saved", where=str(fixed))
    # What the fused model must reproduce: base + adapter as PEFT runs it (unmerged), on a few prompts.
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, base.config.vocab_size, (PROBE_PROMPTS, PROBE_TOKENS), generator=generator)
    peft_model.eval()
    with torch.no_grad():
        with_adapter = peft_model(input_ids=ids).logits.float()
        with peft_model.disable_adapter():
            base_only = peft_model(input_ids=ids).logits.float()
    reference = {"ids": ids, "adapter": with_adapter, "base": base_only}
    return peft_model.merge_and_unload(), fixed, reference


PROBE_PROMPTS, PROBE_TOKENS = 4, 16
# Largest logit error allowed, relative to the largest logit: what rounding to the saved dtype explains
# (bf16 keeps 8 bits of mantissa: ~0.4% per weight, accumulated over the layers).
LOGIT_TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2, "float16": 1e-2}


def check_fused_logits(model, reference: dict, dtype: str) -> dict:
    """The fused model's logits equal base + adapter (PEFT, unmerged) within the saved dtype's rounding,
    and differ from the base model's: a "merged" model identical to the base is a known verl failure."""
    import torch

    model.eval()
    with torch.no_grad():
        fused = model(input_ids=reference["ids"]).logits.float()
    scale = float(reference["adapter"].abs().max()) or 1.0
    error = float((fused - reference["adapter"]).abs().max()) / scale
    effect = float((reference["adapter"] - reference["base"]).abs().max()) / scale
    tolerance = LOGIT_TOLERANCE.get(dtype, 5e-2)
    result = {"prompts": PROBE_PROMPTS, "tokens": PROBE_TOKENS, "max_rel_error_vs_base_plus_adapter": error,
              "max_rel_adapter_effect": effect, "tolerance": tolerance}
    if not error <= tolerance:
        raise StageFailed(f"the fused model's logits differ from base + adapter by {error:.3g} of the largest logit "
                          f"(allowed {tolerance:g} for {dtype}): the fuse is wrong", where="merge verification")
    if not effect > tolerance:
        raise StageFailed(f"the adapter changes the logits by only {effect:.3g} of the largest logit: the merged "
                          f"model is the base model (the adapter is zero: empty or untrained)", where="merge verification")
    return result


def _tensor_index(model_dir: Path) -> dict[str, Path]:
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {key: model_dir / name for key, name in weight_map.items()}
    single = model_dir / "model.safetensors"
    if not single.is_file():
        raise StageFailed("no safetensors weights", where=str(model_dir))
    from safetensors import safe_open

    with safe_open(str(single), framework="pt") as fh:
        return {key: single for key in fh.keys()}


def compare_to_base(merged_dir: Path, base_dir: Path, lora_modules: set[str]) -> dict:
    """Stream both models' tensors: which changed, and whether every change is inside a LoRA target."""
    from safetensors import safe_open

    merged, base = _tensor_index(merged_dir), _tensor_index(base_dir)
    changed_targeted = unchanged_targeted = changed_other = 0
    max_delta = 0.0
    examples_other: list[str] = []
    handles: dict[Path, object] = {}

    def tensor(path: Path, key: str):
        if path not in handles:
            handles[path] = safe_open(str(path), framework="pt")
        return handles[path].get_tensor(key)

    for key, path in merged.items():
        if key not in base:
            continue
        a = tensor(path, key).float()
        b = tensor(base[key], key).float()
        if a.shape != b.shape:
            raise StageFailed(f"{key}: shape {tuple(a.shape)} vs base {tuple(b.shape)}", where=str(merged_dir))
        delta = (a - b).abs().max().item() if a.numel() else 0.0
        module = key.rsplit(".", 1)[0]
        if module in lora_modules and key.endswith(".weight"):
            if delta > 0:
                changed_targeted += 1
                max_delta = max(max_delta, delta)
            else:
                unchanged_targeted += 1
        elif delta > 0:
            changed_other += 1
            examples_other.append(key)
    missing = sorted(set(base) - set(merged))
    return {"changed_targeted": changed_targeted, "unchanged_targeted": unchanged_targeted,
            "changed_other": changed_other, "changed_other_examples": examples_other[:3],
            "max_abs_delta": max_delta, "missing_from_merged": missing[:5], "compared": len(merged)}


def greedy_sample(model_dir: Path, dtype: str, device: str, max_new_tokens: int = 16) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), torch_dtype=_torch_dtype(dtype)).to(device).eval()
    question = "Natalia sold 48 clips in April and half as many in May. How many clips did she sell?"
    if tokenizer.chat_template:
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                               add_generation_prompt=True)
    else:
        prompt = question
    enc = tokenizer(prompt, return_tensors="pt", return_token_type_ids=False).to(device)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad)
    new = out[0, enc["input_ids"].shape[1]:]
    if new.numel() == 0:
        raise StageFailed("greedy generation produced no tokens", where=str(model_dir))
    return tokenizer.decode(new, skip_special_tokens=True)
