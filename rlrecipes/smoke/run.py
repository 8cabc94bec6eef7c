"""`rlrecipes smoke`: train the smoke recipes on this GPU, kill one mid-run, resume it, merge, check.

For each smoke recipe (smoke-ppo, smoke-grpo-lora) on the stack that is installed here (the P40 stack,
verl 0.5.0 + patch + HF rollout, where vLLM is absent; the A100 stack where it is present):

  1. launch `python3 -m verl.trainer.main_ppo <the recipe's resolved overrides>` from a clean
     checkpoint directory (4 steps, a checkpoint every 2),
  2. kill the whole launch (process group) as soon as step 2 was logged, i.e. after its checkpoint
     and tracker were written and step 3 began,
  3. relaunch the same command: verl's resume_mode=auto must continue at step 3, not 1,
  4. merge the last checkpoint into a Hugging Face model and load it,

then check the logs and files and print a pass/fail table. The console of each launch is kept in
LOG_DIR/<recipe>/console-<stamp>.log, as the launchers keep it.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.errors import RecipeError
from rlrecipes.paths import PACKAGE_DIR, repo_root
from rlrecipes.verl.checkpoints import read_tracker, step_dir
from rlrecipes.verl.rollout_sync import check_rollout_sync
from rlrecipes.verl.logs import REWARD_KEYS, console_step, parse_steps, resumed_from

SMOKE_RECIPES = ("smoke-ppo", "smoke-grpo-lora")
KILL_AFTER_STEP = 2


def expected_losses(use_critic: bool, use_kl_loss: bool) -> tuple[str, ...]:
    keys = ["actor/pg_loss"]
    if use_critic:
        keys.append("critic/vf_loss")
    if use_kl_loss:
        keys.append("actor/kl_loss")
    return tuple(keys)


@dataclass
class Check:
    recipe: str
    name: str
    ok: bool
    detail: str


def check_metrics(recipe: str, steps: dict[int, dict[str, float]], losses: tuple[str, ...]) -> list[Check]:
    checks = []
    if not steps:
        return [Check(recipe, "rewards and losses logged", False, "no `step:N - ...` line in the console log")]
    missing, bad = [], []
    for key in (REWARD_KEYS[0], *losses):
        values = [m[key] for m in steps.values() if key in m]
        if not values:
            missing.append(key)
        elif not all(math.isfinite(v) for v in values):
            bad.append(key)
    last = steps[max(steps)]
    detail = ", ".join(f"{k}={last[k]:.4g}" for k in (REWARD_KEYS[0], *losses) if k in last)
    if missing or bad:
        detail = "; ".join(filter(None, [missing and f"missing {missing}", bad and f"not finite {bad}"]))
    checks.append(Check(recipe, "rewards and losses logged", not missing and not bad,
                        f"steps {sorted(steps)}: {detail}"))
    return checks


def check_rollout_in_sync(recipe: str, steps: dict[int, dict[str, float]]) -> Check:
    """The engine generated with the trained policy (a LoRA adapter that never reaches vLLM fails here);
    a vLLM run must log the metrics (the launcher sets calculate_log_probs)."""
    verdict = check_rollout_sync(steps)
    return Check(recipe, "rollout in sync with the actor", verdict.status == "in sync", verdict.detail)


def check_first_launch(recipe: str, ckpt_dir: Path, killed: bool, steps: dict[int, dict[str, float]]) -> list[Check]:
    saved = step_dir(ckpt_dir, KILL_AFTER_STEP)
    tracker = read_tracker(ckpt_dir)
    tracker_text = None if tracker.status == "missing" else tracker.raw.strip()
    return [
        Check(recipe, "killed after step 3 began", killed and max(steps, default=0) == KILL_AFTER_STEP,
              f"killed={killed}, last logged step {max(steps, default=None)}"),
        Check(recipe, f"{saved.name} and tracker exist",
              (saved / "actor").is_dir() and tracker_text == str(KILL_AFTER_STEP),
              f"{saved.name}/actor {'present' if (saved / 'actor').is_dir() else 'MISSING'}, "
              f"tracker={tracker_text!r}"),
    ]


def check_resume(recipe: str, text: str, steps: dict[int, dict[str, float]], rc: int, total: int) -> list[Check]:
    start = resumed_from(text)
    first = min(steps, default=None)
    return [
        Check(recipe, f"relaunch resumed at step {KILL_AFTER_STEP}",
              start == KILL_AFTER_STEP and first == KILL_AFTER_STEP + 1,
              f"resumed from {start}, first step logged {first}"),
        Check(recipe, "relaunch finished", rc == 0 and max(steps, default=0) == total,
              f"exit {rc}, last step {max(steps, default=None)} of {total}"),
        # verl's epoch-boundary bug: a "resumed" run that exits 0 having trained nothing
        Check(recipe, "relaunch trained after its resume",
              start is None or start >= total or any(s > start for s in steps),
              f"resumed from {start}; steps logged after it: {sorted(s for s in steps if start is None or s > start)}"),
    ]


# ----------------------------------------------------------------------------------- side effects

@dataclass
class Launch:
    rc: int
    killed: bool
    timed_out: bool
    text: str
    console: Path
    seconds: float


def launch(cmd: list[str], env: dict[str, str], console: Path, kill_after_step: int | None = None,
           timeout: float = 900, echo=sys.stdout) -> Launch:
    """Run one training launch in its own process group, tee its output to `console`; with
    kill_after_step, kill the group as soon as that step's metrics line appeared; past `timeout`
    seconds kill it and report timed_out."""
    import threading

    console.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    killed = False
    lines: list[str] = []
    with open(console, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                                bufsize=1, start_new_session=True, errors="replace")
        fired = threading.Event()

        def on_timeout() -> None:
            fired.set()
            _kill_group(proc)

        timer = threading.Timer(timeout, on_timeout)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                log.write(line)
                log.flush()
                if echo is not None:
                    echo.write(line)
                step = console_step(line)
                if kill_after_step is not None and step is not None and step >= kill_after_step:
                    # The step's checkpoint and tracker are written before its metrics line, and the
                    # next step starts right after it: this kill lands inside step kill_after_step + 1.
                    time.sleep(0.5)
                    _kill_group(proc)
                    killed = True
                    break
        finally:
            timer.cancel()
            timed_out = fired.is_set() and not killed
            if proc.poll() is None:
                _kill_group(proc)
        rc = proc.wait()
    if timed_out:
        lines.append(f"[rlrecipes smoke] killed after {timeout:.0f} s\n")
    return Launch(rc, killed, timed_out, "".join(lines), console, time.monotonic() - start)


def _kill_group(proc: subprocess.Popen) -> None:
    # Ray's head processes (GCS, raylet) die with the driver (they are started fate-sharing with it),
    # and take the worker processes with them.
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 15)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def detect_profile() -> str:
    """The smoke profile for the stack installed here: the Hopper image's verl -> Hopper stack, other vLLM ->
    A100 stack, else the P40 stack."""
    from rlrecipes.recipe.images import IMAGES
    from rlrecipes.verlenv import installed_verl

    if installed_verl() == IMAGES["hopper"].verl:
        return "any-1gpu-hopper"
    return "any-1gpu-vllm" if importlib.util.find_spec("vllm") is not None else "any-1gpu"


def check_patch(python: str) -> Check:
    script = repo_root() / "scripts" / "patch_verl.py"
    result = subprocess.run([python, str(script), "--image", "p40", "--check"], capture_output=True, text=True,
                            timeout=120)
    lines = [ln.strip() for ln in (result.stdout + result.stderr).splitlines() if ln.strip()]
    return Check("stack", "verl 0.5.0 P40 patch applied", result.returncode == 0, lines[-1] if lines else "")


def merge_and_compare(ckpt_dir: Path, base_dir: Path, out_dir: Path, python: str, env: dict[str, str],
                      recipe: str) -> Check:
    """Merge the last checkpoint with `rlrecipes merge` (a subprocess, in the training interpreter)
    and check that the result loads as a causal LM whose weights differ from the base model."""
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [python, "-m", "rlrecipes", "merge", str(ckpt_dir), "--out", str(out_dir)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        return Check(recipe, "merge -> loadable model, weights moved", False,
                     f"`{' '.join(cmd[1:])}` exit {result.returncode}: {' | '.join(tail)}")
    code = (
        "import json, sys, torch\n"
        "from transformers import AutoModelForCausalLM\n"
        "merged = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float32).state_dict()\n"
        "base = AutoModelForCausalLM.from_pretrained(sys.argv[2], torch_dtype=torch.float32).state_dict()\n"
        "assert merged.keys() == base.keys(), sorted(set(merged) ^ set(base))[:5]\n"
        "diff = {k: (merged[k] - base[k]).abs().max().item() for k in base}\n"
        "print(json.dumps({'tensors': len(diff), 'changed': sum(v > 0 for v in diff.values()),"
        " 'max_abs_diff': max(diff.values())}))\n"
    )
    result = subprocess.run([python, "-c", code, str(out_dir), str(base_dir)], capture_output=True, text=True,
                            env=env, timeout=600)
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-2:]
        return Check(recipe, "merge -> loadable model, weights moved", False, f"load failed: {' | '.join(tail)}")
    stats = json.loads(result.stdout.strip().splitlines()[-1])
    return Check(recipe, "merge -> loadable model, weights moved", stats["changed"] > 0,
                 f"{stats['changed']}/{stats['tensors']} tensors changed, max |diff| {stats['max_abs_diff']:.3g} "
                 f"({' '.join(cmd[1:3])})")


def smoke_recipe(name: str, profile: str, work: Path, assets: dict, python: str, echo, timeout: float,
                 extra: list[str]) -> tuple[list[Check], dict]:
    from rlrecipes.recipe.load import resolve

    env = dict(os.environ)
    env.update({
        "MODELS_DIR": assets["models_dir"],
        "DATA_DIR": assets["data_dir"],
        "CKPT_DIR": str(work / "checkpoints"),
        "LOG_DIR": str(work / "logs"),
        "REWARD_FN": str(PACKAGE_DIR / "smoke" / "reward.py"),
        "RAY_DEDUP_LOGS": "0",
        "PYTHONUNBUFFERED": "1",
        "WANDB_MODE": "offline",
        # A smoke run is one local GPU: never join a cluster named by RAY_ADDRESS or left behind by an
        # earlier `ray start` (/tmp/ray/ray_current_cluster), whose num_cpus clash fails ray.init.
        "RAY_ADDRESS": "local",
    })
    # The reward file imports rlrecipes inside verl's Ray workers, which inherit this environment.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo_root()), env.get("PYTHONPATH")]))
    run = resolve(name, profile=profile, overrides=extra, env=env)
    total = int(run.get("trainer.total_training_steps"))
    if int(run.get("trainer.save_freq")) != KILL_AFTER_STEP or total <= KILL_AFTER_STEP + 1:
        raise RecipeError(f"the smoke check needs save_freq={KILL_AFTER_STEP} and more than "
                          f"{KILL_AFTER_STEP + 1} steps; got save_freq={run.get('trainer.save_freq')}, "
                          f"total_training_steps={total}", where=str(run.recipe.path))
    cmd = [python, "-m", "verl.trainer.main_ppo", *run.hydra_overrides()]
    ckpt = run.ckpt_dir
    shutil.rmtree(ckpt, ignore_errors=True)  # a smoke run starts from scratch, always
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    env["VERL_FILE_LOGGER_PATH"] = str(run.log_dir / f"metrics-{stamp}-1.jsonl")
    first = launch(cmd, env, run.log_dir / f"console-{stamp}-1.log", KILL_AFTER_STEP, timeout, echo)
    first_steps = parse_steps(first.text)
    checks = check_first_launch(name, ckpt, first.killed, first_steps)
    env["VERL_FILE_LOGGER_PATH"] = str(run.log_dir / f"metrics-{stamp}-2.jsonl")
    second = launch(cmd, env, run.log_dir / f"console-{stamp}-2.log", None, timeout, echo)
    second_steps = parse_steps(second.text)
    checks += check_resume(name, second.text, second_steps, second.rc, total)
    if first.timed_out or second.timed_out:
        checks.append(Check(name, "launches within the time limit", False,
                            f"a launch ran past {timeout:.0f} s and was killed"))
    use_kl = bool(run.get("actor_rollout_ref.actor.use_kl_loss"))
    checks += check_metrics(name, {**first_steps, **second_steps}, expected_losses(run.use_critic, use_kl))
    if run.profile.rollout != "hf":
        checks.append(check_rollout_in_sync(name, {**first_steps, **second_steps}))
    if second.rc == 0:
        checks.append(merge_and_compare(ckpt, run.model_path, work / "merged" / name, python, env, name))
    else:
        checks.append(Check(name, "merge -> loadable model, weights moved", False, "skipped: training failed"))
    timing = {"recipe": name, "profile": profile, "first_launch_s": round(first.seconds, 1),
              "second_launch_s": round(second.seconds, 1), "consoles": [str(first.console), str(second.console)],
              "command": cmd}
    return checks, timing


def format_table(checks: list[Check]) -> str:
    """Plain fixed-width table (it lands in logs and CI output, where colour codes are noise)."""
    rows = [("recipe", "check", "result", "detail")]
    rows += [(c.recipe, c.name, "PASS" if c.ok else "FAIL", c.detail) for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(r[j].ljust(widths[j]) for j in range(3)) + "  " + r[3])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 6)
    passed = sum(c.ok for c in checks)
    lines.append(f"{passed}/{len(checks)} checks passed")
    return "\n".join(lines)


def default_work_dir() -> Path:
    """$SMOKE_DIR, else /workspace/smoke inside the images (the runtime volume), else runs/smoke."""
    if os.environ.get("SMOKE_DIR"):
        return Path(os.environ["SMOKE_DIR"])
    if os.path.isdir("/workspace") and os.access("/workspace", os.W_OK):
        return Path("/workspace/smoke")
    return Path("runs/smoke")
