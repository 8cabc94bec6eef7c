"""The resolved plan of a run: batch arithmetic, schedule, checkpoints and disk. Pure functions of a
ResolvedRun (plus the dataset manifest when the data stage has run). `build_plan` returns a typed Plan;
`Plan.as_dict()` is what `rlrecipes plan --json` prints."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rlrecipes.recipe.images import Image
from rlrecipes.plan.memory import MemoryEstimate, estimate_memory
from rlrecipes.plan.architectures import Architecture, architecture, lora_params, param_count
from rlrecipes.recipe.load import ResolvedRun
from rlrecipes.plan.timing import TimeEstimate, estimate_time, validation_count
from rlrecipes.reference import MeasuredMemory, measured_memory
from rlrecipes.errors import RecipeError
from rlrecipes.verl import schema
from rlrecipes.verl.specs import POLL_INTERVAL_KEY, poll_seconds


def generation_poll(run: ResolvedRun) -> float | None:
    """Seconds between the replay buffer's polls that this run's generation waits on: the interval
    rlrecipes/verl/replay_poll.py is given where the run sets that sampler, else verl's own (VerlSpec.replay_poll_s);
    None for a verl without the V1 trainer, or with it switched off (trainer.use_v1=false)."""
    poll = run.image.spec.replay_poll_s
    if poll is None or run.get("trainer.use_v1", True) is False:
        return None
    if run.get("trainer.v1.sampler.custom_sampler.name") == "PollReplayBuffer" and \
            run.get("trainer.v1.sampler.custom_sampler.path"):  # verl's test: both set, or its own sampler
        value = run.get(POLL_INTERVAL_KEY, None)
        seconds = poll_seconds(value)
        if seconds is None:
            raise RecipeError(f"PollReplayBuffer needs seconds between polls, a number in (0, 10], got {value!r}",
                              where=POLL_INTERVAL_KEY, hint=f"set +{POLL_INTERVAL_KEY}=0.1")
        return seconds
    return poll


def dataset_rows(run: ResolvedRun) -> tuple[int | None, str]:
    """Training rows: from the data stage's manifest when present, else the recipe's known size."""
    manifest = run.data_dir / "manifest.json"
    if manifest.is_file():
        try:
            data = json.loads(manifest.read_text())
            return int(data["splits"]["train"]["rows"]), str(manifest)
        except (ValueError, KeyError, TypeError):
            pass
    return run.recipe.dataset.train_rows, "recipe (dataset size known in advance)"


def checkpoint_bytes(run: ResolvedRun, arch: Architecture | None) -> dict[str, int] | None:
    """Bytes one verl checkpoint takes: FSDP model shards hold fp32 master weights, the optimizer
    Adam's two fp32 moments of the trainable parameters (LoRA: only the adapter)."""
    if arch is None:
        return None
    params = param_count(arch)
    lora = lora_params(run, arch)
    trainable = lora or params
    parts = {"actor": (params + lora) * 4 + trainable * 8}
    if run.use_critic:
        parts["critic"] = params * 4 + params * 8
    return parts


class SaveSteps(Sequence):
    """The steps verl saves at: every `save_freq`, plus the last step. Computed on demand, so a plan of
    `trainer.total_epochs=1000000000000` costs no more memory than one of 3 (the list once grew to 23 GB)."""

    def __init__(self, save_freq: int, total_steps: int):
        self.save_freq, self.total_steps = save_freq, total_steps
        saving = save_freq > 0 and total_steps > 0
        self._regular = total_steps // save_freq if saving else 0
        # verl also saves at the last step when it is not a multiple of save_freq
        self._len = self._regular + (1 if saving and total_steps % save_freq else 0)

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        return (index + 1) * self.save_freq if index < self._regular else self.total_steps

    def __eq__(self, other) -> bool:
        if isinstance(other, SaveSteps):
            return (self._len, self[:1], self[-1:]) == (other._len, other[:1], other[-1:])
        return isinstance(other, (list, tuple)) and len(other) == self._len and list(self) == list(other)

    def __repr__(self) -> str:
        shown = ", ".join(map(str, self[:3])) + (", ..." if self._len > 4 else "") + (
            f", {self[-1]}" if self._len > 3 else "")
        return f"SaveSteps([{shown}], {self._len} saves)"

    def as_json(self, limit: int = 1000):
        """The list when short; else a summary (every N steps, the last, how many)."""
        if self._len <= limit:
            return list(self)
        return {"every": self.save_freq, "last": self.total_steps, "count": self._len, "first": self[:5]}


