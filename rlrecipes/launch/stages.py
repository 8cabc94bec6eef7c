"""The stage engine: every stage a run goes through, in one place.

    rlrecipes stage STAGE [ARGS...]     (the images' entry point runs this; RECIPE and PROFILE from the environment)

    run           assets (a recipe built offline) or data + model, then resume         [compose's default]
    assets        the recipe's offline builder (`assets:` in the recipe: smoke-assets, canary-assets)
    data          the recipe's dataset as verl parquet under DATA_DIR (skipped when its manifest is there)
    model         the recipe's base model into MODELS_DIR (a no-op when complete; resumes a cut download)
    resume-check  repair the checkpoint tracker so verl resumes from the last whole checkpoint
    preflight     GPUs, memory, disk, shm, model, data; writes the environment the launch needs
    train         preflight, the Ray cluster check (RAY_ADDRESS), then the recipe's launcher, once, with the
                  compile caches under CACHE_DIR (COMPILE_CACHES); a damaged vLLM cache index is set aside first
    resume        resume-check then train; again after a stall (exit 75), at most STALL_RESTARTS times
    eval          `rlrecipes eval ARGS` with the recipe's own validation file for its fast check

`rlrecipes reproduce` (rlrecipes/launch/reproduce.py) chains these and the after-training commands.

Running a stage again is its recovery: every stage goes on from what the last one left. The data and the
model are kept when whole, verl resumes from the last checkpoint the tracker names (resume-check repairs the
tracker first), and the launcher of a profile other than the recipe's own is the run directory
LOG_DIR/RECIPE/run-PROFILE, reused when it was rendered for the same launch and refused, naming the
difference, when it was not (rlrecipes/recipe/render.py: ensure_run_dir).

A stage stopped by SIGTERM, SIGINT or SIGHUP exits 143, 130 or 129 (the launcher's stop guard lets a checkpoint
save in flight finish first) and says in one line where the same command goes on. Child processes are started
and signalled one way (rlrecipes/process.py). A launch that fails while the checkpoint volume is full (the
watchdog's fresh status says so, or the free space is below one checkpoint) says so in one line, with the
checkpoint the same command goes on from: verl's own error for it is torch's "unexpected pos" or "iostream error".
"""

from __future__ import annotations

import ast
import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rlrecipes.errors import RecipeError, StageFailed
from rlrecipes.fsutil import human_bytes
from rlrecipes.paths import repo_root
from rlrecipes.process import Ended, run_forwarding, signal_name
from rlrecipes.recipe.load import ResolvedRun
from rlrecipes.verl.checkpoints import default_status_path, read_tracker, step_dir, step_dir_name, tree_stats
from rlrecipes.verl.stopguard import EXIT_STALLED, fresh_status

STALL_RESTARTS_DEFAULT = 3
STAGES = ("run", "assets", "data", "model", "resume-check", "preflight", "train", "resume", "eval")
# The compile caches of a launch, each a folder under the run's CACHE_DIR (compose.yaml's `cache` volume), so a
# relaunch or a new container starts warm. Their defaults are inside the container and lost with it. Each variable
# as the Hopper image's vLLM 0.24.0, torch 2.11.0 and Triton 3.6.0 read it (torch and Triton write an entry under a
# temporary name and rename it: codecache.py write_atomic, runtime/cache.py FileCacheManager.put):
#   VLLM_CACHE_ROOT          vllm/envs.py (default ~/.cache/vllm): torch.compile artefacts under
#                            torch_compile_cache/ -- vLLM also points inductor and Triton of its own engine below
#                            that folder (vllm/compilation/compiler_interface.py: InductorAdaptor.initialize_cache).
#                            verl's Ray runtime env sets VLLM_DISABLE_COMPILE_CACHE=1 unless the launch's env sets
#                            it (verl/trainer/constants_ppo.py, vllm#31199): the engine compiles at every launch
#                            (docs/images.md, Compile caches)
#   TORCHINDUCTOR_CACHE_DIR  torch/_inductor/runtime/cache_dir_utils.py cache_dir() (default /tmp/torchinductor_USER):
#                            the trainer's own torch.compile
#   TRITON_CACHE_DIR         triton/knobs.py cache_knobs.dir (default ~/.triton/cache): Triton kernels built outside
#                            vLLM
COMPILE_CACHES = {"VLLM_CACHE_ROOT": "vllm", "TORCHINDUCTOR_CACHE_DIR": "inductor", "TRITON_CACHE_DIR": "triton"}


def log(message: str) -> None:
    print(f"[rlrecipes] {message}", file=sys.stderr, flush=True)


