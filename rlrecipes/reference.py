"""Figures from outside a run that plans and reports compare it with: measured throughputs and published
accuracies. The one place they live; each says what it was measured on and where its record is.

A throughput belongs to a profile (the hardware and stack it was measured on) and applies only there:
a step time measured on an H200 says nothing about a P40. Two kinds:

- `step_seconds`: a whole training step measured for a recipe's settings; scaled to other batch sizes
  and lengths by the number of generated tokens (the rollout dominates a GRPO/PPO step).
- `rollout_tokens_per_s`: one vLLM engine's generation rate on one GPU; gives the rollout phase only
  (the lower bound of a step), responses assumed to run to the maximum length.

A figure may also name config values it was measured with (`config`, e.g. verl's fused kernels on or
off); it applies only to a run whose resolved config has the same values, so switching such an option back
gives the figure measured that way, or none.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Throughput:
    key: str                       # the record's name: a recipe's `expect:` block points at it (`ref: KEY`)
    profiles: tuple[str, ...]      # the profiles whose hardware and stack this was measured on
    recipe: str | None             # step times hold for one recipe; a rollout rate for its model size only
    model: str                     # the architecture it was measured with
    kind: str                      # "step_seconds" | "rollout_tokens_per_s"
    value: float
    responses_per_step: int        # the settings it was measured at (for scaling)
    max_response_length: int
    measured_on: str
    source: str
    gpu: str                       # the GPU model it was measured on (nvidia-smi's name): a cost belongs to one
    config: tuple[tuple[str, object], ...] = ()  # config values it was measured with (see the module doc)
    metrics: str = ""              # the recorded run's verl metrics JSONL (see the module doc); "" where none
    console: str = ""              # its console log where it is not `console-<stamp>.log` beside the metrics file
    # later runs of the same recipe on the same profile, each on a host of its own: (their log folder, the GPU
    # model they ran on). Not the figure -- its settings or host differ -- but what a step cost elsewhere: the
    # plan shows their range beside it (a canary's step is overhead, and overhead is the host's)
    hosts: tuple[tuple[str, str], ...] = ()
    # recipes whose step was not timed but that run the figure's recipe as it is -- the same model, batch, rollout,
    # response length and number of updates a step -- with another advantage estimator or loss normalisation, work
    # of milliseconds on a step of seconds: the figure applies to them, and the plan says whose step it is
    siblings: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReferenceAccuracy:
    recipe: str
    accuracy: float                # GSM8K test accuracy, 0..1
    what: str
    source: str
    before: float | None = None    # the accuracy before training, where the record has it


CANARY_HOPPER_METRICS = "docs/bench/gpu-data/canary-hopper/canary/logs/canary-grpo-lora/metrics-20261203T122403Z.jsonl"
CANARY_PPO_HOPPER_METRICS = "docs/bench/gpu-data/canary-ppo-hopper-h100/logs/canary-ppo/metrics-20261207T030712Z.jsonl"

THROUGHPUTS: tuple[Throughput, ...] = (
    Throughput(
        key="a100-4x-3b-grpo-lora-step",
        profiles=("a100-80gb",), recipe="qwen2.5-3b-gsm8k-grpo-lora", model="Qwen2.5-3B",
        kind="step_seconds", value=206.0, responses_per_step=1024 * 5, max_response_length=1024,
        measured_on="a reported run of this recipe on 4x A100 80GB (verl + vLLM, 105 steps in ~6 h after tuning, "
                    "validation every 5 steps included)",
        source="docs/hardware.md#measured-throughputs", gpu="NVIDIA A100-SXM4-80GB",
    ),
    Throughput(
        key="h200-3b-grpo-lora-fused-step",
        profiles=("h200-141gb",), recipe="qwen2.5-3b-gsm8k-grpo-lora", model="Qwen2.5-3B",
        kind="step_seconds", value=63.96, responses_per_step=320, max_response_length=1024,
        measured_on="verl 0.9.1 + vLLM 0.24.0 on one H200 (torch 2.11.0+cu130), this recipe on h200-141gb with "
                    "verl's fused kernels (torch backend) and vLLM's per-token detokenization off (the image's verl "
                    "edit, verl PR #7679): Qwen2.5-3B architecture with random bf16 weights, LoRA r64, 64 prompts x "
                    "5, every response 1024 tokens (ignore_eos); timing_s/step of step 2 of 2 (step 1: 89.5 s): "
                    "rollout 18.2 s, old log-prob 9.2, reference 7.6, actor update 26.4, weight sync 2.1",
        source="docs/bench/gpu-hopper-3b.md", gpu="NVIDIA H200",
        config=(("actor_rollout_ref.model.use_fused_kernels", True),),
        metrics="docs/bench/gpu-data/hopper-3b-64/variant/metrics.jsonl",
        console="docs/bench/gpu-data/hopper-3b-64/variant/verl-console.log.gz",
    ),
    Throughput(
        key="h200-3b-grpo-lora-unfused-step",
        profiles=("h200-141gb",), recipe="qwen2.5-3b-gsm8k-grpo-lora", model="Qwen2.5-3B",
        kind="step_seconds", value=359.2, responses_per_step=640, max_response_length=1024,
        measured_on="verl 0.9.1 + vLLM 0.24.0 on one H200 (torch 2.11.0+cu130), this recipe on h200-141gb without "
                    "fused kernels: Qwen2.5-3B architecture with random bf16 weights, LoRA r64, 128 prompts x 5, "
                    "every response 1024 tokens (ignore_eos); timing_s/step of step 2 (step 1: 414.3 s): rollout "
                    "52.4 s, old log-prob 65.6, reference 56.7, actor update 181.8, weight sync 1.8; at 64 x 5 "
                    "three steps took 206.6, 180.4 and 176.3 s (this scaling says 179.6)",
        source="docs/bench/gpu-hopper-3b.md", gpu="NVIDIA H200",
        config=(("actor_rollout_ref.model.use_fused_kernels", False),),
        metrics="docs/bench/gpu-data/hopper-3b-steps/metrics.jsonl",
        console="docs/bench/gpu-data/hopper-3b-steps/verl-console.log.gz",
    ),
    Throughput(
        key="h200-3b-rollout-rate",
        profiles=("h200-141gb-2gpu",), recipe=None, model="Qwen2.5-3B",
        kind="rollout_tokens_per_s", value=17980.0, responses_per_step=320, max_response_length=1024,
        measured_on="verl 0.9.1's rollout phase (timing_s/gen of step 2: vLLM 0.24.0 generating, then put to "
                    "sleep) on ONE H200 (torch 2.11.0+cu130), the 3B GRPO-LoRA recipe on h200-141gb with vLLM's "
                    "per-token detokenization off (the image's verl edit): Qwen2.5-3B architecture with random bf16 "
                    "weights, LoRA r64, 64 prompts x 5, every response 1024 tokens: 327,680 tokens in 18.2 s "
                    "(the first 256 responses ran together, verl's max_num_seqs, the last 64 in a smaller second "
                    "wave: at the shipped batch nearly every wave is full, so the rate there is if anything "
                    "higher); nothing has run on two GPUs",
        source="docs/bench/gpu-hopper-3b.md", gpu="NVIDIA H200",
        metrics="docs/bench/gpu-data/hopper-3b-64/variant/metrics.jsonl",
    ),
    Throughput(
        key="h200-canary-grpo-lora-hopper-step",
        profiles=("any-1gpu-hopper",), recipe="canary-grpo-lora", model="canary-qwen2",
        kind="step_seconds", value=5.13, responses_per_step=64 * 8, max_response_length=64,
        measured_on="verl 0.9.1 + vLLM 0.24.0 on one H200, this recipe as shipped on any-1gpu-hopper (`make "
                    "reproduce` from nothing): the steady mean of timing_s/step over its 53 training steps without "
                    "validation, step 1 left out; responses as the model wrote them (~50 tokens of 64)",
        source=CANARY_HOPPER_METRICS, gpu="NVIDIA H200", metrics=CANARY_HOPPER_METRICS,
        # the fifth to seventh recovery sittings (docs/bench/gpu-reliability.md): `make reproduce` with the profile
        # as shipped since the third lever sitting, one H100 host each, a fault and the same command again
        hosts=tuple((f"docs/bench/gpu-data/recovery-faults-hopper-{n}/logs", "NVIDIA H100 80GB HBM3")
                    for n in (4, 5, 6)),
        # the algorithm matrix (issue 37) but GSPO and DAPO, which update four times a step (mini batch 16), and
        # DAPO's responses run to 80 tokens
        siblings=("canary-rloo", "canary-reinforce-pp", "canary-dr-grpo"),
    ),
    Throughput(
        key="h100-canary-ppo-hopper-step",
        profiles=("any-1gpu-hopper",), recipe="canary-ppo", model="canary-qwen2",
        kind="step_seconds", value=4.88, responses_per_step=256, max_response_length=64,
        measured_on="verl 0.9.1 + vLLM 0.24.0 on one H100 80GB, this recipe as shipped on any-1gpu-hopper "
                    "(`make reproduce ... SEED=0`, its assets built just before): the steady mean of timing_s/step "
                    "over 63 of its first 71 steps (the run ended there, cut short; step 1 and the 7 steps with "
                    "validation left out): rollout 1.57 s, old log-probs 0.52, values 0.48, critic update 0.64, "
                    "actor update 0.63, weight sync 0.25 (medians); responses as the model wrote them (~50 of 64)",
        source="docs/bench/gpu-canary.md", gpu="NVIDIA H100 80GB HBM3", metrics=CANARY_PPO_HOPPER_METRICS,
        # seeds 1 and 2 to their verdicts on other H100 hosts (docs/bench/gpu-canary.md, "The PPO canary's seed 1"
        # and "seed 2"; a run started beside each and ended at its start-up)
        hosts=(("docs/bench/gpu-data/canary-seeds-ppo-hopper-h100/logs/seed-1/canary-ppo", "NVIDIA H100 80GB HBM3"),
               ("docs/bench/gpu-data/canary-seeds-ppo-hopper-h100-2/logs/seed-2/canary-ppo", "NVIDIA H100 80GB HBM3")),
    ),
)

@dataclass(frozen=True)
class MeasuredMemory:
    """GPU memory a recipe was measured to use on a profile's hardware, beside what the planner estimated for
    the same settings: plan shows both, so an estimate that is off is never the only figure a user sees."""

    key: str                       # the record's name (`ref: KEY` in a recipe's `expect:` block)
    profiles: tuple[str, ...]
    recipe: str
    settings: str                  # the batch and lengths it was measured at
    # (what, measured GiB, estimated GiB for those settings, the planner phase the estimate is: rollout,
    # log_prob, update_actor, or training = the larger of the two)
    phases: tuple[tuple[str, float, float, str], ...]
    measured_on: str
    source: str
    gpu: str                       # the GPU model it was measured on (nvidia-smi's name)
    config: tuple[tuple[str, object], ...] = ()  # config values it was measured with


MEASURED_MEMORY: tuple[MeasuredMemory, ...] = (
    MeasuredMemory(
        key="h200-3b-grpo-lora-fused-memory",
        profiles=("h200-141gb",), recipe="qwen2.5-3b-gsm8k-grpo-lora",
        settings="64 prompts x 5, every response 1024 tokens, fused kernels",
        phases=(("rollout, whole GPU in use (NVML)", 102.4, 97.8, "rollout"),
                ("old log-probs, trainer allocator peak (RLRECIPES_PHASE_LOG)", 17.1, 17.1, "log_prob"),
                ("actor update, trainer allocator peak (actor/perf/max_memory_allocated_gb)", 24.8, 26.2,
                 "update_actor")),
        measured_on="verl 0.9.1 + vLLM 0.24.0 on one H200, Qwen2.5-3B architecture with random bf16 weights, "
                    "2 steps with verl's fused kernels (torch backend), prompts of ~64 tokens; the rollout's "
                    "whole-GPU peak is step 1's (step 2: 99.9 GiB): it also holds what the trainer process keeps "
                    "between phases beyond its weights and optimizer (CUDA context, cached allocator blocks), "
                    "which the estimate counts as 0.5 GiB",
        source="docs/bench/gpu-hopper-3b.md", gpu="NVIDIA H200",
        config=(("actor_rollout_ref.model.use_fused_kernels", True),),
    ),
    MeasuredMemory(
        key="h200-3b-grpo-lora-unfused-memory",
        profiles=("h200-141gb",), recipe="qwen2.5-3b-gsm8k-grpo-lora",
        settings="128 prompts x 5, every response 1024 tokens, no fused kernels",
        phases=(("rollout, whole GPU in use (NVML)", 99.8, 97.8, "rollout"),
                ("training phases, trainer allocator peak (verl's actor/perf/max_memory_allocated_gb)", 82.2, 110.7,
                 "training"),
                ("training phases, trainer allocator reserved (actor/perf/max_memory_reserved_gb)", 103.9, 110.7,
                 "training")),
        measured_on="verl 0.9.1 + vLLM 0.24.0 on one H200, Qwen2.5-3B architecture with random bf16 weights, "
                    "2 steps, prompts of ~64 tokens; the estimate counts prompts at max_prompt_length (512): "
                    "at the measured lengths it gives 82.4 GiB for the old log-probs (82.2 measured again at "
                    "64 x 5: micro batches of 32 either way)",
        source="docs/bench/gpu-hopper-3b.md", gpu="NVIDIA H200",
        config=(("actor_rollout_ref.model.use_fused_kernels", False),),
    ),
)


def _applies(config: tuple[tuple[str, object], ...], get: Callable[[str], object]) -> bool:
    return all(get(key) == value for key, value in config)


def applies_to(record: Throughput | MeasuredMemory, get: Callable[[str], object]) -> bool:
    """Whether a record holds for a run whose resolved config `get` reads (its config values match)."""
    return _applies(record.config, get)


def measured_memory(recipe: str, profile: str, get: Callable[[str], object]) -> MeasuredMemory | None:
    """What `recipe` was measured to use on `profile` with the settings `get` (a resolved config's lookup) has."""
    return next((m for m in MEASURED_MEMORY if profile in m.profiles and m.recipe == recipe
                 and _applies(m.config, get)), None)


# Published or reported accuracies, by name (`cites:` in a recipe's `expect:` block names them).
ACCURACY_RECORDS: dict[str, ReferenceAccuracy] = {
    "verl-baseline-3b-grpo-lora": ReferenceAccuracy(
        recipe="qwen2.5-3b-gsm8k-grpo-lora", accuracy=0.861, before=0.563,
        what="verl's GSM8K baseline: Qwen2.5-3B-Instruct GRPO + LoRA (rank 32; this recipe trains rank 64), "
             "0.563 at step 0 -> 0.861 at step 116",
        source="https://verl.readthedocs.io/en/latest/algo/baseline.html",
    ),
    "a100-4x-3b-grpo-lora-reported": ReferenceAccuracy(
        recipe="qwen2.5-3b-gsm8k-grpo-lora", accuracy=0.85, before=0.59,
        what="the seed guide's run of this recipe on 4x A100 80GB (verl + vLLM, LoRA rank 64, 1024 prompts x 5, "
             "15 epochs = 105 steps, validation on the GSM8K test split every 5 steps): ~59% before training -> "
             "~85%, plateauing after ~3 epochs; reported, not re-measured here",
        source="docs/hardware.md#measured-throughputs",
    ),
    "verl-baseline-0.5b-ppo": ReferenceAccuracy(
        recipe="qwen2.5-0.5b-gsm8k-ppo", accuracy=0.567, before=0.364,
        what="verl's GSM8K baseline: Qwen2.5-0.5B-Instruct PPO, 0.364 before training",
        source="https://verl.readthedocs.io/en/latest/algo/baseline.html",
    ),
}

# The one reference accuracy `report` compares a recipe's run with.
REFERENCE_ACCURACY: dict[str, ReferenceAccuracy] = {
    "qwen2.5-3b-gsm8k-grpo-lora": ACCURACY_RECORDS["verl-baseline-3b-grpo-lora"],
    "qwen2.5-0.5b-gsm8k-ppo": ACCURACY_RECORDS["verl-baseline-0.5b-ppo"],
}


@dataclass(frozen=True)
class ReferenceCurve:
    """Held-out accuracy by step of a recorded run of a recipe, which `report` draws under the run's own."""

    key: str
    recipe: str
    points: tuple[tuple[int, float], ...]  # (step, accuracy), as the record's log has them
    what: str
    source: str                            # the record; its log is `log` (a test reads the points from it)
    log: str = ""


REFERENCE_CURVES: dict[str, ReferenceCurve] = {
    "qwen2.5-3b-gsm8k-grpo-lora": ReferenceCurve(
        key="verl-baseline-3b-grpo-lora", recipe="qwen2.5-3b-gsm8k-grpo-lora",
        points=((0, ACCURACY_RECORDS["verl-baseline-3b-grpo-lora"].before or 0.0),
                (116, ACCURACY_RECORDS["verl-baseline-3b-grpo-lora"].accuracy)),
        what="verl's GSM8K baseline, its start and end only (the steps between are not published)",
        source=ACCURACY_RECORDS["verl-baseline-3b-grpo-lora"].source,
    ),
    "qwen2.5-0.5b-gsm8k-ppo": ReferenceCurve(
        key="verl-baseline-0.5b-ppo", recipe="qwen2.5-0.5b-gsm8k-ppo",
        points=((0, ACCURACY_RECORDS["verl-baseline-0.5b-ppo"].before or 0.0),),
        what="verl's GSM8K baseline before training (its end accuracy is the published reference; the step it "
             "was reached at is not published)",
        source=ACCURACY_RECORDS["verl-baseline-0.5b-ppo"].source,
    ),
    "canary-grpo-lora": ReferenceCurve(
        key="h200-canary-grpo-lora", recipe="canary-grpo-lora",
        points=((0, 0.22265625), (10, 0.3671875), (20, 0.3828125), (30, 0.419921875), (40, 0.443359375),
                (50, 0.458984375), (60, 0.490234375), (70, 0.498046875), (80, 0.544921875), (90, 0.548828125),
                (100, 0.529296875)),
        what="this recipe on one H200 (verl 0.5.0, HF rollout, FP32), run g3e4: 512 held-out problems",
        source="docs/bench/gpu-canary.md", log="docs/bench/gpu-data/canary/g3e4/console-20261202T155731Z.log",
    ),
    "canary-ppo": ReferenceCurve(
        key="h200-canary-ppo", recipe="canary-ppo",
        points=((0, 0.22265625), (10, 0.291015625), (20, 0.388671875), (30, 0.416015625), (40, 0.421875),
                (50, 0.435546875), (60, 0.443359375), (70, 0.466796875), (80, 0.486328125), (90, 0.482421875),
                (100, 0.490234375)),
        what="this recipe on one H200 (verl 0.5.0, HF rollout, FP32), run ppo1e5: 512 held-out problems",
        source="docs/bench/gpu-canary.md", log="docs/bench/gpu-data/canary/ppo1e5/console-20261202T155731Z.log",
    ),
}


# A recipe's curve on one profile where that profile's stack has its own recorded run: a run is drawn against the
# run of its own stack and settings (the Hopper canary runs 60 steps of verl 0.9.1 with vLLM; g3e4 above ran 100 of
# verl 0.5.0 with HF generate), the recipe's curve above where its profile has none.
PROFILE_CURVES: dict[tuple[str, str], ReferenceCurve] = {
    ("canary-grpo-lora", "any-1gpu-hopper"): ReferenceCurve(
        key="h200-canary-grpo-lora-hopper", recipe="canary-grpo-lora",
        points=((0, 0.220703125), (10, 0.37109375), (20, 0.400390625), (30, 0.419921875), (40, 0.412109375),
                (50, 0.416015625), (60, 0.46875)),
        what="this recipe on any-1gpu-hopper on one H200 (verl 0.9.1, vLLM rollout, bf16), the shipped run: 512 "
             "held-out problems",
        source="docs/bench/gpu-canary.md", log=CANARY_HOPPER_METRICS,
    ),
}


def reference_curve(recipe: str | None, profile: str | None = None) -> ReferenceCurve | None:
    """The curve a run of `recipe` on `profile` is drawn against: its profile's own where one is recorded, else
    the recipe's; None for a recipe with neither."""
    if recipe is None:
        return None
    return PROFILE_CURVES.get((recipe, profile or "")) or REFERENCE_CURVES.get(recipe)


def record(key: str) -> Throughput | MeasuredMemory | ReferenceAccuracy | None:
    """The record named `key` (a throughput, a memory measurement or an accuracy), or None."""
    for item in (*THROUGHPUTS, *MEASURED_MEMORY):
        if item.key == key:
            return item
    return ACCURACY_RECORDS.get(key)


def record_keys() -> list[str]:
    return [item.key for item in (*THROUGHPUTS, *MEASURED_MEMORY)] + list(ACCURACY_RECORDS)


def step_seconds_at(t: Throughput, responses_per_step: int, max_response_length: int,
                    measured_length: float | None = None) -> float:
    """A measured whole-step time scaled to other settings by the number of generated tokens; `measured_length`
    is the mean length the measured responses had, where the recorded run says (else its maximum)."""
    measured = t.responses_per_step * (measured_length or t.max_response_length)
    return t.value * responses_per_step * max_response_length / measured


def _model_size(hub_id: str) -> str:
    return hub_id.rstrip("/").rsplit("/", 1)[-1].removesuffix("-Instruct")


def throughput_for(recipe: str, profile: str, hub_id: str, get: Callable[[str], object]) -> Throughput | None:
    """The measured throughput that applies to `recipe` on `profile` with the settings `get` (a resolved
    config's lookup) has: a step time of this very recipe (or of the recipe it is a sibling of: Throughput.siblings)
    first, else a rollout rate measured with the recipe's model architecture on that profile's hardware."""
    model = _model_size(hub_id)
    candidates = [t for t in THROUGHPUTS if profile in t.profiles and t.model == model and _applies(t.config, get)]
    for kind in ("step_seconds", "rollout_tokens_per_s"):
        for t in candidates:
            if t.kind == kind and (t.recipe in (None, recipe) or recipe in t.siblings):
                return t
    return None


def same_gpu(a: str, b: str) -> bool:
    """One GPU model, however it is written ("NVIDIA H200", "H200", "nvidia h200")."""
    def key(name: str) -> str:
        return re.sub(r"[^a-z0-9]", "", name.lower().replace("nvidia", ""))
    return key(a) == key(b)


def reference_accuracy(recipe: str) -> ReferenceAccuracy | None:
    return REFERENCE_ACCURACY.get(recipe)
