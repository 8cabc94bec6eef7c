"""Architectures of the base models the recipes use: parameter counts for plans, memory estimates and
random-weight stand-ins (`smoke-assets --arch`). Figures are those of the models' config.json files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rlrecipes.recipe.load import ResolvedRun

# The projections PEFT's "all-linear" targets in a Qwen2 decoder layer.
QWEN2_LINEAR_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class Architecture:
    name: str
    hub_id: str | None
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tie_embeddings: bool
    max_position: int = 32768
    rope_theta: float = 1000000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in_features, out_features) of each linear projection in one decoder layer."""
        kv = self.kv_heads * self.head_dim
        return {
            "q_proj": (self.hidden, self.hidden),
            "k_proj": (self.hidden, kv),
            "v_proj": (self.hidden, kv),
            "o_proj": (self.hidden, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }


ARCHITECTURES: dict[str, Architecture] = {
    "qwen2.5-0.5b": Architecture("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B-Instruct", 24, 896, 4864, 14, 2, 151936, True),
    "qwen2.5-1.5b": Architecture("qwen2.5-1.5b", "Qwen/Qwen2.5-1.5B-Instruct", 28, 1536, 8960, 12, 2, 151936, True),
    "qwen2.5-3b": Architecture("qwen2.5-3b", "Qwen/Qwen2.5-3B-Instruct", 36, 2048, 11008, 16, 2, 151936, True),
    "qwen2.5-7b": Architecture("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 28, 3584, 18944, 28, 4, 152064, False),
    # The random tiny model `rlrecipes smoke-assets` builds (vocabulary of its on-the-spot tokenizer).
    "tiny": Architecture("tiny", None, 4, 256, 688, 4, 2, 2048, True, max_position=4096),
}


# The architecture each offline asset builder (a recipe's `assets:`) builds into the recipe's model directory: such a
# model has no hub entry, and no config.json to read before the builder has run.
ASSET_ARCHITECTURES = {"smoke-assets": "tiny", "canary-assets": "tiny"}


def param_count(arch: Architecture) -> int:
    """Exact parameter count of a Qwen2 causal LM with this architecture."""
    per_layer = 0
    for name, (fan_in, fan_out) in arch.linear_shapes().items():
        per_layer += fan_in * fan_out
        if name in ("q_proj", "k_proj", "v_proj"):
            per_layer += fan_out  # Qwen2 has biases on q/k/v only
    per_layer += 2 * arch.hidden  # two RMSNorm weights
    embed = arch.vocab * arch.hidden
    head = 0 if arch.tie_embeddings else arch.vocab * arch.hidden
    return arch.layers * per_layer + embed + head + arch.hidden  # + final norm


def lora_param_count(arch: Architecture, rank: int, targets: tuple[str, ...] | str = "all-linear") -> int:
    if rank <= 0:
        return 0
    names = QWEN2_LINEAR_TARGETS if targets == "all-linear" else tuple(targets)
    shapes = arch.linear_shapes()
    unknown = [t for t in names if t not in shapes]
    if unknown:
        raise ValueError(f"unknown LoRA target modules {unknown}; known: {sorted(shapes)}")
    return arch.layers * sum(rank * (shapes[t][0] + shapes[t][1]) for t in names)


def lora_params(run: ResolvedRun, arch: Architecture) -> int:
    """The adapter's parameter count for the run's own rank and target_modules (0 without LoRA)."""
    if not run.lora_rank:
        return 0
    targets = run.get("actor_rollout_ref.model.target_modules")
    return lora_param_count(arch, run.lora_rank, targets if isinstance(targets, str) else tuple(targets))


def arch_for_hub_id(hub_id: str) -> Architecture | None:
    for arch in ARCHITECTURES.values():
        if arch.hub_id and arch.hub_id.lower() == hub_id.lower():
            return arch
    return None


def arch_from_config(config: dict) -> Architecture:
    """Architecture read from a model directory's config.json (any Qwen2-shaped model)."""
    return Architecture(
        name=config.get("_name_or_path") or config.get("model_type", "model"),
        hub_id=None,
        layers=int(config["num_hidden_layers"]),
        hidden=int(config["hidden_size"]),
        intermediate=int(config["intermediate_size"]),
        heads=int(config["num_attention_heads"]),
        kv_heads=int(config.get("num_key_value_heads", config["num_attention_heads"])),
        vocab=int(config["vocab_size"]),
        tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        max_position=int(config.get("max_position_embeddings", 32768)),
        rope_theta=float(config.get("rope_theta", 10000.0)),
    )


def architecture(run: ResolvedRun) -> Architecture | None:
    """The run's model: its downloaded (or built) config.json when present, else the table entry for its hub id,
    else the architecture its offline asset builder builds."""
    config = run.model_path / "config.json"
    if config.is_file():
        try:
            return arch_from_config(json.loads(config.read_text()))
        except (ValueError, KeyError):
            pass
    built = ASSET_ARCHITECTURES.get(run.recipe.assets or "")
    return arch_for_hub_id(run.recipe.model.hub_id) or (ARCHITECTURES[built] if built else None)