def rlrecipes_command(argv: list[str]) -> int:
    """An rlrecipes command run as a process of its own (the one way the engine starts children), with its exit
    status; a stop signal reaching the engine meanwhile is passed on and ends it with 128 + the signal."""
    ended = run_forwarding([sys.executable, "-m", "rlrecipes", *argv])
    if ended.stopped:
        log(f"`rlrecipes {argv[0]}` stopped by {signal_name(ended.status)} (exit {ended.status}); the same command "
            "goes on from there")
    return ended.status


def checkpoint_step(ckpt_dir: Path) -> int | None:
    """The step of the last whole checkpoint (the one verl's tracker names), if any."""
    tracker = read_tracker(ckpt_dir)
    return tracker.step if tracker.status == "ok" else None


def where_it_goes_on(ckpt_dir: Path) -> str:
    step = checkpoint_step(ckpt_dir)
    return (f"from the checkpoint of step {step} ({ckpt_dir})" if step is not None
            else f"from step 0 (no whole checkpoint under {ckpt_dir} yet)")


# the watchdog's findings that mean the next checkpoint save has no room (rlrecipes/watchdog: runner, policy)
DISK_FINDINGS = ("disk-full", "budget-exceeded")


def volume_full(ckpt_dir: Path, status_file: Path | None, now: float | None = None) -> str | None:
    """Why a failed launch's checkpoint volume could not take a save, or None: the watchdog's finding when its
    status is fresh, else the free space against the size of the newest whole checkpoint."""
    status = fresh_status(status_file, time.time() if now is None else now)
    findings = status.get("findings") if status else None
    for finding in findings if isinstance(findings, list) else []:  # a malformed status says nothing
        if isinstance(finding, dict) and finding.get("code") in DISK_FINDINGS:
            return f"the watchdog: {finding.get('message')}"
    step = checkpoint_step(ckpt_dir)
    if step is None:
        return None
    size = tree_stats(step_dir(ckpt_dir, step)).bytes
    try:
        free = shutil.disk_usage(ckpt_dir).free
    except OSError:
        return None
    if free >= size:
        return None
    return f"{human_bytes(free)} free on it, and a checkpoint ({step_dir_name(step)}) takes {human_bytes(size)}"


def compile_caches(cache_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """COMPILE_CACHES that `env` leaves unset or empty, each a folder under `cache_dir`, created; a value set in
    `env` (the user's, .env's) is kept and its folder left alone."""
    wanted = {key: cache_dir / sub for key, sub in COMPILE_CACHES.items() if not env.get(key)}
    for key, path in wanted.items():
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StageFailed(f"cannot create the compile cache folder {path}: {exc.strerror}", where="CACHE_DIR",
                              hint=f"make {cache_dir} writable, or set CACHE_DIR (or {key}) to a writable "
                                   "folder") from exc
    return {key: str(path) for key, path in wanted.items()}


# vLLM's compile-cache index, one per VLLM_CACHE_ROOT/torch_compile_cache/<hash>/rank_<r>_<dp>/<prefix>/: vLLM 0.24
# writes it with a plain open(path, "w") (vllm/compilation/backends.py CompilerManager.save_to_file) and reads it at
# the next start with ast.literal_eval(f.read()), then .items(), unguarded (initialize_cache) -- unlike the compiled
# artefacts, which torch 2.11 writes with write_atomic. Read only with the cache on (VLLM_DISABLE_COMPILE_CACHE=0;
# verl sets 1 unless the launch's environment sets it); docs/images.md, Compile caches.
VLLM_CACHE_INDEX = "vllm_compile_cache.py"


def vllm_index_problem(text: str) -> str | None:
    """What vLLM 0.24's CompilerManager.initialize_cache would fail on in an index's text, or None: not a Python
    literal, not a dict, or a key that is not (range as (start, end), graph index, compiler name)."""
    try:
        cache = ast.literal_eval(text)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError) as exc:
        return f"does not parse ({type(exc).__name__})"
    if not isinstance(cache, dict):
        return f"holds a {type(cache).__name__}, not a dict"
    for key in cache:
        if not (isinstance(key, tuple) and len(key) == 3 and isinstance(key[1], int) and isinstance(key[2], str)
                and isinstance(key[0], tuple) and len(key[0]) == 2 and all(isinstance(n, int) for n in key[0])):
            return f"has a key vLLM does not read: {key!r:.60}"
    return None


