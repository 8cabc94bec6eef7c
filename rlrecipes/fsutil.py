"""Safe writes. Atomic: a reader never sees a half-written file (temp file + fsync + rename), nor a
half-written set of files (`atomic_dir`: a folder built beside its target and swapped in). And never over
the command's own input (`refuse_overwrite`, below).

The old file survives any failure (ENOSPC included): the new content goes to a temporary file beside
it, which replaces the target only once it is whole and fsynced. `tempfile.mkstemp` creates 0600 files;
the result gets the mode a plain `open("w")` would give (0666 minus the umask) unless a mode is asked for.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import hashlib
import ctypes
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.errors import RecipeError, StageFailed


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is fsynced and renamed over `path`.

    On any exception the temporary file is removed and `path` is left as it was.
    """
    target = Path(path)
    if target.is_dir():  # os.replace would fail naming the temporary file, not the path the user gave
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix + ".tmp", dir=target.parent)
    except OSError as exc:  # name the target, not the temporary file's random name
        raise type(exc)(exc.errno, exc.strerror, str(target)) from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        os.chmod(tmp_path, 0o666 & ~current_umask())
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, target)
        _fsync_dir(target.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


# atomic_dir's work folder beside its target (tempfile.mkdtemp's 8 random characters follow), and the lock file
# of the one writer that claims the target (claim_output).
PARTIAL_PREFIX = ".{name}.partial-"
_LOCK_NAME = ".{name}.{what}.lock"


def claim_output(out: Path, what: str):
    """Claim `out` for this `what` (merge, report): an exclusive flock on `.<out>.<what>.lock` beside it, held by
    the returned open file until it is closed (the kernel drops it when the process dies, SIGKILL included).
    Every `.<out>.partial-*` work folder found then belongs to no live writer -- only a holder of this lock makes
    one -- and is what a killed one left behind: removed, and each one reported on stderr. A second writer into
    the same output while one runs is refused (exit 1) instead of racing it for the final rename."""
    lock = out.parent / _LOCK_NAME.format(name=out.name, what=what)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+", encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"cannot create the {what}'s lock file: {exc.strerror}", where=str(lock),
                          hint="--out must lie in a directory this user can write") from None
    claim_or_refuse(fh, lock, f"another {what} is writing this output", str(out),
                    hint=f"wait for it to finish, or {what} into another --out")
    for stale in stale_partials(out):
        shutil.rmtree(stale, ignore_errors=True)
        print(f"removed {stale}: the work directory of an earlier {what} into {out.name} that did not finish",
              file=sys.stderr)
    return fh


def stale_partials(out: Path) -> list[Path]:
    """The work folders of writers into `out` beside it (call with the output claimed: then none is live)."""
    pattern = re.compile(re.escape(PARTIAL_PREFIX.format(name=out.name)) + r"[a-z0-9_]{8}")
    try:
        return sorted(p for p in out.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir()
                      and not p.is_symlink())
    except OSError:
        return []


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty folder beside `path`; on success its files are fsynced and it takes `path`'s place as
    a whole (the old folder, if any, is removed). A set of files that belong together (a report) is then
    never seen half-written: a kill leaves the old folder complete, or -- where the kernel cannot swap two
    folders in one step (renameat2 RENAME_EXCHANGE) -- at worst no folder, never a mixed one. On an
    exception the work folder is removed and `path` is left as it was. A SIGKILL leaves the hidden work
    folder (`.<name>.partial-*`) beside `path`: the next writer that claims `path` (claim_output) removes it.
    """
    target = Path(os.path.abspath(path))  # "." or "out/" name the folder, beside which the new one is built
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=PARTIAL_PREFIX.format(name=target.name), dir=target.parent))
    try:
        os.chmod(work, 0o777 & ~current_umask())
        yield work
        for file in work.rglob("*"):
            if file.is_file() and not file.is_symlink():
                with open(file, "rb+") as fh:
                    os.fsync(fh.fileno())
        _fsync_dir(work)
        if os.path.lexists(target):
            _swap(work, target)  # work now holds the old folder
            shutil.rmtree(work, ignore_errors=True)
        else:
            os.rename(work, target)
        _fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _swap(new: Path, old: Path) -> None:
    """Exchange two paths in one step (Linux renameat2); elsewhere, or where the filesystem cannot, move
    `old` aside, `new` into place, and the old one to `new`'s name."""
    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(old), _RENAME_EXCHANGE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(old))
    aside = Path(tempfile.mkdtemp(prefix=f".{old.name}.old-", dir=old.parent))
    os.rmdir(aside)
    os.rename(old, aside)
    try:
        os.rename(new, old)
    except BaseException:
        os.rename(aside, old)
        raise
    os.rename(aside, new)


