"""`rlrecipes reproduce RECIPE`: one run from nothing to a verdict, resumable stage by stage.

    assets (or data, model) -> train -> merge -> eval -> report -> expect

A chain over the stage engine (rlrecipes/launch/stages.py): `train` is its `resume` stage (resume-check,
preflight, the launcher, a relaunch after a stall), `data` and `model` are its own stages, and `merge`, `eval`,
`report`, `expect` and the offline asset builders (a recipe's `assets:` key) are rlrecipes commands. Each stage
runs as a process of its own (`python -m rlrecipes ...`, so a stage's GPU memory is freed before the next one),
started and signalled the one way the engine starts children (rlrecipes/process.py). This module orders
them and remembers which finished.

State: LOG_DIR/RECIPE/reproduce.json, rewritten atomically after every stage. A stage is done once its
process exited 0 (expect: 0 or 1, which is its verdict, not a failure); `failed` with its exit status
otherwise, and `interrupted` when a stop signal (SIGTERM, SIGINT, SIGHUP) ended it, with the step of the last
whole checkpoint (`checkpoint`). A rerun skips the done stages and runs the first one that is not from its
start, replacing what it left half-written: the asset builders and `data` rebuild what their manifest does
not match, `model` resumes its download, verl resumes training at its last complete checkpoint (resume-check
repairs the tracker first), merge replaces its output (--force), eval, report and expect rewrite theirs. The
state names the recipe, profile and overrides it was started with (and the seed, when one was given); a rerun
with others is refused, `--restart` starts over.

Seeds (`--seed N`, for a recipe whose model and data are built offline by its `assets:` builder): the builder
makes its data, tokenizer and warm start from seed N, and the run keeps to folders of its own --
`seed-N/` under MODELS_DIR, DATA_DIR, CKPT_DIR, LOG_DIR and REPORTS_DIR (CACHE_DIR, compile caches only, is
shared) -- so two seeds never resume each other's checkpoints and can run side by side.

Exit status: expect's (0 all that was measured met, 1 something missed), else that of the stage that
failed (130 / 143 / 129 when interrupted).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import atomic_write_text
from rlrecipes.process import Ended, run_forwarding

STATE_FILE = "reproduce.json"
STATE_VERSION = 1
REPORTS_DIR_DEFAULT = "/workspace/reports"
# A seed's run keeps to seed-N/ below each of these (CACHE_DIR holds compile caches only: shared).
SEEDED_DIRS = ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR", "REPORTS_DIR")
FAST_EVAL_MAX_NEW_TOKENS = 512  # `rlrecipes eval --max-new-tokens`' default  # compose.yaml / in-image.sh mount ./reports there


@dataclass(frozen=True)
class Stage:
    name: str
    argv: tuple[str, ...]  # an rlrecipes command line: the command (`stage` for the engine's), its arguments
    verdicts: tuple[int, ...] = (0,)  # exit statuses that finish the stage
    gpu: bool = False  # needs the GPU: a host without one is refused before the first stage

    def command(self) -> list[str]:
        return [sys.executable, "-m", "rlrecipes", *self.argv]


def seeded_environ(environ: dict[str, str], seed: int) -> dict[str, str]:
    """`environ` with each of SEEDED_DIRS (its value there, else its default) moved to its `seed-N/` folder."""
    from rlrecipes.recipe.load import PATH_DEFAULTS

    defaults = {**PATH_DEFAULTS, "REPORTS_DIR": REPORTS_DIR_DEFAULT}
    return {**environ, **{key: str(Path(environ.get(key) or defaults[key]) / f"seed-{seed}") for key in SEEDED_DIRS}}


def plan_stages(run, overrides: list[str], reports_dir: Path, gpu: str | None = None,
                seed: int | None = None) -> list[Stage]:
    """The stages of `run` (a ResolvedRun), in order, with the paths each reads and writes. `gpu`: the GPU model
    this host trains on, for expect to weigh the cost against references measured on that model. `seed`: the
    asset builder's (a recipe without one takes none)."""
    paths = run.paths
    models = Path(paths["MODELS_DIR"])
    logs, name, profile = run.log_dir, run.name, run.profile.name
    merged = models / f"{name}-merged"
    evaluated = merged / "eval"
    engine = ("stage", "--recipe", name, "--profile", profile)
    stages: list[Stage] = []
    if seed is not None and not run.recipe.assets:
        raise RecipeError(f"--seed {seed}: {name}'s model and data are not built here (no `assets:` builder), so "
                          "there is nothing for a seed to choose", where=str(run.recipe.path),
                          hint="seeds are for the recipes built offline (the canaries and smoke recipes)")
    if run.recipe.assets:  # built offline, model and data together (smoke-assets, canary-assets)
        seeded = ("--seed", str(seed)) if seed is not None else ()
        stages.append(Stage("assets", (run.recipe.assets, "--models-dir", str(models),
                                       "--data-dir", paths["DATA_DIR"], *seeded), gpu=True))
    else:
        stages += [Stage("data", (*engine, "data")), Stage("model", (*engine, "model"))]
    # The fast eval generates no longer than the rollout could (what training was scored on), nor longer
    # than its own default.
    max_new = min(FAST_EVAL_MAX_NEW_TOKENS, run.get("data.max_response_length", kind=int))
    eval_args = ["--out", str(evaluated), "--max-new-tokens", str(max_new)]
    on_gpu = ("--gpu", gpu) if gpu else ()
    if run.recipe.assets:
        eval_args.append("--skip-lm-eval")  # lm-eval's gsm8k is the hub's GSM8K, not the recipe's offline task
    stages += [
        Stage("train", (*engine, "resume", "--", *overrides), gpu=True),
        Stage("merge", ("merge", str(run.ckpt_dir), "--recipe", name, "--out", str(merged), "--log-dir", str(logs),
                        "--force")),
        Stage("eval", (*engine, "eval", "--", str(merged), *eval_args), gpu=True),
        # the report's contract table and expect's verdict weigh the cost against the same GPU model
        Stage("report", ("report", str(logs), "--out", str(reports_dir / name), "--eval", str(evaluated),
                         "--recipe", name, "--profile", profile, *on_gpu)),
        Stage("expect", ("expect", str(logs), "--recipe", name, "--profile", profile, "--eval", str(evaluated),
                         "--out", str(logs / "expect.json"), *on_gpu), verdicts=(0, 1)),
    ]
    return stages