@dataclass(frozen=True)
class Hardware:
    nnodes: int
    gpus_per_node: int
    gpus: int
    gpu: str
    gpu_memory_gib: float
    dtype: str
    attention: str
    rollout: str
    tensor_parallel: int


@dataclass(frozen=True)
class Algorithm:
    adv_estimator: str
    critic: bool
    reference_policy: bool
    lora_rank: int


@dataclass(frozen=True)
class Batch:
    prompts_per_step: int
    responses_per_prompt: int
    responses_per_step: int
    ppo_mini_batch_prompts: int
    optimizer_steps_per_step: int | None
    responses_per_gpu_per_mini_batch: int
    micro_batch_per_gpu: int | None
    gradient_accumulation: int | None
    max_tokens_per_response: int


@dataclass(frozen=True)
class Schedule:
    train_rows: int | None
    train_rows_source: str
    epochs: int
    steps_per_epoch: int | None
    total_steps: int | None  # the steps the run takes: the epochs' steps, or fewer where total_training_steps caps them
    test_freq: int
    steps_by_epochs: int | None = None  # steps_per_epoch x epochs
    total_training_steps: int | None = None  # trainer.total_training_steps, where set
    validations: int = 0  # verl's validations in the run: val_before_train, every test_freq steps, the last step

    def describe(self) -> str:
        """'N steps/epoch x E epochs = T steps', saying what caps it (or that a cap is never reached)."""
        text = f"{self.steps_per_epoch} steps/epoch x {self.epochs} epochs = "
        cap, by_epochs = self.total_training_steps, self.steps_by_epochs
        if cap is None:
            return text + f"{self.total_steps} steps"
        if by_epochs is None:
            return text + f"? steps, capped at {cap} by trainer.total_training_steps"
        if cap < by_epochs:
            return text + f"{by_epochs} steps, capped at {cap} by trainer.total_training_steps"
        if cap > by_epochs:
            return text + (f"{by_epochs} steps (trainer.total_training_steps={cap} is not reached: verl stops after "
                           "the last epoch)")
        return text + f"{by_epochs} steps (= trainer.total_training_steps)"


@dataclass(frozen=True)
class Checkpoints:
    dir: str
    save_freq: int
    save_steps: SaveSteps
    keep_last: int | None
    resume_mode: str
    bytes_per_checkpoint: int | None
    parts: dict[str, int] | None
    disk_needed_bytes: int | None
    disk_note: str = "kept checkpoints + one save in flight"


@dataclass(frozen=True)
class Plan:
    recipe: str
    profile: str
    image: Image
    hardware: Hardware
    algorithm: Algorithm
    batch: Batch
    schedule: Schedule
    checkpoints: Checkpoints
    memory: MemoryEstimate
    time: TimeEstimate | None  # from a throughput measured on this profile's hardware, else None
    memory_measured: MeasuredMemory | None  # what this recipe was measured to use on this profile, if it was
    loggers: list[str]
    logs: str
    launch: str
    command: list[str]
    warnings: list[str]

    def as_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data (`rlrecipes plan --json`)."""
        image = self.image
        checkpoints = asdict(self.checkpoints)
        checkpoints["save_steps"] = self.checkpoints.save_steps.as_json()
        return {
            "recipe": self.recipe,
            "profile": self.profile,
            "image": {"name": image.name, "tag": image.tag, "verl": image.verl, "cuda": image.cuda,
                      "torch": image.torch, "dockerfile": image.dockerfile},
            "hardware": asdict(self.hardware),
            "algorithm": asdict(self.algorithm),
            "batch": asdict(self.batch),
            "schedule": asdict(self.schedule),
            "checkpoints": checkpoints,
            "memory": self.memory.as_dict(),
            "time": asdict(self.time) if self.time else None,
            "memory_measured": asdict(self.memory_measured) if self.memory_measured else None,
            "loggers": self.loggers,
            "logs": self.logs,
            "launch": self.launch,
            "command": self.command,
            "warnings": self.warnings,
        }


def key_problems(run: ResolvedRun) -> list[schema.KeyProblem]:
    """The overrides (recipe, profile, command line) that verl's config would refuse as unknown keys, checked
    against the snapshot of this image's verl (no verl import: `plan` runs in the light host environment)."""
    snapshot = schema.load(run.image.verl)
    return snapshot.problems(run.overrides.items()) if snapshot else []


