#!/usr/bin/env python3
"""One anchored edit of the Hopper image's table (scripts/patch_verl.py --image hopper, verl 0.9.1) put into or
taken out of the installed verl for one launch: the lever sittings' way to measure an edit against verl as released
(benchmarks/gpu/startup_levers.sh). The same engine as patch_verl.py (scope, anchor, marker, atomic write); taking
an edit out puts the released anchor back where the edit is applied as the table has it, and refuses a site that
is neither.

    python3 benchmarks/gpu/verl_trial.py rows-on-host                    # put it into the importable verl
    python3 benchmarks/gpu/verl_trial.py rows-on-host --revert           # take it out again
    python3 benchmarks/gpu/verl_trial.py rows-on-host --check --verl-root DIR   # change nothing; exit 1 unless in

rows-on-host was measured this way (docs/bench/gpu-overhead.md, "The seventh sitting") before it joined the table.
One status line as scripts/patch_verl.py prints it (PATCHED, ALREADY, UNPATCHED, MISMATCH; --revert prints
REVERTED or UNPATCHED). Exit codes: 0 ok, 1 mismatch (or not applied under --check), 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

# scripts/patch_verl.py by its path: the image's site-packages may hold a regular package named `scripts`, which
# wins over the repository's namespace package of that name wherever it sits on sys.path
_spec = importlib.util.spec_from_file_location("rlrecipes_patch_verl",
                                               Path(__file__).resolve().parents[2] / "scripts" / "patch_verl.py")
_patch = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _patch  # the dataclasses in it look their module up
_spec.loader.exec_module(_patch)
EDITS = {edit.name: edit for edit in _patch.IMAGES["hopper"].edits}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("edit", choices=sorted(EDITS), help="an edit of the Hopper image's table")
    parser.add_argument("--verl-root", help="the verl package directory (default: the importable verl)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="change nothing; exit 1 unless the edit is applied")
    mode.add_argument("--revert", action="store_true", help="take the edit out again")
    args = parser.parse_args(argv)
    edit = EDITS[args.edit]
    try:
        path = _patch.table_root(args.verl_root, "hopper") / edit.file
        text = path.read_text(encoding="utf-8")
    except (ValueError, OSError, UnicodeError) as exc:
        print(f"verl_trial: error: {exc}", file=sys.stderr)
        return 2
    new, state, detail = (_patch.revert if args.revert else _patch.apply)(text, edit)
    if new != text and not args.check:
        _patch.write_atomically(path, new)
    shown = _patch.PATCHED if state == _patch.UNPATCHED and not args.check and not args.revert else state
    print(f"{shown} {path} {edit.name} ({edit.why})" + (f": {detail}" if detail else ""))
    if state == _patch.MISMATCH:
        return 1
    return 1 if args.check and state != _patch.ALREADY else 0


if __name__ == "__main__":
    raise SystemExit(main())