class Run:
    """The state file of one reproduction: which stages finished, with their exit status and duration."""

    def __init__(self, path: Path, identity: dict, restart: bool):
        self.path = path
        self.identity = identity
        state = None if restart else self._read()
        if state is not None and state.get("identity") != identity:
            raise RecipeError(
                f"it was started as {json.dumps(state.get('identity'), sort_keys=True)}, not as "
                f"{json.dumps(identity, sort_keys=True)}", where=str(path),
                hint="rerun it as it was started, or pass --restart to start over (stages run again)")
        self.stages: dict[str, dict] = (state or {}).get("stages", {})

    def _read(self) -> dict | None:
        try:
            state = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise RecipeError(f"unreadable state: {exc}", where=str(self.path),
                              hint="pass --restart to start over") from None
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION \
                or not isinstance(state.get("stages"), dict):
            raise RecipeError(f"not a reproduce state of version {STATE_VERSION}", where=str(self.path),
                              hint="pass --restart to start over")
        return state

    def done(self, stage: Stage) -> bool:
        return self.stages.get(stage.name, {}).get("status") == "done"

    def record(self, stage: Stage, status: str, **fields) -> None:
        self.stages[stage.name] = {"status": status, **fields}
        atomic_write_text(self.path, json.dumps({"version": STATE_VERSION, "identity": self.identity,
                                                 "stages": self.stages}, indent=2) + "\n")


def run_stage(stage: Stage, env: dict[str, str]) -> Ended:
    """Run one stage as a process of its own; TERM/INT/HUP reaching this process go on to it (the launcher's
    stop guard lets a checkpoint save in flight finish first)."""
    return run_forwarding(stage.command(), env)
