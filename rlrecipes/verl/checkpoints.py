"""Read verl's checkpoint layout from disk: experiments, step directories, the resume tracker.

What verl writes, and in what order (verl 0.5.0 and 0.8.0; 0.9.1's `_save_checkpoint` writes data.pt and the
tracker the same way, with 0.8.0's async_save exception):

`RayPPOTrainer._save_checkpoint` (verl/trainer/ppo/ray_trainer.py) saves, for step N under
`trainer.default_local_dir`:
  1. `global_step_N/actor/`  via the actor worker's `save_checkpoint`
  2. `global_step_N/critic/` via the critic worker, only when the run has a critic
     (0.8.0 names it `str(Role.Critic)`, which is "critic")
  3. `global_step_N/data.pt` (the dataloader state, `torch.save`)
  4. `latest_checkpointed_iteration.txt` containing "N" -- plain `open(..., "w")`, no fsync, so it is
     briefly empty while being rewritten. 0.8.0 skips it entirely when
     `actor_rollout_ref.actor.checkpoint.async_save` is set.

`FSDPCheckpointManager.save_checkpoint` (verl/utils/checkpoint/fsdp_checkpoint_manager.py) writes,
per rank R of world size W: `model_world_size_W_rank_R.pt`, `optim_world_size_W_rank_R.pt`,
`extra_state_world_size_W_rank_R.pt` (each only when `checkpoint.save_contents` lists it; the defaults
save all three); then rank 0 writes `huggingface/` (config, tokenizer) and `fsdp_config.json` and
(0.8.0, LoRA) `lora_train_meta.json`; 0.5.0's `fsdp_workers.save_checkpoint` adds `lora_adapter/`
afterwards. All `.pt` files come from `torch.save`, whose default format is a zip archive, so a
truncated file is recognisable: its end-of-central-directory record is missing.

`find_latest_ckpt_path` (verl/utils/checkpoint/checkpoint_manager.py) trusts the tracker blindly:
missing file -> train from scratch; unparsable -> crash; step directory missing -> train from scratch.

This module only reads. Decisions live in policy.py, side effects in actions.py.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

TRACKER_NAME = "latest_checkpointed_iteration.txt"
STEP_DIR_RE = re.compile(r"^global_step_(\d+)$")
STEP_DIR_PATTERN = "global_step_N"  # how messages and help texts name a step directory
SHARD_RE = re.compile(r"^(model|optim|extra_state)_world_size_(\d+)_rank_(\d+)\.pt$")
MODEL_SHARD_RE = re.compile(r"^model_world_size_(\d+)_rank_(\d+)\.pt$")
MODEL_SHARD_GLOB = "model_world_size_*_rank_*.pt"
ROLE_DIRS = ("actor", "critic")
# verl 0.5.0's worker saves the PEFT adapter (and its config) here inside actor/ for a LoRA run
LORA_ADAPTER_DIR = "lora_adapter"
WATCHDOG_DIR = ".watchdog"
# Experiments are found below the root down to this depth (verl's default_local_dir is
# checkpoints/<project>/<experiment>, our recipes use CKPT_DIR/<recipe name>).
MAX_DISCOVERY_DEPTH = 4


def default_status_path(root: Path) -> Path:
    """Where the watchdog of checkpoint root `root` writes its status, unless told otherwise (`--status`); the
    stage engine reads it there too."""
    return Path(root) / WATCHDOG_DIR / "status.json"


def step_dir_name(step: int) -> str:
    return f"global_step_{step}"


def step_dir(experiment: Path, step: int) -> Path:
    """Where verl saves step `step` under `trainer.default_local_dir`."""
    return Path(experiment) / step_dir_name(step)


def step_of(path: Path | str) -> int | None:
    """The step a step directory holds (by its name), None for anything else."""
    match = STEP_DIR_RE.match(Path(path).name)
    return int(match.group(1)) if match else None


def tracker_path(experiment: Path) -> Path:
    return Path(experiment) / TRACKER_NAME


def tracker_step(experiment: Path) -> int | None:
    """The step the tracker names when it is readable as verl reads it, else None."""
    return read_tracker(Path(experiment)).step


@dataclass(frozen=True)
class Tracker:
    """The content of latest_checkpointed_iteration.txt as verl would read it."""

    status: str  # "ok" | "missing" | "empty" | "unparsable"
    step: int | None = None
    raw: str = ""
    mtime: float | None = None
    # True while the file is the one the watchdog itself last wrote (same inode, mtime and size):
    # verl has not written a tracker since, as with 0.8.0's async_save, which writes none.
    ours: bool = False


# Where the watchdog notes the tracker it wrote last, per experiment (never read by verl).
TRACKER_NOTE = "tracker.json"


def tracker_note_path(experiment: Path) -> Path:
    return Path(experiment) / WATCHDOG_DIR / TRACKER_NOTE


def _written_by_watchdog(experiment: Path, st: os.stat_result) -> bool:
    try:
        note = json.loads(tracker_note_path(experiment).read_text(encoding="utf-8"))
        return [note["ino"], note["mtime_ns"], note["size"]] == [st.st_ino, st.st_mtime_ns, st.st_size]
    except (OSError, ValueError, KeyError, TypeError):
        return False


@dataclass
class TreeStats:
    bytes: int = 0  # allocated bytes (st_blocks * 512), what the filesystem really spends
    files: int = 0
    newest_mtime: float = 0.0
    # directory -> {name: lstat} of its entries, filled only when asked (keep_entries)
    entries: dict[str, dict[str, os.stat_result]] = field(default_factory=dict)
    dir_mtimes: dict[str, int] = field(default_factory=dict)  # every directory's st_mtime_ns


@dataclass
class StepDir:
    path: Path
    step: int
    bytes: int
    files: int
    newest_mtime: float  # newest mtime of the directory itself or anything inside it
    complete: bool  # structurally complete (every file verl writes is present and whole)
    problem: str = ""  # why it is not complete
    roles: tuple[str, ...] = ()


@dataclass
class Experiment:
    path: Path
    tracker: Tracker
    steps: list[StepDir] = field(default_factory=list)  # ascending by step
    symlinks: list[Path] = field(default_factory=list)  # step-like entries that are symlinks: ignored


@dataclass
class RootScan:
    root: Path
    experiments: list[Experiment]
    root_bytes: int  # everything under the root, trash included (the quota's measure)
    symlinks: list[Path]  # symlinks met anywhere under the root (never followed)
    errors: list[str]


def read_tracker(experiment: Path) -> Tracker:
    path = experiment / TRACKER_NAME
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            return Tracker("unparsable", raw="<not a regular file>", mtime=st.st_mtime)
        raw = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return Tracker("missing")
    text = raw.strip()
    if not text:
        return Tracker("empty", raw=raw, mtime=st.st_mtime)
    # verl does int(f.read().decode()): int() accepts surrounding whitespace, nothing else.
    try:
        step = int(text)
    except ValueError:
        return Tracker("unparsable", raw=raw[:80], mtime=st.st_mtime)
    if step < 0:
        return Tracker("unparsable", raw=raw[:80], mtime=st.st_mtime)
    return Tracker("ok", step=step, raw=raw, mtime=st.st_mtime, ours=_written_by_watchdog(experiment, st))


class ZipCache:
    """Remembers whether a `.pt` file is a whole zip archive, keyed by (path, size, mtime_ns), per step dir."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._seen: dict[str, dict[str, tuple[int, int, bool]]] = {}  # step dir -> path -> verdict

    def whole(self, step_dir: str, path: str, st: os.stat_result) -> bool:
        if not self.enabled:
            return True
        per_step = self._seen.setdefault(step_dir, {})
        hit = per_step.get(path)
        if hit is not None and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return hit[2]
        ok = _ends_like_a_zip(path, st.st_size)
        per_step[path] = (st.st_size, st.st_mtime_ns, ok)
        return ok

    def retain_steps(self, live: set[str]) -> None:
        """Drop what belongs to step dirs that no longer exist (verl or a user removed them)."""
        for key in [k for k in self._seen if k not in live]:
            del self._seen[key]

    def forget(self, step_dir: str) -> None:
        self._seen.pop(step_dir, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._seen.values())


