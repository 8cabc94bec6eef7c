"""`rlrecipes merge`: a verl FSDP checkpoint -> a Hugging Face model directory, LoRA fused, verified.

1. verl's own merger (`python -m verl.model_merger merge --backend fsdp`) gathers the FSDP shards of
   a step directory's `actor/`. It writes bf16 weights and, for a LoRA run, the adapter beside the base
   weights without fusing it (verl #7285), with `lora_alpha: 0` in its adapter config.
2. For a LoRA run the adapter is fused into the base with PEFT (`merge_and_unload`). The adapter weights
   come from verl's merger, i.e. from `model_world_size_*_rank_*.pt`: verl 0.5.0 with HF rollout writes
   an empty `actor/lora_adapter/adapter_model.safetensors` (no FSDP wrap policy, so its layered summon
   finds nothing). Rank comes from the weights; alpha from what training used (lora_train_meta.json on
   verl >= 0.8, the PEFT config verl 0.5's worker saves in actor/lora_adapter/, the recipe), never from
   the merger's adapter config. The base weights are the base model's own (full precision) when its
   directory is available, else the merger's bf16 copy.
3. Saved in the recipe's dtype with the tokenizer verl stored in the checkpoint, a model card and
   merge-info.json; then verified: it loads with transformers, LoRA-targeted weights differ from the
   base, the others do not, and a short greedy generation runs.

The output appears atomically: everything is built in a hidden directory beside --out and renamed. One merge
at a time per output (a lock file beside it); the next merge removes what a killed one left there.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.errors import RecipeError, StageFailed
from rlrecipes.fsutil import PARTIAL_PREFIX, atomic_write_text, claim_output
from rlrecipes.after.lora_fuse import _torch_dtype, check_fused_logits, compare_to_base, fuse_lora, greedy_sample
from rlrecipes.after.merge_info import DTYPES, LoraInfo, MergeInfo
from rlrecipes.after.merge_output import check_output
from rlrecipes.ui import run_logged
from rlrecipes.verl.checkpoint_ref import CheckpointRef
from rlrecipes.verl.checkpoints import LORA_ADAPTER_DIR

# Module path of a LoRA tensor in the adapter file verl's merger writes (PEFT's saved-key layout).
_LORA_KEY = re.compile(r"^base_model\.model\.(?P<module>.+)\.lora_(?P<ab>[AB])\.weight$")


# -- LoRA settings ----------------------------------------------------------------------------------

def adapter_layout(adapter_file: Path) -> tuple[int, list[str], int]:
    """(rank, target module names, number of LoRA modules) of an adapter safetensors file."""
    from safetensors import safe_open

    ranks: set[int] = set()
    targets: set[str] = set()
    modules: set[str] = set()
    with safe_open(str(adapter_file), framework="pt") as fh:
        for key in fh.keys():
            match = _LORA_KEY.match(key)
            if not match:
                raise StageFailed(f"unexpected tensor {key!r} in the merged LoRA adapter", where=str(adapter_file))
            modules.add(match.group("module"))
            targets.add(match.group("module").rsplit(".", 1)[-1])
            shape = fh.get_slice(key).get_shape()
            ranks.add(shape[0] if match.group("ab") == "A" else shape[1])
    if len(ranks) != 1:
        raise StageFailed(f"LoRA tensors of several ranks {sorted(ranks)} (rank_pattern is not supported)",
                          where=str(adapter_file))
    return ranks.pop(), sorted(targets), len(modules)


def lora_alpha_for(actor_dir: Path, rank: int, cli_alpha: float | None, recipe_alpha: float | None
                   ) -> tuple[float, str]:
    """lora_alpha that training used, and where it came from. Never the merger's adapter config."""
    candidates: list[tuple[str, float | None, int | None]] = []
    if cli_alpha is not None:
        candidates.append(("--lora-alpha", cli_alpha, None))
    meta = actor_dir / "lora_train_meta.json"  # verl >= 0.8 (FSDPCheckpointManager)
    if meta.is_file():
        data = json.loads(meta.read_text())
        candidates.append((str(meta), data.get("lora_alpha"), data.get("r")))
    peft_cfg = actor_dir / LORA_ADAPTER_DIR / "adapter_config.json"  # verl 0.5 worker: asdict(peft_config)
    if peft_cfg.is_file():
        data = json.loads(peft_cfg.read_text())
        candidates.append((str(peft_cfg), data.get("lora_alpha"), data.get("r")))
    if recipe_alpha is not None:
        candidates.append(("recipe actor_rollout_ref.model.lora_alpha", recipe_alpha, None))
    for source, alpha, r in candidates:
        if alpha is None or float(alpha) <= 0:
            continue
        if r is not None and int(r) != rank:
            raise StageFailed(f"LoRA rank {r} in {source} but the checkpoint's adapter has rank {rank}",
                              where=source)
        return float(alpha), source
    raise RecipeError(
        "cannot tell the LoRA alpha training used", where=str(actor_dir),
        hint="pass --lora-alpha A or --recipe NAME (verl's merged adapter config says 0: a verl 0.5 bug)")


