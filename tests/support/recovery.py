"""The harness of the recovery matrix (tests/launch/test_recovery_matrix.py): a GPU host simulated on this CPU
machine that runs a user's `make` command for real, and the means to stop that command at a chosen moment.

- `prepare_base` builds, once for all cases, what a case starts from: the recipe's offline assets (the real
  `rlrecipes smoke-assets`) and, per verl version, one real LoRA actor checkpoint of that tiny model written by
  verl's own FSDPCheckpointManager on CPU. The stand-in trainer copies that checkpoint's files into every
  global_step_N it saves (STANDIN_SHARDS), so the real `rlrecipes merge` (verl's model_merger, the LoRA fuse, the
  checks) and the real eval run on what "training" saved.
- `Host` is one case's machine: its own workspace (a `cp -a` of the prepared one, or empty), a bin dir with
  the stand-in `nvidia-smi` (one H200; it can pause the first call made under a `preflight` process) and the
  image's `python3` / `rlrecipes` (an interpreter of the profile's verl version, the repository first on
  PYTHONPATH, the stand-in trainer hook after it), and the environment of a shell in the image
  (RLRECIPES_IN_IMAGE=1: `make` runs the entry point directly, the GPU-host path inside the image).
- `Host.start` runs `make TARGET RECIPE=... [PROFILE=...]` in its own process group; `Host.stop_group` signals
  that group the way a terminal does (Ctrl-C, a hangup, `kill -TERM -PGID`, a supervisor stopping it).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
HOOK = FIXTURES / "standin_verl" / "hook"
INVENTORY = FIXTURES / "inventories" / "h200-x1.json"
RECIPE = "smoke-grpo-lora"
MODEL_DIR, DATA_SUBDIR = "smoke-tiny", "smoke-gsm8k"
MODEL_MARKER = ".rlrecipes-model.json"  # rlrecipes/data/model_download.py: a completed download

# Runs inside a verl environment: the tiny model of the assets with LoRA over all linear layers (the recipe's
# lora_rank 8, alpha 16) and B moved off zero (what training does), wrapped with FSDP as verl's actor is (0.5.0:
# FSDP1 use_orig_params; later: FSDP2, the Hopper profile's strategy), saved by verl's own checkpoint manager;
# on 0.5.0 also the worker's actor/lora_adapter/ (fsdp_workers.py), which 0.5.0's merge takes the adapter from.
BUILD_ACTOR = r'''
import json, os, sys
from dataclasses import asdict
from pathlib import Path
import torch
import torch.distributed as dist

base_dir, actor, version, port = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
dist.init_process_group("gloo", rank=0, world_size=1)
from peft import LoraConfig, TaskType, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

tokenizer = AutoTokenizer.from_pretrained(base_dir)
model = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
model = get_peft_model(model, LoraConfig(task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=16,
                                         target_modules="all-linear", bias="none"))
torch.manual_seed(0)
with torch.no_grad():
    for name, param in model.named_parameters():
        if "lora_B" in name:
            param.normal_(0, 0.05)
if version == "0.5.0":
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    fsdp = FSDP(model, use_orig_params=True, device_id=torch.device("cpu"))
else:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    fully_shard(model, mesh=init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",)))
    fsdp = model
optimizer = torch.optim.AdamW([p for p in fsdp.parameters() if p.requires_grad], lr=1e-3)
manager = FSDPCheckpointManager(model=fsdp, optimizer=optimizer, lr_scheduler=None, processing_class=tokenizer,
                                checkpoint_config={"save_contents": ["model", "optimizer", "extra"],
                                                   "load_contents": ["model", "optimizer", "extra"]})
manager.save_checkpoint(local_path=str(actor), global_step=1)
if version == "0.5.0":
    from safetensors.torch import save_file
    from verl.utils.fsdp_utils import layered_summon_lora_params
    config = asdict(model.peft_config["default"])
    config["task_type"], config["peft_type"] = config["task_type"].value, config["peft_type"].value
    targets = config["target_modules"]
    config["target_modules"] = targets if isinstance(targets, str) else sorted(targets)
    (actor / "lora_adapter").mkdir()
    save_file(layered_summon_lora_params(fsdp), str(actor / "lora_adapter" / "adapter_model.safetensors"))
    (actor / "lora_adapter" / "adapter_config.json").write_text(json.dumps(config, indent=4))
dist.destroy_process_group()
'''


# What the images install with rlrecipes (pyproject.toml) and the report's plots need, which the .venvs/verl-*
# validation environments may lack: taken from the test environment (this interpreter) into a directory put last
# on PYTHONPATH, for the modules that verl environment cannot import itself.
IMAGE_EXTRAS = ("rich", "markdown_it", "mdurl", "pygments", "shtab", "pynvml", "matplotlib", "contourpy", "cycler",
                "fontTools", "kiwisolver", "pyparsing", "PIL", "dateutil", "six")


def image_overlay(python: Path, where: Path) -> Path:
    """where/: links to this interpreter's copies of the IMAGE_EXTRAS that `python` cannot import."""
    import importlib.util

    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    missing = subprocess.run([str(python), "-c", probe, *IMAGE_EXTRAS], capture_output=True, text=True,
                             check=True).stdout.split()
    where.mkdir(parents=True, exist_ok=True)
    for name in missing:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, f"{name}: not in the test environment either"
        src = Path(spec.origin)
        src = src.parent if src.name == "__init__.py" else src
        (where / src.name).symlink_to(src)
        for extra in src.parent.glob(f"{name.lower()}*.libs"):  # pillow.libs: its bundled shared libraries
            if not (where / extra.name).exists():
                (where / extra.name).symlink_to(extra)
        for dist in src.parent.glob("*.dist-info"):
            top = dist / "top_level.txt"
            if top.is_file() and name in top.read_text().split() and not (where / dist.name).exists():
                (where / dist.name).symlink_to(dist)
    return where


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) of every file under root: a rebuild or a rewrite changes them."""
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def prepare_base(base: Path, pythons: dict[str, Path]) -> Path:
    """Build (once; other xdist workers wait on the lock and reuse it) the assets and one actor checkpoint per
    verl version under base/. Returns base/."""
    base.mkdir(parents=True, exist_ok=True)
    done = base / "ready.json"
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return base
        timings = {}
        env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
        started = time.monotonic()
        python = next(iter(pythons.values()))
        proc = subprocess.run([str(python), "-m", "rlrecipes", "smoke-assets", "--models-dir", str(base / "models"),
                               "--data-dir", str(base / "data")], capture_output=True, text=True, env=env,
                              timeout=600)
        assert proc.returncode == 0, f"smoke-assets failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        timings["assets"] = round(time.monotonic() - started, 1)
        # `make train`/`resume` run the entry point's `model` stage, which knows no offline assets: offline
        # (HF_HUB_OFFLINE=1) it takes a model as complete only with this marker, as its own hint says to touch.
        (base / "models" / MODEL_DIR / MODEL_MARKER).write_text(json.dumps({"hub_id": "rlrecipes/smoke-tiny"}))
        script = base / "build_actor.py"
        script.write_text(BUILD_ACTOR)
        for i, (version, python) in enumerate(pythons.items()):
            started = time.monotonic()
            actor = base / "actors" / version / "actor"
            shutil.rmtree(actor.parent, ignore_errors=True)
            port = str(29700 + (os.getpid() % 200) + i)
            proc = subprocess.run([str(python), str(script), str(base / "models" / MODEL_DIR), str(actor), version,
                                   port], capture_output=True, text=True, env=env, timeout=600)
            assert proc.returncode == 0, f"actor checkpoint for verl {version}:\n{proc.stderr[-4000:]}"
            timings[f"actor {version}"] = round(time.monotonic() - started, 1)
            image_overlay(python, base / "overlay" / version)
        done.write_text(json.dumps(timings) + "\n")
    return base


PAUSING_SMI = r'''#!{python}
"""The stand-in nvidia-smi, pausing once (while $MATRIX_PREFLIGHT_MARK does not exist) when called under a
process whose arguments include `preflight`: a stop lands in preflight, deterministically."""
import os, sys, time
mark = os.environ.get("MATRIX_PREFLIGHT_MARK")
if mark and not os.path.exists(mark):
    pid = os.getppid()
    while pid > 1:
        try:
            argv = open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\0")
            pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if b"preflight" in argv:
            open(mark, "w").close()
            time.sleep(600)
            break
os.execv({python!r}, [{python!r}, {smi!r}, *sys.argv[1:]])
'''


@dataclass
class Run:
    """One `make` command, started in its own process group; its output goes to a file."""
    argv: list[str]
    proc: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)

    def output(self, chars: int = 6000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-chars:]

    def group_alive(self) -> bool:
        try:
            os.killpg(self.proc.pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True


@dataclass
class Host:
    root: Path
    version: str  # verl version of the profile: the image's interpreter
    python: Path
    profile: str | None  # None: the recipe's own profile (PROFILE unset, as a user who gives none)
    extra_env: dict[str, str] = field(default_factory=dict)
    runs: int = 0
    seed: int | None = None  # `make reproduce SEED=N`: the run keeps to seed-N/ below each folder

    @property
    def ws(self) -> Path:
        return self.root / "ws"

    @property
    def seeded(self) -> Path:
        return Path(f"seed-{self.seed}") if self.seed is not None else Path()

    @property
    def models(self) -> Path:
        return self.ws / "models" / self.seeded

    @property
    def data(self) -> Path:
        return self.ws / "data" / self.seeded

    @property
    def ckpt(self) -> Path:
        return self.ws / "checkpoints" / self.seeded / RECIPE

    @property
    def logs(self) -> Path:
        return self.ws / "logs" / self.seeded / RECIPE

    @property
    def reports(self) -> Path:
        return self.ws / "reports" / self.seeded

    @property
    def record_path(self) -> Path:
        return self.ws / "checkpoints" / self.seeded / f"standin-{RECIPE}.json"

    @property
    def pause_mark(self) -> Path:
        return self.root / "marks" / "trainer-paused"

    @property
    def preflight_mark(self) -> Path:
        return self.root / "marks" / "preflight-paused"

    @property
    def stall_status(self) -> Path:
        return self.root / "watchdog" / "status.json"

    def setup(self, base: Path, with_assets: bool) -> None:
        self.ws.mkdir(parents=True)
        (self.root / "marks").mkdir()
        (self.root / "home").mkdir()
        if with_assets:
            subprocess.run(["cp", "-a", str(base / "models"), str(base / "data"), str(self.ws)], check=True)
        bin_dir = self.root / "bin"
        bin_dir.mkdir()
        smi = bin_dir / "nvidia-smi"
        smi.write_text(PAUSING_SMI.format(python=sys.executable, smi=str(FIXTURES / "gpuhost" / "nvidia-smi")))
        for name, text in (("python3", f'#!/bin/sh\nexec "{self.python}" "$@"\n'),
                           ("rlrecipes", f'#!/bin/sh\nexec "{self.python}" -m rlrecipes "$@"\n'), ("nvidia-smi", None)):
            path = bin_dir / name
            if text is not None:
                path.write_text(text)
            path.chmod(0o755)
        self.actor_template = base / "actors" / self.version / "actor"
        self.overlay = base / "overlay" / self.version

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TMPDIR")}
        env = dict(
            keep, PATH=f"{self.root / 'bin'}:/usr/local/bin:/usr/bin:/bin", HOME=str(self.root / "home"),
            PYTHONPATH=f"{REPO}:{HOOK}:{self.overlay}", RLRECIPES_IN_IMAGE="1", RLRECIPES_STANDIN_INVENTORY=str(INVENTORY),
            HF_HUB_OFFLINE="1",
            # 2 cores shared by the xdist workers: torch's default thread pool per process oversubscribes them
            # (the fast eval of 64 problems took 65 s instead of 10 s).
            OMP_NUM_THREADS="1",
            MODELS_DIR=str(self.ws / "models"), DATA_DIR=str(self.ws / "data"), CKPT_DIR=str(self.ws / "checkpoints"),
            LOG_DIR=str(self.ws / "logs"), CACHE_DIR=str(self.ws / "cache"), REPORTS_DIR=str(self.ws / "reports"),
            STANDIN_STEP_S="0.2", STANDIN_SAVE_S="0.3", STANDIN_SAVE_FREQ="1",
            STANDIN_SHARDS=str(self.actor_template), STANDIN_PAUSE_MARK=str(self.pause_mark),
            STANDIN_PAUSE_S="3",
            # what the smoke recipe's expect: block judges from the logs, at the values its contract names
            STANDIN_METRICS=",".join(["training/rollout_actor_probs_pearson_corr:0.99",
                                      "training/rollout_probs_diff_mean:0.01", "timing_s/step:7.3",
                                      "actor/perf/max_memory_allocated_gb:2.08"]),
        )
        env.update(self.extra_env)
        return env

    def start(self, target: str) -> Run:
        self.runs += 1
        argv = ["make", "-s", target, f"RECIPE={RECIPE}", *([f"PROFILE={self.profile}"] if self.profile else []),
                *([f"SEED={self.seed}"] if self.seed is not None else [])]
        log = self.root / f"run{self.runs}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, cwd=REPO, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        return Run(argv, proc, log)

    def record(self) -> dict | None:
        try:
            return json.loads(self.record_path.read_text())
        except (OSError, ValueError):
            return None

    def launches(self) -> list[dict]:
        """Every trainer launch the stand-in recorded, oldest first."""
        rec = self.record()
        return [] if rec is None else [*rec.get("earlier", []), rec]

    def state(self) -> dict:
        try:
            return json.loads((self.logs / "reproduce.json").read_text())
        except (OSError, ValueError):
            return {}

    def tracker(self) -> int | None:
        try:
            text = (self.ckpt / "latest_checkpointed_iteration.txt").read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text else None

    def whole(self, step: int) -> bool:
        """global_step_N holds every file of the actor checkpoint, byte for byte, and the dataloader state."""
        step_dir = self.ckpt / f"global_step_{step}"
        if not (step_dir / "data.pt").is_file():
            return False
        for src in self.actor_template.rglob("*"):
            if src.is_file():
                dst = step_dir / "actor" / src.relative_to(self.actor_template)
                if not dst.is_file() or dst.read_bytes() != src.read_bytes():
                    return False
        return True


def stop_group(run: Run, sig: int) -> None:
    try:
        os.killpg(run.proc.pid, sig)
    except ProcessLookupError:
        pass


def wait_exit(run: Run, timeout: float) -> int:
    try:
        return run.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(run, signal.SIGKILL)
        run.proc.wait(timeout=30)
        raise AssertionError(f"{' '.join(run.argv)} still running after {timeout:.0f} s:\n{run.output()}") from None


def wait_group_gone(run: Run, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while run.group_alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