_EOCD = b"PK\x05\x06"  # zip end-of-central-directory signature; torch.save writes no archive comment


def _ends_like_a_zip(path: str, size: int) -> bool:
    """True when the file ends with a zip end-of-central-directory record (a whole archive).

    Fast path: one pread of the last 22 bytes (torch.save archives carry no comment); anything else
    goes to zipfile.is_zipfile, which also finds a record followed by a comment.
    """
    if size < 22:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        tail = os.pread(fd, 22, size - 22)
    except OSError:
        return False
    finally:
        os.close(fd)
    if tail[:4] == _EOCD:
        return True
    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def tree_stats(path: Path, symlinks: list[Path] | None = None, keep_entries: bool = False) -> TreeStats:
    """Allocated size, file count and newest mtime of a directory tree; symlinks are not followed."""
    out = TreeStats()
    try:
        st = path.lstat()
    except FileNotFoundError:
        return out
    out.bytes += st.st_blocks * 512
    out.newest_mtime = st.st_mtime
    if not stat.S_ISDIR(st.st_mode):
        out.files = 1
        return out
    out.dir_mtimes[str(path)] = st.st_mtime_ns
    stack = [str(path)]
    while stack:
        current = stack.pop()
        try:
            it = os.scandir(current)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        listing: dict[str, os.stat_result] = {}
        with it:
            for entry in it:
                try:
                    est = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                listing[entry.name] = est
                out.bytes += est.st_blocks * 512
                if est.st_mtime > out.newest_mtime:
                    out.newest_mtime = est.st_mtime
                if stat.S_ISDIR(est.st_mode):
                    stack.append(entry.path)
                    out.dir_mtimes[entry.path] = est.st_mtime_ns
                else:
                    out.files += 1
                    if symlinks is not None and stat.S_ISLNK(est.st_mode):
                        symlinks.append(Path(entry.path))
        if keep_entries:
            out.entries[current] = listing
    return out