# -- recipe context ---------------------------------------------------------------------------------

@dataclass
class RecipeContext:
    name: str | None = None
    dtype: str | None = None  # bf16 | fp32
    lora_alpha: float | None = None
    model_path: Path | None = None
    log_dir: Path | None = None
    hub_id: str | None = None


def recipe_context(explicit: str | None, run_dir: Path) -> RecipeContext:
    """What the recipe says (dtype, LoRA alpha, base model, log dir); empty when the run is not a recipe."""
    from rlrecipes.recipe.load import list_recipes, resolve

    name = explicit
    if name is None:
        try:
            name = run_dir.name if run_dir.name in list_recipes() else None
        except RecipeError:
            name = None
    if name is None:
        return RecipeContext()
    try:
        run = resolve(name)
    except RecipeError as exc:
        if explicit is not None:  # a bad --recipe is the user's error
            raise
        print(f"warning: RUN_DIR is named like recipe {name!r} but it does not resolve ({exc}); "
              "merging without it", file=sys.stderr)
        return RecipeContext()
    alpha = run.get("actor_rollout_ref.model.lora_alpha")
    return RecipeContext(name=name, dtype=run.profile.dtype, lora_alpha=float(alpha) if alpha else None,
                         model_path=run.model_path, log_dir=run.log_dir, hub_id=run.recipe.model.hub_id)


def resolve_dtype(requested: str, ctx: RecipeContext, config_dtype: str | None) -> str:
    if requested != "auto":
        return DTYPES[requested]
    if ctx.dtype in DTYPES:
        return DTYPES[ctx.dtype]
    if config_dtype in DTYPES.values():
        return config_dtype
    return "bfloat16"


def step_metrics(log_dir: Path | None, step: int) -> dict[str, float]:
    """Reward at the step and the last validation accuracy up to it, from the run's logs."""
    if log_dir is None or not log_dir.is_dir():
        return {}
    from rlrecipes.verl.run_metrics import REWARD_KEYS, accuracy_key, load_run

    try:
        run = load_run(log_dir)
    except RecipeError:
        return {}
    out: dict[str, float] = {}
    for key in REWARD_KEYS:
        value = run.steps.get(step, {}).get(key)
        if value is not None:
            out[key] = value
            break
    acc = accuracy_key(run)
    if acc:
        xs, ys = run.series(acc)
        upto = [(x, y) for x, y in zip(xs, ys) if x <= step]
        if upto:
            out[f"{acc} (step {upto[-1][0]})"] = upto[-1][1]
    return out


# -- the merge ------------------------------------------------------------------------------------