def set_aside_damaged_vllm_cache_indexes(vllm_cache_root: Path) -> list[tuple[Path, str]]:
    """Every vLLM compile-cache index under `vllm_cache_root` that vLLM's own reader would fail on (a stop inside its
    write, two engines writing it at once), renamed to <index>.damaged so that vLLM compiles those graphs again
    instead of failing every later launch: [(index, why)]. A whole index is left as it is."""
    moved = []
    for index in sorted((vllm_cache_root / "torch_compile_cache").glob(f"*/rank_*/**/{VLLM_CACHE_INDEX}")):
        try:
            why = vllm_index_problem(index.read_text())
        except UnicodeDecodeError:
            why = "is not text"
        except OSError:
            continue  # unreadable here: vLLM's own error names it
        if why:
            try:
                os.replace(index, index.with_name(index.name + ".damaged"))
            except OSError as exc:  # a read-only cache: vLLM will fail on it, say so instead of a traceback here
                raise StageFailed(f"vLLM's compile-cache index {index} {why} and cannot be set aside: {exc.strerror}",
                                  where="VLLM_CACHE_ROOT", hint=f"remove {index}, or point VLLM_CACHE_ROOT (or "
                                  "CACHE_DIR) at a writable folder") from exc
            moved.append((index, why))
    return moved


def stall_restarts(env: dict[str, str]) -> int:
    raw = env.get("STALL_RESTARTS", str(STALL_RESTARTS_DEFAULT))
    if not raw.isdigit():
        raise RecipeError(f"must be a whole number, not {raw!r}", where="STALL_RESTARTS")
    return int(raw)


