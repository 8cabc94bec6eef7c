#!/usr/bin/env python3
"""Anchored edits to verl 0.9.1 tried as levers (benchmarks/gpu/startup_levers.sh) before any joins the Hopper
image's table in scripts/patch_verl.py: the same engine (scope, anchor, marker, atomic write), applied to the
installed verl for one launch and taken out again after it.

rows-on-host: verl 0.9.1's FSDP engine copies each micro batch to the GPU with `TensorDict.to(device)`
(`FSDPEngineWithLMHead.forward_step`). The batch a worker gets from TransferQueue holds every field the rollout
wrote, the per-row non-tensor ones too (the prompt's messages, `reward_model`, `data_source`, `extra_info`, ...:
tensordict `NonTensorStack`s), and `.to()` rebuilds those one row at a time. The profiled canary step (fifth
sitting, docs/bench/gpu-overhead.md) spent 0.33-0.36 ms a row right after that copy, before the first operator of
`prepare_model_inputs`. The engine, its loss functions and `prepare_model_outputs` read no per-row non-tensor
field except `multi_modal_inputs`; the edit leaves the others out of the copy (the batch itself, which the
worker's post-processing reads, keeps them).

    python3 benchmarks/gpu/verl_trial.py rows-on-host                    # apply it to the importable verl
    python3 benchmarks/gpu/verl_trial.py rows-on-host --revert           # take it out again
    python3 benchmarks/gpu/verl_trial.py rows-on-host --check --verl-root DIR   # change nothing; exit 1 unless applied

One status line as scripts/patch_verl.py prints it (PATCHED, ALREADY, UNPATCHED, MISMATCH; --revert prints
REVERTED or UNPATCHED). Exit codes: 0 ok, 1 mismatch (or unpatched under --check), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: scripts.patch_verl
from scripts.patch_verl import (ALREADY, MISMATCH, PATCHED, UNPATCHED, Edit, apply, block,  # noqa: E402
                                verl_root, verl_version, write_atomically)

VERL = "0.9.1"
REVERTED = "REVERTED"
ROWS_MARK = "# rlrecipes rows-on-host"
ROWS_ON_HOST = Edit(
    name="rows-on-host",
    file="workers/engine/fsdp/transformer_impl.py",
    within="class FSDPEngineWithLMHead(FSDPEngine):\n",
    function="    def forward_step(self, micro_batch: TensorDict, loss_function, forward_only):\n",
    anchor="        micro_batch = micro_batch.to(get_device_id())\n",
    replacement=(
        f"        {ROWS_MARK}: the per-row non-tensor fields stay out of the copy to the device (.to() rebuilds\n"
        "        # them row by row); nothing below reads one but multi_modal_inputs\n"
        "        from tensordict import NonTensorStack\n"
        "\n"
        "        rows = [k for k, v in micro_batch.items()\n"
        "                if isinstance(v, NonTensorStack) and k != \"multi_modal_inputs\"]\n"
        "        micro_batch = micro_batch.exclude(*rows).to(get_device_id())\n"),
    marker=ROWS_MARK,
    why="per-row non-tensor fields copied row by row",
)
TRIALS: dict[str, Edit] = {ROWS_ON_HOST.name: ROWS_ON_HOST}


def revert(text: str, edit: Edit) -> tuple[str, str, str]:
    """(new text, state, detail): REVERTED (new text has the anchor back), UNPATCHED (nothing to take out) or
    MISMATCH (the site is neither the edit as applied nor the anchor as released)."""
    _, state, detail = apply(text, edit)
    if state != ALREADY:
        return text, state, detail
    scope = block(text, edit.within) if edit.within else (0, len(text))
    start, end = block(text, edit.function, *scope) if edit.function else scope
    return text[:start] + text[start:end].replace(edit.replacement, edit.anchor) + text[end:], REVERTED, ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("edit", choices=sorted(TRIALS), help="the trial edit")
    parser.add_argument("--verl-root", help="the verl package directory (default: the importable verl)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="change nothing; exit 1 unless the edit is applied")
    mode.add_argument("--revert", action="store_true", help="take the edit out again")
    args = parser.parse_args(argv)
    edit = TRIALS[args.edit]
    try:
        root = verl_root(args.verl_root).resolve()
        version = verl_version(root)
        path = root / edit.file
        text = path.read_text(encoding="utf-8") if version == VERL else ""
    except (OSError, UnicodeError) as exc:
        print(f"verl_trial: error: {exc}", file=sys.stderr)
        return 2
    if version != VERL:
        print(f"verl_trial: error: {root}: verl {version} found; the trial edits are for verl {VERL} only",
              file=sys.stderr)
        return 2
    new, state, detail = (revert if args.revert else apply)(text, edit)
    if new != text and not args.check:
        write_atomically(path, new)
    shown = PATCHED if state == UNPATCHED and not args.check and not args.revert else state
    print(f"{shown} {path} {edit.name} ({edit.why})" + (f": {detail}" if detail else ""))
    if state == MISMATCH:
        return 1
    return 1 if args.check and state != ALREADY else 0


if __name__ == "__main__":
    raise SystemExit(main())
