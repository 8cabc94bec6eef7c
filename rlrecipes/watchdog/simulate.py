"""Write checkpoints the way verl does (same files, same order, same tracker), without torch.

For tests, the benchmark and the Compose writer container:
    python -m rlrecipes.watchdog.simulate --root /ckpt/run --steps 6 --shard-bytes 1M --pause 0.5

`.pt` files are zip archives like torch.save's, so a truncated one is recognised as such.
Order (see rlrecipes/verl/checkpoints.py for the verl sources): actor shards per rank (model, optim, extra_state),
actor/huggingface/, actor/fsdp_config.json, then critic/ the same way, then data.pt, then the tracker
via plain open("w") -- not atomic, like verl.
"""

from __future__ import annotations

import argparse
import json
import time
import zipfile
from pathlib import Path

from rlrecipes.verl.checkpoints import TRACKER_NAME, step_dir

CHUNK = 1 << 20


def write_pt(path: Path, nbytes: int, pause_s: float = 0.0) -> None:
    """A zip archive of about `nbytes` (stored, not compressed), written in 1 MiB chunks."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        with zf.open("archive/data.pkl", "w", force_zip64=nbytes > 2**31) as fh:
            left = nbytes
            while left > 0:
                n = min(CHUNK, left)
                fh.write(b"\0" * n)
                left -= n
                if pause_s:
                    time.sleep(pause_s)


def write_role(role_dir: Path, world_size: int, shard_bytes: int, pause_s: float = 0.0, hf_files: int = 3) -> None:
    role_dir.mkdir(parents=True, exist_ok=True)
    for rank in range(world_size):
        write_pt(role_dir / f"model_world_size_{world_size}_rank_{rank}.pt", shard_bytes, pause_s)
        write_pt(role_dir / f"optim_world_size_{world_size}_rank_{rank}.pt", 2 * shard_bytes, pause_s)
        write_pt(role_dir / f"extra_state_world_size_{world_size}_rank_{rank}.pt", 256, pause_s)
    hf = role_dir / "huggingface"
    hf.mkdir(exist_ok=True)
    for i in range(hf_files):
        name = ("config.json", "tokenizer.json", "tokenizer_config.json")[i] if i < 3 else f"extra_{i}.json"
        (hf / name).write_text(json.dumps({"file": i}))
    (role_dir / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 1, "world_size": world_size}))


def save_checkpoint(experiment: Path, step: int, world_size: int = 2, shard_bytes: int = 4096,
                    critic: bool = False, tracker: bool = True, pause_s: float = 0.0, hf_files: int = 3) -> Path:
    """One verl save of step `step` under `experiment` (trainer.default_local_dir)."""
    saved = step_dir(Path(experiment), step)
    write_role(saved / "actor", world_size, shard_bytes, pause_s, hf_files)
    if critic:
        write_role(saved / "critic", world_size, shard_bytes, pause_s, hf_files)
    write_pt(saved / "data.pt", 1024)
    if tracker:
        with open(Path(experiment) / TRACKER_NAME, "w") as f:
            f.write(str(step))
    return saved


def checkpoint_bytes(world_size: int, shard_bytes: int, critic: bool = False) -> int:
    """Roughly what save_checkpoint writes (payload only)."""
    per_role = world_size * (3 * shard_bytes + 256)
    return per_role * (2 if critic else 1) + 1024


def main(argv: list[str] | None = None) -> int:
    from rlrecipes.watchdog.policy import parse_size

    parser = argparse.ArgumentParser(prog="python -m rlrecipes.watchdog.simulate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, required=True, help="experiment dir (trainer.default_local_dir)")
    parser.add_argument("--steps", type=int, default=5, help="number of saves")
    parser.add_argument("--start", type=int, default=None, help="first step (default: tracker + save-freq, or 1)")
    parser.add_argument("--save-freq", type=int, default=1)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--shard-bytes", default="64K")
    parser.add_argument("--critic", action="store_true")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between saves")
    parser.add_argument("--max-keep", type=int, default=None,
                        help="prune like verl 0.5.0: delete actor/ of older saves of THIS process first")
    args = parser.parse_args(argv)
    shard = parse_size(args.shard_bytes)
    args.root.mkdir(parents=True, exist_ok=True)
    start = args.start
    if start is None:
        try:
            start = int((args.root / TRACKER_NAME).read_text().strip()) + args.save_freq
        except (FileNotFoundError, ValueError):
            start = args.save_freq
    saved: list[Path] = []
    for i in range(args.steps):
        step = start + i * args.save_freq
        if args.max_keep and len(saved) >= args.max_keep:
            import shutil

            # verl keeps this list in memory (CheckpointManager.previous_saved_paths) and deletes only
            # <step>/actor (verl/utils/checkpoint/checkpoint_manager.py, remove_previous_save_local_path)
            for old in saved[: len(saved) - args.max_keep + 1]:
                shutil.rmtree(old / "actor", ignore_errors=True)
            saved = saved[len(saved) - args.max_keep + 1:]
        try:
            saved.append(save_checkpoint(args.root, step, args.world_size, shard, args.critic))
        except OSError as exc:
            print(f"save of step {step} failed: {exc}", flush=True)
            return 1
        print(f"saved step {step}", flush=True)
        if args.pause and i + 1 < args.steps:
            time.sleep(args.pause)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
