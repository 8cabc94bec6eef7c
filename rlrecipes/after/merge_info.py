"""What `rlrecipes merge` records about a merged model (MODEL/merge-info.json), declared once.

The merge writes it, the model card and the merge summary are drawn from it, and `rlrecipes eval` reads its
dtype and base model back. Reading is lenient (an older or hand-edited file gives what it has, a missing or
unreadable one gives None): the file only ever adds convenience defaults, it never decides correctness.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rlrecipes.fsutil import atomic_write_text

FILE = "merge-info.json"
DTYPES = {"bf16": "bfloat16", "fp32": "float32", "fp16": "float16"}  # merge --dtype -> the saved weights' dtype


@dataclass(frozen=True)
class LoraInfo:
    r: int
    alpha: float
    alpha_source: str  # where alpha came from: the command line, the checkpoint's config, the recipe
    targets: list[str]
    modules: int
    scaling: float  # alpha / r, what PEFT multiplies the adapter's product by


@dataclass
class MergeInfo:
    checkpoint: str  # the actor directory merged
    step: int
    recipe: str | None
    dtype: str  # the saved weights' dtype (one of DTYPES' values)
    base_hub_id: str | None
    lora: LoraInfo | None = None  # None: full weights, no adapter
    base_model: str | None = None  # the directory compared with (and fused into, for LoRA)
    base_note: str | None = None  # how that base was found (LoRA only)
    logits: dict[str, Any] | None = None  # fused-vs-PEFT logits check (LoRA only)
    metrics: dict[str, float] = field(default_factory=dict)  # the run's metrics at that step
    verification: dict[str, Any] = field(default_factory=dict)  # loads, compared with base, greedy sample
    seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # base_note and logits exist for LoRA merges only: absent, not null, in a full-weights merge's file
        return {k: v for k, v in data.items() if not (k in ("base_note", "logits") and v is None)}

    def write(self, model_dir: Path) -> Path:
        path = model_dir / FILE
        atomic_write_text(path, json.dumps(self.as_dict(), indent=2, default=str) + "\n")
        return path

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MergeInfo:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        lora = values.get("lora")
        values["lora"] = LoraInfo(**lora) if isinstance(lora, dict) else None
        for name, default in (("checkpoint", ""), ("step", -1), ("recipe", None), ("dtype", ""),
                              ("base_hub_id", None)):
            values.setdefault(name, default)
        return cls(**values)

    @classmethod
    def read(cls, model_dir: Path) -> MergeInfo | None:
        """The merge's record in model_dir, or None when there is none or it cannot be read as one."""
        try:
            data = json.loads((model_dir / FILE).read_text())
            return cls.from_dict(data) if isinstance(data, dict) else None
        except (OSError, ValueError, TypeError):
            return None