def _role_problem(role_dir: str, names: dict[str, os.stat_result], zips: ZipCache, step_dir: str) -> str:
    """'' when a role directory (actor/ or critic/) holds a whole FSDP checkpoint, else the reason."""
    shards: dict[str, dict[int, set[int]]] = {}
    bad: dict[int, str] = {}  # world size -> first shard of that set that is not whole
    for name, st in sorted(names.items()):
        m = SHARD_RE.match(name)
        if not m:
            continue
        kind, world, rank = m.group(1), int(m.group(2)), int(m.group(3))
        shards.setdefault(kind, {}).setdefault(world, set()).add(rank)
        if world in bad:
            continue
        if not stat.S_ISREG(st.st_mode):
            bad[world] = f"{name} is not a regular file"
        elif not zips.whole(step_dir, os.path.join(role_dir, name), st):
            bad[world] = f"{name} is truncated (not a whole torch.save archive)"
    if "model" not in shards:
        return "no model_world_size_*_rank_*.pt shards"
    # A step re-saved by a run with another GPU count holds two shard sets (verl overwrites the files of
    # its own world size only). verl loads the set of the world size it runs with: one whole set suffices.
    worlds = sorted(shards["model"])
    problems = []
    for world in worlds:
        problem = bad.get(world, "")
        for kind, per_world in sorted(shards.items()):
            if problem:
                break
            if kind == "model" or world in per_world:
                missing = sorted(set(range(world)) - per_world.get(world, set()))
                if missing:
                    problem = f"{kind} shards missing for ranks {missing} of world size {world}"
        if not problem:
            break
        problems.append(problem)
    else:
        return problems[0] if len(problems) == 1 else (
            f"no whole shard set among world sizes {worlds}: " + "; ".join(problems))
    # Rank 0 writes fsdp_config.json after every rank's shards are on disk (both versions).
    if "fsdp_config.json" not in names:
        return "fsdp_config.json missing"
    return ""


def role_problem(role_dir: Path, zip_check: bool = True) -> str:
    """'' when `role_dir` (a step's actor/ or critic/) holds a whole FSDP checkpoint, else why not: the
    same rules as the watchdog's, truncated shards included (for merge, before verl's merger reads it)."""
    try:
        names = {entry.name: entry.stat(follow_symlinks=False) for entry in os.scandir(role_dir)}
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    return _role_problem(str(role_dir), names, ZipCache(zip_check), str(role_dir.parent))


def inspect_step(path: Path, step: int, zips: ZipCache, symlinks: list[Path] | None = None,
                 stats: TreeStats | None = None) -> StepDir:
    stats = stats or tree_stats(path, symlinks, keep_entries=True)
    problem = ""
    roles: list[str] = []
    top = stats.entries.get(str(path))
    if top is None:
        top, problem = {}, "unreadable"
    if not problem:
        if "actor" not in top or not stat.S_ISDIR(top["actor"].st_mode):
            problem = "actor/ missing"
        for role in ROLE_DIRS:
            if problem or role not in top:
                continue
            if not stat.S_ISDIR(top[role].st_mode):
                problem = f"{role} is not a directory"
                break
            role_path = path / role
            names = stats.entries.get(str(role_path))
            if names is None:
                problem = f"{role}/ unreadable"
                break
            why = _role_problem(str(role_path), names, zips, str(path))
            if why:
                problem = f"{role}/: {why}"
                break
            roles.append(role)
    if not problem:
        # data.pt is written after actor/ and critic/ and before the tracker.
        data = top.get("data.pt")
        if data is None:
            problem = "data.pt missing"
        elif not stat.S_ISREG(data.st_mode) or not zips.whole(str(path), str(path / "data.pt"), data):
            problem = "data.pt is truncated (not a whole torch.save archive)"
    return StepDir(
        path=path, step=step, bytes=stats.bytes, files=stats.files, newest_mtime=stats.newest_mtime,
        complete=not problem, problem=problem, roles=tuple(roles),
    )


