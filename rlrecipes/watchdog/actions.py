"""Side effects: crash-safe deletion through a trash folder, disk measurements (the tracker repair is
rlrecipes/verl/resume.py's write_tracker)."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.verl.checkpoints import WATCHDOG_DIR, tree_stats

log = logging.getLogger("rlrecipes.watchdog")


class UnsafePath(Exception):
    """A deletion was refused because the path is not a real directory strictly inside the root."""


def check_inside(root: Path, path: Path) -> None:
    """Refuse anything that is not a real (non-symlink) directory strictly inside `root`.

    The parent chain is resolved, so a symlinked component anywhere cannot lead outside the root.
    """
    root_real = Path(os.path.realpath(root))
    parent_real = Path(os.path.realpath(path.parent))
    if parent_real != root_real and root_real not in parent_real.parents:
        raise UnsafePath(f"{path} is outside the root {root_real}")
    try:
        st = path.lstat()
    except FileNotFoundError as exc:
        raise UnsafePath(f"{path} does not exist") from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePath(f"{path} is a symlink or not a directory")
    if parent_real / path.name == root_real:
        raise UnsafePath(f"{path} is the root itself")


def trash_dir_for(root: Path, path: Path) -> Path:
    """The trash folder on the same filesystem as `path` (rename cannot cross filesystems)."""
    trash = root / WATCHDOG_DIR / "trash"
    trash.mkdir(parents=True, exist_ok=True)
    if trash.stat().st_dev == path.parent.stat().st_dev:
        return trash
    # The experiment sits on another mount below the root: keep a trash folder there.
    local = path.parent / WATCHDOG_DIR / "trash"
    local.mkdir(parents=True, exist_ok=True)
    return local


def remove_checkpoint(root: Path, path: Path) -> Path:
    """Rename `path` into the trash (atomic: the step dir disappears at once), then remove it.

    If the process dies during removal the trash is emptied on the next start (`empty_trash`).
    Returns the trash path it went through.
    """
    check_inside(root, path)
    trash = trash_dir_for(root, path)
    target = trash / f"{path.parent.name}__{path.name}__{uuid.uuid4().hex[:8]}"
    os.rename(path, target)
    _fsync_dir(path.parent)
    shutil.rmtree(target, ignore_errors=True)
    return target


def empty_trash(root: Path, experiments: list[Path] = ()) -> int:
    """Finish removals an earlier process started; returns how many entries it removed."""
    removed = 0
    for trash in [root / WATCHDOG_DIR / "trash", *(e / WATCHDOG_DIR / "trash" for e in experiments)]:
        if not trash.is_dir() or trash.is_symlink():
            continue
        for entry in trash.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed += 1
    return removed


@dataclass
class DiskUsage:
    fs_total: int
    fs_free: int  # available to unprivileged users (f_bavail), what a trainer process can use


def disk_usage(path: Path) -> DiskUsage:
    st = os.statvfs(path)
    return DiskUsage(fs_total=st.f_blocks * st.f_frsize, fs_free=st.f_bavail * st.f_frsize)


# Known disk hogs beside checkpoints: kind -> glob of what to count under its path.
HOG_KINDS = {
    "ray": ("session_*",),  # Ray keeps every session's logs under /tmp/ray/session_* until removed
    # WANDB_MODE=offline writes wandb/offline-run-* until `wandb sync`; accept the run dir or its parent.
    "wandb": ("offline-run-*", "wandb/offline-run-*", "*/wandb/offline-run-*"),
    "hf-cache": (),  # the whole HF_HOME (hub downloads, datasets cache)
    "path": (),  # anything else: the whole tree
}


def hog_size(kind: str, path: Path) -> tuple[int, int] | None:
    """(bytes, items) of a known disk hog, None when the path does not exist."""
    if not path.exists():
        return None
    patterns = HOG_KINDS[kind]
    if not patterns:
        stats = tree_stats(path)
        return stats.bytes, stats.files
    total, items = 0, 0
    for match in sorted({m for pattern in patterns for m in path.glob(pattern)}):
        if match.is_symlink():
            continue
        total += tree_stats(match).bytes
        items += 1
    return total, items


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # pragma: no cover - some filesystems refuse fsync on directories
        if exc.errno not in (errno.EINVAL, errno.EROFS):
            raise
    finally:
        os.close(fd)