def current_umask() -> int:
    """The process umask, read without changing it where Linux reports it (os.umask sets as it reads)."""
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes, mode: int | None = None) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
        if mode is not None:
            os.chmod(tmp, mode & ~current_umask())


def atomic_write_text(path: str | os.PathLike, text: str, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


class LockHeld(Exception):
    """Another live process holds the lock; `holder` is what it wrote into the lock file ("pid N")."""

    def __init__(self, holder: str):
        super().__init__(holder)
        self.holder = holder


def claim_lock(fh) -> None:
    """Take an exclusive flock on the open lock file `fh` without waiting, and write this process's pid into it.

    The kernel drops the lock when the process dies (SIGKILL included), so a crash leaves no stale lock.
    Raises LockHeld (the file closed) when another process has it, OSError when flock itself fails.
    """
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            raise LockHeld(holder) from None
        raise
    fh.seek(0)
    fh.truncate()
    fh.write(f"pid {os.getpid()}\n")
    fh.flush()


def claim_or_refuse(fh, lock: Path, busy: str, where: str, hint: str) -> None:
    """claim_lock, with a refusal that names the holder: `busy (pid N ...)` (exit 1), or why flock failed."""
    try:
        claim_lock(fh)
    except LockHeld as held:
        raise StageFailed(f"{busy} ({held.holder})", where=where, hint=hint) from None
    except OSError as exc:
        raise StageFailed(f"cannot lock {lock}: {exc.strerror}", where=where) from None


def human_bytes(value: float | None) -> str:
    """1536 -> '1.5 KiB'; whole bytes without decimals; None -> 'unknown'."""
    if value is None:
        return "unknown"
    n = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# -- no command writes over its own input: the check every command with --out makes before it writes --
#
# `expect --out D/metrics-<stamp>.jsonl` once replaced the run's metrics log with the verdict. Each command
# names what it reads (`Input`); `refuse_overwrite` refuses an output path that is one of them, or a folder
# holding one (a report or a merge replaces its folder as a whole), with exit 2 and one line. An output
# inside an input folder is allowed -- `expect LOGDIR --out LOGDIR/expect.json`, `eval MERGED --out
# MERGED/eval` -- unless that folder's input is its whole tree (`nested=False`: a verl run directory, the
# recipes folder) or the output's name is one the command reads there (`reads`: a new metrics-*.jsonl in
# the log folder would be read as one of the run's launches next time).

@dataclass(frozen=True)
class Input:
    """A file or folder a command reads. `what` names it in the user's words ("the run's log directory")."""

    what: str
    path: str | os.PathLike | None
    reads: tuple[str, ...] = ()  # a folder: the names (globs) the command reads in it
    nested: bool = True  # a folder: an output inside it leaves it intact


def relation(out: str | os.PathLike, item: Input) -> str | None:
    """How `out` would overwrite `item` ("is", "contains", "lies inside", "is a file read from"), or None."""
    if item.path is None:
        return None
    real = Path(os.path.realpath(out))
    other = Path(os.path.realpath(item.path))
    if real == other:
        return "is"
    if real in other.parents:
        return "contains"
    if other in real.parents:
        if not item.nested:
            return "lies inside"
        if real.parent == other and any(fnmatch.fnmatchcase(real.name, glob) for glob in item.reads):
            return "is a file read from"
    return None


def refuse_overwrite(option: str, out: str | os.PathLike, inputs: Iterable[Input], *,
                     effect: str = "writing there would overwrite an input of this command",
                     hint: str | None = None) -> None:
    """Raise RecipeError (exit 2) when writing `out` would overwrite one of `inputs`; else return."""
    found = [(rel, item) for item in inputs if (rel := relation(out, item)) is not None]
    if not found:
        return
    rel, item = min(found, key=lambda pair: pair[0] != "is")  # the input it names, before one it contains
    where = os.path.realpath(item.path)
    if rel == "is a file read from":
        message = (f"{option} {rel} {item.what} {where} ({', '.join(item.reads)}): the command would read it as "
                   "an input next time")
    else:
        message = f"{option} {rel} {item.what} {where}: {effect}"
    raise RecipeError(message, where=str(out), hint=hint or f"pick an {option} outside the command's inputs")