class StepCache:
    """Skips re-reading settled checkpoints: whole, quiet for `settled_s`, and no directory inside changed.

    A finished verl save is never written again, and adding, removing or renaming anything changes the
    mtime of the directory holding it, so stat-ing the few directories of a step (not its ~50 files)
    tells whether the cached reading still holds. Anything not settled is read in full every pass, and
    a deletion re-reads the directory in full right before it acts (runner.py).
    """

    def __init__(self, settled_s: float):
        self.settled_s = settled_s
        self._seen: dict[str, tuple[dict[str, int], StepDir, list[Path]]] = {}

    def get(self, path: Path) -> tuple[StepDir, list[Path]] | None:
        hit = self._seen.get(str(path))
        if hit is None:
            return None
        for directory, mtime_ns in hit[0].items():
            try:
                if os.stat(directory, follow_symlinks=False).st_mtime_ns != mtime_ns:
                    break
            except OSError:
                break
        else:
            return hit[1], hit[2]
        del self._seen[str(path)]
        return None

    def put(self, info: StepDir, stats: TreeStats, links: list[Path], now: float) -> None:
        if info.complete and now - info.newest_mtime >= self.settled_s:
            self._seen[str(info.path)] = (stats.dir_mtimes, info, links)

    def forget(self, path: Path) -> None:
        self._seen.pop(str(path), None)

    def retain_steps(self, live: set[str]) -> None:
        for key in [k for k in self._seen if k not in live]:
            del self._seen[key]


def scan_root(root: Path, zips: ZipCache | None = None, count_all: bool = True,
              cache: StepCache | None = None) -> RootScan:
    """Find every experiment under `root` (the root itself may be one) and inspect its step dirs.

    Nothing is followed through a symlink. `count_all` also sizes what is not a checkpoint (needed
    for a quota on the whole root).
    """
    zips = ZipCache() if zips is None else zips
    root = Path(root)
    now = time.time()
    experiments: list[Experiment] = []
    symlinks: list[Path] = []
    errors: list[str] = []
    total = 0
    try:
        total += root.lstat().st_blocks * 512
    except FileNotFoundError:
        return RootScan(root, [], 0, [], [f"{root}: does not exist"])

    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        directory, depth = stack.pop()
        steps: list[StepDir] = []
        exp_links: list[Path] = []
        has_tracker = False
        try:
            entries = list(os.scandir(directory))
        except OSError as exc:
            errors.append(f"{directory}: {exc.strerror}")
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            path = Path(entry.path)
            if stat.S_ISLNK(st.st_mode):
                symlinks.append(path)
                total += st.st_blocks * 512
                if STEP_DIR_RE.match(entry.name):
                    exp_links.append(path)
                continue
            if entry.name == TRACKER_NAME:
                has_tracker = True
            if not stat.S_ISDIR(st.st_mode):
                total += st.st_blocks * 512
                continue
            m = STEP_DIR_RE.match(entry.name)
            if m:
                hit = cache.get(path) if cache is not None else None
                if hit:
                    info, links = hit
                else:
                    links = []
                    stats = tree_stats(path, links, keep_entries=True)
                    info = inspect_step(path, int(m.group(1)), zips, stats=stats)
                    if cache is not None:
                        cache.put(info, stats, links, now)
                symlinks.extend(links)
                total += info.bytes
                steps.append(info)
            elif entry.name == WATCHDOG_DIR or depth + 1 > MAX_DISCOVERY_DEPTH:
                if count_all:
                    total += tree_stats(path, symlinks).bytes
            else:
                total += st.st_blocks * 512
                stack.append((path, depth + 1))
        if steps or has_tracker or exp_links:
            steps.sort(key=lambda s: s.step)
            experiments.append(Experiment(directory, read_tracker(directory), steps, exp_links))
    experiments.sort(key=lambda e: str(e.path))
    live = {str(s.path) for e in experiments for s in e.steps}
    zips.retain_steps(live)
    if cache is not None:
        cache.retain_steps(live)
    return RootScan(root, experiments, total, sorted(symlinks), errors)
