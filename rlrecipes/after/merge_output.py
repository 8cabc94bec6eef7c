"""Where `rlrecipes merge` may write: the refusal of outputs that would overwrite the run, a step or the base
model. (One merge at a time per output, and the work directory a killed merge left behind: fsutil.claim_output,
which report uses too.)"""

from __future__ import annotations

import os
from pathlib import Path

from rlrecipes.after.merge_info import FILE as MERGE_INFO_FILE
from rlrecipes.errors import RecipeError
from rlrecipes.fsutil import Input, refuse_overwrite
from rlrecipes.verl.checkpoint_ref import CheckpointRef
from rlrecipes.verl.checkpoints import TRACKER_NAME, step_of


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
