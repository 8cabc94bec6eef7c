"""No command writes over its own input: the check every command with `--out` makes before it writes.

`expect --out D/metrics-<stamp>.jsonl` once replaced the run's metrics log with the verdict. Each command
names what it reads (`Input`); `refuse_overwrite` refuses an output path that is one of them, or a folder
holding one (a report or a merge replaces its folder as a whole), with exit 2 and one line. An output
inside an input folder is allowed -- `expect LOGDIR --out LOGDIR/expect.json`, `eval MERGED --out
MERGED/eval` -- unless that folder's input is its whole tree (`nested=False`: a verl run directory, the
recipes folder) or the output's name is one the command reads there (`reads`: a new metrics-*.jsonl in
the log folder would be read as one of the run's launches next time).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rlrecipes.errors import RecipeError


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