def run_verl_merger(actor_dir: Path, target: Path, log_file: Path) -> None:
    if importlib.util.find_spec("verl") is None or importlib.util.find_spec("verl.model_merger") is None:
        raise StageFailed("verl's model_merger is not importable in this interpreter",
                          where=sys.executable,
                          hint="run `rlrecipes merge` inside the run's image (or a .venvs/verl-* environment)")
    cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
           "--local_dir", str(actor_dir), "--target_dir", str(target)]
    code = run_logged(cmd, log_file, "verl model_merger")
    if code != 0 or not (target / "config.json").is_file():
        # One line: the merger's last words (its exception, e.g. "OSError: [Errno 28] No space left on
        # device"); the whole output stays in the log named by `where`.
        lines = [line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
        last = lines[-1][:300] if lines else "no output"
        raise StageFailed(f"verl's model_merger failed (exit {code}): {last}", where=str(log_file),
                          hint="its whole output is in that log")


def model_card(info: MergeInfo) -> str:
    lines = [
        "---",
        "library_name: transformers",
        # only a hub id (from the recipe): the Hub links a card's base_model, a local path means nothing there
        *([f"base_model: {info.base_hub_id}"] if info.base_hub_id else []),
        "tags: [verl, rlrecipes, gsm8k]",
        "---",
        "",
        f"# {info.recipe or 'verl run'} -- step {info.step}",
        "",
        "Merged by `rlrecipes merge` from a verl FSDP checkpoint.",
        "",
        "| | |",
        "|---|---|",
        f"| Base model | {info.base_hub_id or ''} `{info.base_model or 'unknown'}` |",
        f"| Recipe | {info.recipe or 'unknown'} |",
        f"| Checkpoint | `{info.checkpoint}` |",
        f"| Step | {info.step} |",
        f"| Weights | {info.dtype} |",
    ]
    if info.lora:
        lora = info.lora
        lines.append(f"| LoRA (fused) | r={lora.r}, alpha={lora.alpha:g} ({lora.alpha_source}), "
                     f"targets {', '.join(lora.targets)} |")
    for key, value in info.metrics.items():
        lines.append(f"| {key} | {value:.4f} |")
    lines += ["", "Evaluate: `rlrecipes eval <this dir> --baseline <base model dir>`.", ""]
    return "\n".join(lines)


def merge_checkpoint(ckpt: CheckpointRef, out: Path, *, base: Path | None = None, dtype: str = "auto",
                     lora_alpha: float | None = None, recipe: str | None = None, log_dir: Path | None = None,
                     force: bool = False, device: str = "auto") -> MergeInfo:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from rlrecipes.ui import stage

    ctx = recipe_context(recipe, ckpt.run_dir)
    check_output(out, ckpt, [("the base model", base), ("the recipe's base model", ctx.model_path)], force,
                 log_dir=log_dir or ctx.log_dir)
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    claim = claim_output(out, "merge")  # held until the end: one merge per output; stale work dirs removed
    work = None
    try:
        work = Path(tempfile.mkdtemp(prefix=PARTIAL_PREFIX.format(name=out.name), dir=out.parent))
        merged_raw = work / "verl_merged"
        # beside the output, not in the work dir: it outlives a failure (the work dir is removed)
        run_verl_merger(ckpt.actor_dir, merged_raw, out.parent / f"{out.name}.model_merger.log")
        hf_dir = ckpt.actor_dir / "huggingface"
        config_dtype = str(getattr(AutoConfig.from_pretrained(str(hf_dir)), "torch_dtype", "") or "")
        config_dtype = config_dtype.replace("torch.", "")
        target_dtype = resolve_dtype(dtype, ctx, config_dtype)
        final = work / "model"
        info = MergeInfo(checkpoint=str(ckpt.actor_dir), step=ckpt.step, recipe=ctx.name, dtype=target_dtype,
                         base_hub_id=ctx.hub_id)
        adapter_dir = merged_raw / "lora_adapter"
        lora_modules: set[str] = set()
        if adapter_dir.is_dir():
            rank, targets, n_modules = adapter_layout(adapter_dir / "adapter_model.safetensors")
            alpha, source = lora_alpha_for(ckpt.actor_dir, rank, lora_alpha, ctx.lora_alpha)
            base_path, base_note = _base_for_lora(base, ckpt.actor_dir, ctx, merged_raw)
            info.lora = LoraInfo(r=rank, alpha=alpha, alpha_source=source, targets=targets, modules=n_modules,
                                 scaling=alpha / rank)
            info.base_model = str(base_path)
            info.base_note = base_note
            with stage(f"PEFT merge_and_unload (r={rank}, alpha={alpha:g}) into {base_path}"):
                model, fixed_adapter, reference = fuse_lora(base_path, adapter_dir, rank, alpha, targets, work)
                model = model.to(_torch_dtype(target_dtype))
                info.logits = check_fused_logits(model, reference, target_dtype)
                model.save_pretrained(str(final), safe_serialization=True)
                shutil.copytree(fixed_adapter, final / "lora_adapter")
                del model
            from safetensors import safe_open

            with safe_open(str(adapter_dir / "adapter_model.safetensors"), framework="pt") as fh:
                lora_modules = {_LORA_KEY.match(k).group("module") for k in fh.keys()}
            compare_base = base_path
        else:
            with stage(f"saving full weights as {target_dtype}"):
                model = AutoModelForCausalLM.from_pretrained(str(merged_raw), torch_dtype=_torch_dtype(target_dtype))
                model.save_pretrained(str(final), safe_serialization=True)
                del model
            info.base_model = str(base) if base else (str(ctx.model_path) if ctx.model_path else None)
            compare_base = base if base and base.is_dir() else None
        AutoTokenizer.from_pretrained(str(hf_dir)).save_pretrained(str(final))
        info.metrics = step_metrics(log_dir or ctx.log_dir, ckpt.step)

        with stage("verifying: load with transformers, compare with the base, greedy generation"):
            verification: dict = {}
            if compare_base is not None:
                verification.update(compare_to_base(final, compare_base, lora_modules))
            # loads the saved directory with transformers (as a user will), then generates
            try:
                verification["sample"] = greedy_sample(final, target_dtype, device)
            except StageFailed:
                raise
            except Exception as exc:  # whatever transformers raises: the result is not shippable
                raise StageFailed(f"the merged model does not load or generate: {type(exc).__name__}: {exc}",
                                  where=str(out)) from exc
            verification["loads"] = True
        info.verification = verification
        if info.lora:
            if verification.get("changed_targeted", 0) == 0:
                raise StageFailed("the fused model equals the base in every LoRA target: the adapter is zero "
                                  "(an untrained or empty adapter)", where=str(ckpt.actor_dir))
            if verification.get("changed_other", 0):
                raise StageFailed(f"weights outside the LoRA targets differ from the base: "
                                  f"{verification['changed_other_examples']}", where=str(compare_base),
                                  hint="--base must be the model the run started from")
        info.seconds = round(time.monotonic() - started, 1)
        info.write(final)
        atomic_write_text(final / "README.md", model_card(info))
        if out.exists():
            old = work / "previous"
            out.rename(old)
        final.rename(out)
        return info
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
        claim.close()


def _base_for_lora(explicit: Path | None, actor_dir: Path, ctx: RecipeContext, merged_raw: Path
                   ) -> tuple[Path, str]:
    """The frozen base weights: the base model's own directory when it is here, else the merger's copy."""
    if explicit is not None:
        if not (explicit / "config.json").is_file():
            raise RecipeError("base model directory has no config.json", where=str(explicit))
        return explicit, "--base"
    candidates: list[tuple[Path, str]] = []
    peft_cfg = actor_dir / LORA_ADAPTER_DIR / "adapter_config.json"
    if peft_cfg.is_file():
        name = json.loads(peft_cfg.read_text()).get("base_model_name_or_path")
        if name:
            candidates.append((Path(name), f"base_model_name_or_path in {peft_cfg}"))
    if ctx.model_path is not None:
        candidates.append((ctx.model_path, f"recipe {ctx.name}"))
    for path, note in candidates:
        if (path / "config.json").is_file():
            return path, note
    return merged_raw, "verl model_merger's bf16 copy of the frozen base (base model directory not found)"


# -- CLI --------------------------------------------------------------------------------------------
