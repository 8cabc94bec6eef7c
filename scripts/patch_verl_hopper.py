#!/usr/bin/env python3
"""Let verl 0.9.1's critic (value model) honour its attention setting instead of forcing FlashAttention-2.

`verl.utils.model.load_valuehead_model` passes `attn_implementation="flash_attention_2"` to both of its
`from_pretrained` calls, although the caller's config already carries the attention chosen by
`critic.model.override_config.attn_implementation` (upstream verl #5210, open; fix PRs #4292, #6495 not
merged). Without flash-attn -- the Hopper image has none: no wheel exists for CUDA 13 + torch 2.11 --
every recipe with a critic (PPO) fails at start-up with "FlashAttention2 has been toggled on, but it cannot
be used". This rewrites both arguments to take the config's choice (flash_attention_2 stays the default
when the config names none, as upstream).

    python3 scripts/patch_verl_hopper.py            # patch the installed verl
    python3 scripts/patch_verl_hopper.py --check    # exit 1 unless patched
    python3 scripts/patch_verl_hopper.py --verl-root DIR

Exit codes: 0 ok, 1 anchor mismatch (or unpatched under --check), 2 no verl found. Stdlib only.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

FILE = "utils/model.py"
FUNCTION = "def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):\n"
ANCHOR = 'attn_implementation="flash_attention_2",\n'
PATCHED = ('attn_implementation=getattr(model_config, "_attn_implementation", None) or "flash_attention_2",'
           "  # rlrecipes: verl #5210\n")
SITES = 2


def verl_root(explicit: str | None) -> Path:
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("no verl package importable here")
    return Path(list(spec.submodule_search_locations)[0])


def patch_text(text: str) -> tuple[str, str]:
    """(new text, status) where status is PATCHED, ALREADY or MISMATCH."""
    start = text.find(FUNCTION)
    if start < 0:
        return text, "MISMATCH"
    end = text.find("\ndef ", start + len(FUNCTION))
    end = len(text) if end < 0 else end
    body = text[start:end]
    if body.count(PATCHED) == SITES and ANCHOR not in body:
        return text, "ALREADY"
    if body.count(ANCHOR) != SITES:
        return text, "MISMATCH"
    return text[:start] + body.replace(ANCHOR, PATCHED) + text[end:], "PATCHED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 unless patched")
    parser.add_argument("--verl-root", help="the verl package directory (default: the importable verl)")
    args = parser.parse_args(argv)
    try:
        path = verl_root(args.verl_root) / FILE
        text = path.read_text()
    except OSError as exc:
        print(f"patch_verl_hopper: error: {exc}", file=sys.stderr)
        return 2
    new, status = patch_text(text)
    if args.check:
        print(f"{'ALREADY' if status == 'ALREADY' else 'UNPATCHED' if status == 'PATCHED' else status} {path}")
        return 0 if status == "ALREADY" else 1
    if status == "PATCHED":
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".patch-")
        with os.fdopen(fd, "w") as fh:
            fh.write(new)
        os.chmod(tmp, path.stat().st_mode)
        os.replace(tmp, path)
    print(f"{status} {path} load_valuehead_model")
    return 1 if status == "MISMATCH" else 0


if __name__ == "__main__":
    sys.exit(main())