@dataclass
class Stages:
    """The stages of one run: a resolved recipe, the Hydra overrides of its launch, the environment."""

    run: ResolvedRun
    overrides: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    home: Path = field(default_factory=repo_root)  # RLRECIPES_HOME, else this checkout

    @property
    def name(self) -> str:
        return self.run.name

    def _profile_args(self) -> list[str]:
        return ["--profile", self.run.profile.name]

    # ---- before training -------------------------------------------------------------------------------
    def assets(self, *args: str) -> int:
        if not self.run.recipe.assets:
            raise RecipeError("has no offline assets (no `assets:` key): its inputs are the data and model stages",
                              where=str(self.run.recipe.path))
        paths = self.run.paths
        return rlrecipes_command([self.run.recipe.assets, "--models-dir", paths["MODELS_DIR"],
                                  "--data-dir", paths["DATA_DIR"], *args])

    def data(self, *args: str) -> int:
        out = self.run.data_dir
        if (out / "manifest.json").is_file() and self.env.get("FORCE_DATA", "0") != "1":
            log(f"data: {out / 'manifest.json'} exists; skipping (FORCE_DATA=1 rebuilds)")
            return 0
        dataset = self.run.recipe.dataset
        return rlrecipes_command(["data", dataset.name, "--out", str(out), "--template", dataset.template, *args])

    def model(self, *args: str) -> int:
        return rlrecipes_command(["model", self.name, "--models-dir", self.run.paths["MODELS_DIR"], *args])

    def inputs(self) -> int:
        """What training reads: the offline assets, or the dataset and the base model."""
        if self.run.recipe.assets:
            return self.assets()
        return self.data() or self.model()

    def resume_check(self) -> int:
        root = Path(self.run.paths["CKPT_DIR"]) / self.name
        if not root.is_dir():
            log(f"resume-check: no checkpoints at {root} yet; training starts at step 0")
            return 0
        return rlrecipes_command(["resume-check", "--root", str(root)])

    def preflight(self, *args: str) -> int:
        return rlrecipes_command(["preflight", self.name, *self._profile_args(), *args, *self.overrides])

    # ---- training --------------------------------------------------------------------------------------
    def launcher(self) -> Path:
        """recipes/RECIPE.sh on the recipe's own profile; the run directory's train.sh on another."""
        if self.run.profile.name == self.run.recipe.profile:
            launcher = self.home / "recipes" / f"{self.name}.sh"
            if not launcher.is_file():
                raise RecipeError("no launcher", where=str(launcher), hint="regenerate it: rlrecipes launchers")
            return launcher
        from rlrecipes.recipe.load import resolve
        from rlrecipes.recipe.render import ensure_run_dir

        plain = resolve(self.name, profile=self.run.profile.name, overrides=[], env=self.env)
        return ensure_run_dir(plain, self.run.log_dir / f"run-{self.run.profile.name}", _validated_config)

    def train(self) -> int:
        """preflight, the cluster check, the launcher: once."""
        env_file = self.run.log_dir / "launch.env"
        env_file.parent.mkdir(parents=True, exist_ok=True)
        code = self.preflight("--env-file", str(env_file))
        if code:
            return code
        launch_env = {**self.env, **_read_env_file(env_file), **self.run.paths, "RECIPE": self.name}
        launch_env.update(compile_caches(Path(self.run.paths["CACHE_DIR"]), launch_env))
        for index, why in set_aside_damaged_vllm_cache_indexes(Path(launch_env["VLLM_CACHE_ROOT"])):
            log(f"train: vLLM's compile-cache index {index} {why}: set aside as {index.name}.damaged "
                "(vLLM compiles that graph again)")
        if launch_env.get("RAY_ADDRESS"):
            code = rlrecipes_command(["cluster", self.name, *self._profile_args(),
                                      "--wait", launch_env.get("CLUSTER_WAIT", "0"), *self.overrides])
            if code:
                return code
        launcher = self.launcher()
        log(f"train: bash {launcher} {' '.join(self.overrides)}".rstrip())
        ended = run_forwarding(["bash", str(launcher), *self.overrides], launch_env)
        return self._ended("train", ended)

    def resume(self) -> int:
        """resume-check then train; again after a stall stopped it (exit 75), at most STALL_RESTARTS times."""
        limit = stall_restarts(self.env)
        restarts = 0
        while True:
            code = self.resume_check() or self.train()
            if code != EXIT_STALLED:
                return code
            if restarts >= limit:
                log(f"error: the run stalled again after {restarts} relaunch(es) (STALL_RESTARTS={limit}); "
                    "giving up")
                return code
            restarts += 1
            log(f"the run stalled and was stopped (exit {EXIT_STALLED}); relaunch {restarts} of {limit} "
                f"{where_it_goes_on(self.run.ckpt_dir)}")

    def run_all(self) -> int:
        return self.inputs() or self.resume()

    def _ended(self, stage: str, ended: Ended) -> int:
        if ended.stopped:
            log(f"{stage} stopped by {signal_name(ended.status)} (exit {ended.status}); the same command goes on "
                f"{where_it_goes_on(self.run.ckpt_dir)}")
        elif ended.status not in (0, EXIT_STALLED):
            full = volume_full(self.run.ckpt_dir, self._watchdog_status())
            if full:
                log(f"{stage} failed (exit {ended.status}) with the checkpoint volume full ({full}); free space "
                    f"under {self.run.ckpt_dir.parent} or raise its quota, then run the same command: it goes on "
                    f"{where_it_goes_on(self.run.ckpt_dir)}")
        return ended.status

    def _watchdog_status(self) -> Path:
        """The status file the watchdog writes for this run's checkpoints (compose's sidecar and RunPod's set
        RLRECIPES_STALL_STATUS; its default is under the checkpoint root)."""
        given = self.env.get("RLRECIPES_STALL_STATUS")
        return Path(given) if given else default_status_path(self.run.ckpt_dir.parent)

    # ---- after training --------------------------------------------------------------------------------
    def eval(self, *args: str) -> int:
        # the recipe's validation file for the fast check; ARGS may name another (the last --fast-data wins)
        return rlrecipes_command(["eval", "--fast-data", str(self.run.get("data.val_files")), *args])

    def dispatch(self, stage: str, args: list[str]) -> int:
        """Run STAGE; ARGS are Hydra overrides for run/train/resume, the command's own options otherwise."""
        if stage in ("run", "train", "resume"):
            self.overrides = list(args)
            return {"run": self.run_all, "train": self.train, "resume": self.resume}[stage]()
        if stage == "resume-check":
            return self.resume_check()
        return {"assets": self.assets, "data": self.data, "model": self.model, "preflight": self.preflight,
                "eval": self.eval}[stage](*args)


def _validated_config(run: ResolvedRun):
    """The composed verl config for a run directory's config.yaml, or an error naming what verl refused."""
    from rlrecipes.recipe.validate import validate_runs

    (result,) = validate_runs([run])
    if not result.ok:
        raise RecipeError(result.describe(), where=f"{run.name} on {run.profile.name}")
    return result.config


def _read_env_file(path: Path) -> dict[str, str]:
    """preflight --env-file's KEY=VALUE lines."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    return dict(line.split("=", 1) for line in lines if "=" in line)


def require_gpu(what: str, inventory) -> None:
    """Refuse, at once, work that needs an NVIDIA GPU on a host without one (what scripts/require-gpu.sh does
    for the Make targets), pointing at what does run here. `inventory`: the detected GPUs
    (rlrecipes.preflight.inventory.detect_inventory)."""
    from rlrecipes.errors import EnvironmentMissing

    if not inventory.gpus:
        raise EnvironmentMissing(f"needs a host with an NVIDIA GPU and driver ({inventory.error or 'none found'})",
                                 where=what, hint="on this host: rlrecipes plan / validate RECIPE, make test")
