"""One checkpoint to load (what `rlrecipes merge` reads): a step directory found from a run, an experiment or
a step path, its actor's shards checked whole, the world size they were written with."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.verl.checkpoints import (MODEL_SHARD_GLOB, MODEL_SHARD_RE, STEP_DIR_PATTERN, TRACKER_NAME,
                                        read_tracker, role_problem, step_dir, step_of)

def shard_world_sizes(role_dir: Path) -> set[int]:
    """The world sizes whose model shards a role directory (actor/, critic/) holds. verl resumes a role by
    loading `model_world_size_<its world size>_rank_<its rank>.pt` (FSDPCheckpointManager.load_checkpoint
    in 0.5.0, 0.8.0 and 0.9.1): a run with another nnodes x n_gpus_per_node finds no file of its own."""
    try:
        names = os.listdir(role_dir)
    except OSError:
        return set()
    return {int(m.group(1)) for m in map(MODEL_SHARD_RE.match, names) if m}


@dataclass(frozen=True)
class CheckpointRef:
    run_dir: Path  # trainer.default_local_dir (holds the tracker), or the step's parent
    step: int
    actor_dir: Path


def actor_complete(actor_dir: Path) -> tuple[bool, str]:
    """Whether an actor checkpoint can be merged: every model shard its world size promises, whole,
    fsdp_config.json and the huggingface/ config verl's merger reads."""
    if not actor_dir.is_dir():
        return False, "no actor/ directory"
    shards = [MODEL_SHARD_RE.match(p.name) for p in actor_dir.iterdir()]
    shards = [m for m in shards if m]
    if not shards:
        return False, f"no {MODEL_SHARD_GLOB} shards"
    sizes = {int(m.group(1)) for m in shards}
    if len(sizes) != 1:
        return False, f"shards of several world sizes {sorted(sizes)}"
    world = sizes.pop()
    ranks = {int(m.group(2)) for m in shards}
    if ranks != set(range(world)):
        return False, f"missing shard(s) for rank(s) {sorted(set(range(world)) - ranks)} of {world}"
    if not (actor_dir / "fsdp_config.json").is_file():
        return False, "no fsdp_config.json (written after the shards: the save did not finish)"
    if not (actor_dir / "huggingface" / "config.json").is_file():
        return False, "no huggingface/config.json"
    # A shard cut short (disk full mid-save) would reach verl's merger as a torch.load traceback.
    problem = role_problem(actor_dir)
    if problem:
        return False, problem
    return True, ""


def locate_checkpoint(path: str | Path, step: str = "latest") -> CheckpointRef:
    """The actor checkpoint to merge: RUN_DIR + step ('latest' = the tracker), a step directory, or its actor.
    RecipeError naming what is missing or incomplete."""
    from rlrecipes.errors import RecipeError

    path = Path(path).resolve()
    if not path.is_dir():
        raise RecipeError("checkpoint directory not found", where=str(path))
    if MODEL_SHARD_RE.match(next((p.name for p in path.glob(MODEL_SHARD_GLOB)), "")):
        actor = path
        step_path = path.parent
    elif step_of(path) is not None:
        actor = path / "actor"
        step_path = path
    else:
        steps = sorted((n, p) for p in path.iterdir() if p.is_dir() and (n := step_of(p)) is not None)
        available = ", ".join(str(n) for n, _ in steps) or "none"
        if step == "latest":
            tracker = read_tracker(path)
            if tracker.step is None:
                raise RecipeError(
                    f"no usable {TRACKER_NAME} (verl writes it last; missing or empty means the run never "
                    f"finished a save)", where=str(path / TRACKER_NAME),
                    hint=f"pass --step N; steps on disk: {available} (or repair: rlrecipes resume-check)")
            chosen = tracker.step
        else:
            if not str(step).isdigit():
                raise RecipeError(f"--step must be a number or 'latest', got {step!r}", where="--step")
            chosen = int(step)
        chosen_dir = step_dir(path, chosen)
        if not chosen_dir.is_dir():
            raise RecipeError(f"step {chosen} not on disk", where=str(chosen_dir),
                              hint=f"steps on disk: {available}")
        actor = chosen_dir / "actor"
        step_path = chosen_dir
    ok, why = actor_complete(actor)
    if not ok:
        raise RecipeError(f"incomplete actor checkpoint: {why}", where=str(actor),
                          hint="pick another step with --step N")
    number = step_of(step_path)
    if number is None:
        raise RecipeError(f"cannot tell the step: expected the actor under {STEP_DIR_PATTERN}/", where=str(actor))
    return CheckpointRef(run_dir=step_path.parent, step=number, actor_dir=actor)