def build_plan(run: ResolvedRun) -> Plan:
    n_gpus = run.profile.n_gpus
    batch = int(run.get("data.train_batch_size"))
    n = int(run.get("actor_rollout_ref.rollout.n"))
    mini = int(run.get("actor_rollout_ref.actor.ppo_mini_batch_size"))
    micro = run.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    sp = int(run.get("actor_rollout_ref.actor.ulysses_sequence_parallel_size"))
    ppo_epochs = int(run.get("actor_rollout_ref.actor.ppo_epochs"))
    rows, rows_source = dataset_rows(run)
    epochs = int(run.get("trainer.total_epochs"))
    steps_per_epoch = rows // batch if rows else None  # verl's train dataloader drops the last partial batch
    by_epochs = steps_per_epoch * epochs if steps_per_epoch is not None else None
    cap = int(run.get("trainer.total_training_steps") or 0) or None
    # verl stops at total_training_steps (is_last_step) or when the epochs' loop ends, whichever comes first
    total_steps = min(s for s in (cap, by_epochs) if s is not None) if (cap or by_epochs is not None) else None

    per_gpu_mini = mini * n // max(1, n_gpus // sp)
    save_freq = int(run.get("trainer.save_freq"))
    saves = SaveSteps(save_freq, total_steps or 0)
    keep = run.get("trainer.max_actor_ckpt_to_keep")
    arch = architecture(run)
    ckpt = checkpoint_bytes(run, arch)
    one = sum(ckpt.values()) if ckpt else None
    kept = min(len(saves), int(keep)) if keep else len(saves)
    disk = (kept + 1) * one if one is not None and saves else None  # + one save in flight
    test_freq = int(run.get("trainer.test_freq"))
    validations = validation_count(total_steps or 0, test_freq, bool(run.get("trainer.val_before_train")))
    return Plan(
        recipe=run.name,
        profile=run.profile.name,
        image=run.image,
        hardware=Hardware(
            nnodes=run.profile.nnodes, gpus_per_node=run.profile.gpus_per_node, gpus=n_gpus,
            gpu=run.profile.gpu.name, gpu_memory_gib=run.profile.gpu.memory_gib, dtype=run.profile.dtype,
            attention=run.profile.attention, rollout=run.profile.rollout,
            tensor_parallel=int(run.get("actor_rollout_ref.rollout.tensor_model_parallel_size") or 1)),
        algorithm=Algorithm(adv_estimator=run.get("algorithm.adv_estimator"), critic=run.use_critic,
                            reference_policy=run.use_reference_policy, lora_rank=run.lora_rank),
        batch=Batch(
            prompts_per_step=batch,
            responses_per_prompt=n,
            responses_per_step=batch * n,
            ppo_mini_batch_prompts=mini,
            optimizer_steps_per_step=(batch // mini) * ppo_epochs if mini else None,
            responses_per_gpu_per_mini_batch=per_gpu_mini,
            micro_batch_per_gpu=micro,
            gradient_accumulation=per_gpu_mini // int(micro) if micro else None,
            max_tokens_per_response=int(run.get("data.max_prompt_length")) + int(run.get("data.max_response_length")),
        ),
        schedule=Schedule(train_rows=rows, train_rows_source=rows_source, epochs=epochs,
                          steps_per_epoch=steps_per_epoch, total_steps=total_steps,
                          test_freq=test_freq, steps_by_epochs=by_epochs,
                          total_training_steps=cap, validations=validations),
        checkpoints=Checkpoints(dir=str(run.ckpt_dir), save_freq=save_freq, save_steps=saves, keep_last=keep,
                                resume_mode=run.get("trainer.resume_mode"), bytes_per_checkpoint=one,
                                parts=ckpt, disk_needed_bytes=disk),
        memory=estimate_memory(run),
        time=estimate_time(run.name, run.profile.name, run.recipe.model.hub_id, run.get, n_gpus,
                           int(run.get("actor_rollout_ref.rollout.tensor_model_parallel_size") or 1), batch * n,
                           int(run.get("data.max_response_length")), total_steps,
                           profile_gpu=run.profile.gpu.name, validations=validations, saves=len(saves),
                           generation_poll_s=generation_poll(run), recorded_poll_s=run.image.spec.replay_poll_s),
        memory_measured=measured_memory(run.name, run.profile.name, run.get),
        loggers=run.variables["LOGGER"],
        logs=str(run.log_dir),
        launch=f"bash recipes/{run.name}.sh" if run.profile.name == run.recipe.profile else
               f"rlrecipes render {run.name} --profile {run.profile.name} --out runs/{run.name}",
        command=["python3", "-m", "verl.trainer.main_ppo", *run.hydra_overrides()],
        warnings=run.warnings,
    )
