"""Tracking checks: wandb credentials (or offline mode for the launch), verl's resume tracker and the world size of
the checkpoint it resumes."""

from __future__ import annotations

import os
from pathlib import Path

from rlrecipes.preflight.checks.base import FAIL, PASS, WARN, Check, Context
from rlrecipes.recipe.load import ResolvedRun
from rlrecipes.verl.checkpoint_ref import shard_world_sizes
from rlrecipes.verl.checkpoints import ROLE_DIRS, STEP_DIR_PATTERN, step_dir, tracker_path, tracker_step
from rlrecipes.verl.resume import resume_check

def wandb_selected(run: ResolvedRun) -> bool:
    loggers = run.get("trainer.logger", [])
    if isinstance(loggers, str):
        loggers = [loggers]
    return any(str(x) == "wandb" for x in loggers or [])


def check_tracking(ctx: Context) -> Check:
    run, env = ctx.run, ctx.host.env
    if not wandb_selected(run):
        hint = " (wandb is added automatically when WANDB_API_KEY is set)" if run.recipe.wandb == "auto" else ""
        return Check("tracking", PASS, f"loggers {run.get('trainer.logger')}: no wandb{hint}")
    mode = env.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled", "dryrun") or env.get("WANDB_DISABLED", "").lower() in ("true", "1"):
        return Check("tracking", PASS, f"wandb in WANDB_MODE={mode or 'disabled'}: no login needed")
    if env.get("WANDB_API_KEY"):
        return Check("tracking", PASS, "wandb with WANDB_API_KEY")
    if ctx.host.wandb_netrc:
        return Check("tracking", PASS, "wandb with the ~/.netrc login (wandb login)")
    return Check("tracking", WARN, "wandb is selected but there is no WANDB_API_KEY and no `wandb login`: "
                 "WANDB_MODE=offline will be used (runs land in wandb/offline-run-*)",
                 "export WANDB_API_KEY=... for live logging, or upload later with `wandb sync wandb/offline-run-*`")


def offline_env(ctx: Context, checks: list[Check]) -> dict[str, str]:
    """Environment the launch must get so that it never crashes on tracking."""
    if any(c.name == "tracking" and c.status == WARN for c in checks):
        return {"WANDB_MODE": "offline"}
    return {}


def check_tracker(ctx: Context) -> Check:
    run = ctx.run
    mode = str(run.get("trainer.resume_mode"))
    root = run.ckpt_dir
    if mode == "disable":
        return Check("tracker", PASS, "trainer.resume_mode=disable: the run starts at step 0")
    if mode == "resume_path":
        path = run.get("trainer.resume_from_path")
        if not path or not Path(str(path)).is_dir():
            return Check("tracker", FAIL, f"trainer.resume_mode=resume_path but trainer.resume_from_path={path!r} is "
                         "not a directory", f"point it at a {STEP_DIR_PATTERN} directory")
        return Check("tracker", PASS, f"resumes from {path}")
    findings = resume_check(root, repair=False, grace_s=0.0)
    errors = [f for f in findings if f.severity == "error"]
    warns = [f for f in findings if f.severity == "warn"]
    fix = f"rlrecipes resume-check --root {root}"
    if errors:
        return Check("tracker", FAIL, "; ".join(f.message for f in errors),
                     f"restore the checkpoint, or remove {tracker_path(root)} to start over "
                     "knowingly")
    if warns:
        return Check("tracker", FAIL, "; ".join(f.message for f in warns),
                     f"{fix} (rewrites the tracker to the newest complete checkpoint)")
    info = [f.message for f in findings if f.experiment == str(Path(os.path.realpath(root)))] or \
        [f.message for f in findings]
    return Check("tracker", PASS, info[0] if info else "no checkpoint yet")


def check_resume_world_size(ctx: Context) -> Check:
    """The checkpoint verl will resume holds shards of this run's world size. verl loads the shard of its own
    world size and rank only, so a run resumed on another nnodes x n_gpus_per_node than it was saved with stops
    at its first load with FileNotFoundError -- after Ray, the model and the rollout engine have started."""
    run = ctx.run
    mode = str(run.get("trainer.resume_mode"))
    if mode == "disable":
        return Check("resume-world-size", PASS, "trainer.resume_mode=disable: nothing is resumed")
    if mode == "resume_path":
        saved = Path(str(run.get("trainer.resume_from_path") or ""))
    else:
        step = tracker_step(run.ckpt_dir)
        if step is None:
            return Check("resume-world-size", PASS, "no checkpoint to resume")
        saved = step_dir(run.ckpt_dir, step)
    world = run.get("trainer.nnodes", 1, kind=int) * run.get("trainer.n_gpus_per_node", 1, kind=int)
    sizes = {role: shard_world_sizes(saved / role) for role in ROLE_DIRS}
    other = {role: found for role, found in sizes.items() if found and world not in found}
    if other:
        role, found = sorted(other.items())[0]
        ranks = " or ".join(str(n) for n in sorted(found))
        return Check("resume-world-size", FAIL,
                     f"{saved.name} was saved by {ranks} rank(s) ({role}/model_world_size_{ranks}_rank_*.pt); this "
                     f"run has {world} (trainer.nnodes x trainer.n_gpus_per_node): verl would look for "
                     f"model_world_size_{world}_rank_*.pt and stop with FileNotFoundError",
                     f"resume on the GPU count it was saved with (nnodes x n_gpus_per_node = {ranks}), or start a new "
                     "run: trainer.resume_mode=disable, or another trainer.default_local_dir")
    if not any(sizes.values()):
        return Check("resume-world-size", PASS, f"{saved.name} holds no model shards (the tracker check judges it)")
    return Check("resume-world-size", PASS, f"{saved.name} was saved by {world} rank(s), as this run has")

