"""Where `rlrecipes merge` writes: one merge at a time per output (a flock beside it), the work directory a
killed merge left behind, and the refusal of outputs that would overwrite the run, a step or the base model."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from rlrecipes.after.merge_info import FILE as MERGE_INFO_FILE
from rlrecipes.errors import RecipeError, StageFailed
from rlrecipes.fsutil import Input, LockHeld, claim_lock, refuse_overwrite
from rlrecipes.verl.checkpoint_ref import CheckpointRef
from rlrecipes.verl.checkpoints import TRACKER_NAME, step_of


# The work directory of a merge into OUT (tempfile.mkdtemp's 8 random characters follow) and its lock file.
_PARTIAL_PREFIX = ".{name}.partial-"
_LOCK_NAME = ".{name}.merge.lock"


def claim_output(out: Path):
    """Claim `out` for this merge: an exclusive flock on `.<out>.merge.lock` beside it, held by the returned
    open file until it is closed (the kernel drops it when the process dies, SIGKILL included). Every
    `.<out>.partial-*` work directory found then belongs to no live merge -- only a holder of this lock makes
    one -- and is what a killed merge left behind: removed, and each one reported on stderr. A second merge
    into the same output while one runs is refused (exit 1) instead of racing it for the final rename."""
    lock = out.parent / _LOCK_NAME.format(name=out.name)
    try:
        fh = open(lock, "a+", encoding="utf-8")
    except OSError as exc:
        raise RecipeError(f"cannot create the merge's lock file: {exc.strerror}", where=str(lock),
                          hint="--out must lie in a directory this user can write") from None
    try:
        claim_lock(fh)
    except LockHeld as held:
        raise StageFailed(f"another merge is writing this output ({held.holder})", where=str(out),
                          hint="wait for it to finish, or merge into another --out") from None
    except OSError as exc:
        raise StageFailed(f"cannot lock {lock}: {exc.strerror}", where=str(out)) from None
    for stale in stale_partials(out):
        shutil.rmtree(stale, ignore_errors=True)
        print(f"removed {stale}: the work directory of an earlier merge into {out.name} that did not finish",
              file=sys.stderr)
    return fh


def stale_partials(out: Path) -> list[Path]:
    """The work directories of merges into `out` beside it (call with the output claimed: then none is live)."""
    pattern = re.compile(re.escape(_PARTIAL_PREFIX.format(name=out.name)) + r"[a-z0-9_]{8}")
    try:
        return sorted(p for p in out.parent.iterdir() if pattern.fullmatch(p.name) and p.is_dir()
                      and not p.is_symlink())
    except OSError:
        return []


def check_output(out: Path, ckpt: CheckpointRef, protected: list[tuple[str, Path | None]], force: bool,
                 log_dir: Path | None = None) -> None:
    """Refuse an --out whose replacement would delete something that is not a previous merge.

    The output is built beside --out and renamed over it, and the old --out is then removed. So --out
    must not be, contain or lie inside the checkpoint, its run directory or the base model (even with
    --force: `merge RUN --out RUN --force` once deleted every step directory of the run), nor be or contain
    the run's log directory (read for the model card), nor lie inside any other verl checkpoint directory;
    and --force replaces only an empty directory or one that an earlier `rlrecipes merge` wrote (it holds
    merge-info.json).
    """
    real = Path(os.path.realpath(out))
    fenced = [("the run directory", ckpt.run_dir), ("the checkpoint", ckpt.actor_dir.parent), *protected]
    inputs = [Input(what, path, nested=False) for what, path in fenced]
    inputs.append(Input("the run's log directory", log_dir))
    refuse_overwrite("--out", out, inputs, effect="writing the merged model there would delete it",
                     hint="pick an output directory outside checkpoints and models, e.g. /workspace/models/merged")
    for parent in [real, *real.parents]:
        if step_of(parent) is not None or (parent / TRACKER_NAME).is_file():
            raise RecipeError(f"--out lies inside the verl checkpoint directory {parent}", where=str(out),
                              hint="pick an output directory outside checkpoints, e.g. /workspace/models/merged")
    if not os.path.lexists(real):
        return
    if not real.is_dir():
        raise RecipeError("--out exists and is not a directory", where=str(out), hint="pick another --out")
    if not force:
        raise RecipeError("output directory exists", where=str(out), hint="pass --force to replace it")
    if any(real.iterdir()) and not (real / MERGE_INFO_FILE).is_file():
        raise RecipeError("--force replaces only an empty directory or an earlier merge output (with "
                          "merge-info.json); this one holds other files", where=str(out),
                          hint="remove it yourself if it is expendable, or pick another --out")
