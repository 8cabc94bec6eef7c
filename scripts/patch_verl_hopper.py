#!/usr/bin/env python3
"""Anchored edits to verl 0.9.1 for the Hopper image (verl 0.9.1 + vLLM 0.24.0), applied at build time.

critic-attn (verl #5210, open; fix PRs #4292, #6495 not merged): `verl.utils.model.load_valuehead_model`
passes `attn_implementation="flash_attention_2"` to both of its `from_pretrained` calls, although the
caller's config already carries the attention chosen by `critic.model.override_config.attn_implementation`.
Without flash-attn -- the Hopper image has none: no wheel exists for CUDA 13 + torch 2.11 -- every recipe
with a critic (PPO) fails at start-up with "FlashAttention2 has been toggled on, but it cannot be used".
The edit makes both arguments take the config's choice (flash_attention_2 stays the default when the
config names none, as upstream).

rollout-skip-detokenize (verl PR #7679, open): verl's vLLM rollout is token-in/token-out --
`vLLMHttpServer.generate` reads only `outputs[0].token_ids`, the log-probs and `finish_reason` -- but vLLM's
default `SamplingParams.detokenize=True` makes vLLM's front end detokenize every generated token. On a
lent H200 (the 3B GRPO-LoRA recipe, 64 prompts x 5 x 1024 tokens) the GPU sat idle for the last 8-11 s of
each ~26-28 s rollout phase while the server was still returning responses; without detokenization the
phase took 18.2 s with no idle stretch (docs/bench/gpu-hopper-3b.md). The edit sets `detokenize=False`
unless the request has string `stop` or `bad_words` (those need the text); `setdefault` keeps a caller's
explicit choice.

Each edit is data (`Edit` below): the file, the exact `def` line of the function it lands in (and of the
class, for a method), the exact anchor text, its replacement (carrying a `# rlrecipes: <upstream>` marker)
and how many times the anchor must occur in that function. Every edit is checked before any file is
written: one mismatch and nothing is written; each changed file is then replaced atomically.

    python3 scripts/patch_verl_hopper.py            # patch the installed verl
    python3 scripts/patch_verl_hopper.py --check    # exit 1 unless every edit is applied
    python3 scripts/patch_verl_hopper.py --verl-root DIR

One line per edit: PATCHED (changed now), ALREADY (applied before), UNPATCHED (not applied: under --check,
or because another edit mismatched) or MISMATCH (anchor not as expected), then the file and the edit's name.
Exit codes: 0 ok, 1 anchor mismatch (or unpatched under --check), 2 no verl found (or --verl-root empty).
Stdlib only.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PATCHED, ALREADY, UNPATCHED, MISMATCH = "PATCHED", "ALREADY", "UNPATCHED", "MISMATCH"


@dataclass(frozen=True)
class Edit:
    name: str  # printed on its status line
    file: str  # relative to the verl package directory
    function: str  # the exact `def` line (with its indentation) of the function the edit lands in
    anchor: str  # exact text, found `sites` times in that function, each replaced by `replacement`
    replacement: str
    sites: int
    upstream: str  # the verl issue or pull request the edit follows
    within: str = ""  # the exact `class` line when `function` is a method ("" for a module-level function)

    @property
    def marker(self) -> str:
        """The comment every replacement carries: the trace that tells a patched site from a changed one."""
        return f"# rlrecipes: {self.upstream}"

    def __post_init__(self) -> None:
        if self.marker not in self.replacement or self.sites < 1:
            raise ValueError(f"edit {self.name}: its replacement must carry {self.marker!r}, at >= 1 site")


EDITS: tuple[Edit, ...] = (
    Edit(
        name="critic-attn",
        file="utils/model.py",
        function="def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):\n",
        anchor='attn_implementation="flash_attention_2",\n',
        replacement=('attn_implementation=getattr(model_config, "_attn_implementation", None) or "flash_attention_2",'
                     "  # rlrecipes: verl #5210\n"),
        sites=2,
        upstream="verl #5210",
    ),
    Edit(
        name="rollout-skip-detokenize",
        file="workers/rollout/vllm_rollout/vllm_async_server.py",
        within="class vLLMHttpServer:\n",
        function="    async def generate(\n",
        anchor="\n        sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)\n",
        replacement=('\n        if not sampling_params.get("stop") and not sampling_params.get("bad_words"):'
                     "  # rlrecipes: verl PR #7679\n"
                     '            sampling_params.setdefault("detokenize", False)\n'
                     "        sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)\n"),
        sites=1,
        upstream="verl PR #7679",
    ),
)


def verl_root(explicit: str | None) -> Path:
    # an empty value (`--verl-root "$DIR"` with DIR unset) is an error, not the installed verl
    if explicit is not None:
        if not explicit:
            raise FileNotFoundError("--verl-root is empty")
        return Path(explicit)
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("no verl package importable here")
    return Path(list(spec.submodule_search_locations)[0])


def block(text: str, head: str, start: int = 0, end: int | None = None) -> tuple[int, int] | None:
    """(start, end) of the one definition whose first line is exactly `head` in text[start:end]: from that
    line to the next `def`/`async def`/`class` indented no deeper than it. None unless `head` starts
    exactly one line there."""
    end = len(text) if end is None else end
    found = [m.start() for m in re.compile("^" + re.escape(head), re.MULTILINE).finditer(text, start, end)]
    if len(found) != 1:
        return None
    indent = len(head) - len(head.lstrip(" "))
    nxt = re.compile(r"\n {0,%d}(?:async def |def |class )" % indent).search(text, found[0] + len(head), end)
    return found[0], nxt.start() if nxt else end


def occurrences(text: str, part: str) -> int:
    """How often `part` occurs in `text`, overlapping occurrences included."""
    return sum(1 for _ in re.finditer(f"(?={re.escape(part)})", text))


def state_of(body: str, edit: Edit) -> str:
    """ALREADY: every site holds the replacement and nothing else of ours or of the anchor is left;
    UNPATCHED: the anchor is at every site and no trace of the edit (its replacement or marker) is there;
    MISMATCH otherwise."""
    n_anchor, n_done, n_mark = (occurrences(body, part) for part in (edit.anchor, edit.replacement, edit.marker))
    if (n_done == edit.sites and n_anchor == edit.sites * occurrences(edit.replacement, edit.anchor)
            and n_mark == edit.sites * occurrences(edit.replacement, edit.marker)):
        return ALREADY
    if n_anchor == edit.sites and n_done == 0 and n_mark == 0:
        return UNPATCHED
    return MISMATCH


def apply(text: str, edit: Edit) -> tuple[str, str, str]:
    """(new text, state, detail) of one edit: state UNPATCHED (new text has it applied), ALREADY or MISMATCH."""
    scope = block(text, edit.within) if edit.within else (0, len(text))
    span = block(text, edit.function, *scope) if scope else None
    if span is None:
        where = f"{edit.within.strip()} " if edit.within else ""
        return text, MISMATCH, f"{where}{edit.function.strip()!r} not found exactly once"
    start, end = span
    body = text[start:end]
    state = state_of(body, edit)
    if state == UNPATCHED:
        new = body.replace(edit.anchor, edit.replacement)
        if state_of(new, edit) == ALREADY:
            return text[:start] + new + text[end:], UNPATCHED, ""
        state = MISMATCH  # overlapping anchors: replacing them would not leave the edit applied
    if state == ALREADY:
        return text, ALREADY, ""
    counts = ", ".join(f"{what} {occurrences(body, part)}" for what, part in
                       (("anchor", edit.anchor), ("replacement", edit.replacement), ("marker", edit.marker)))
    sites = f"{edit.sites} site" + ("s" if edit.sites > 1 else "")
    return text, MISMATCH, f"found {counts} times in {edit.function.strip()!r} (expected {sites})"


def write_atomically(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".patch-")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, path.stat().st_mode)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 unless every edit is applied")
    parser.add_argument("--verl-root", help="the verl package directory (default: the importable verl)")
    args = parser.parse_args(argv)
    texts: dict[Path, str] = {}
    try:
        root = verl_root(args.verl_root)
        for edit in EDITS:
            path = root / edit.file
            if path not in texts:
                texts[path] = path.read_text()
    except OSError as exc:
        print(f"patch_verl_hopper: error: {exc}", file=sys.stderr)
        return 2
    new = dict(texts)
    states = []
    for edit in EDITS:
        path = root / edit.file
        new[path], state, detail = apply(new[path], edit)
        states.append((edit, path, state, detail))
    mismatch = any(state == MISMATCH for _, _, state, _ in states)
    write = not args.check and not mismatch
    if write:
        for path, text in new.items():
            if text != texts[path]:
                write_atomically(path, text)
    for edit, path, state, detail in states:
        shown = PATCHED if state == UNPATCHED and write else state
        print(f"{shown} {path} {edit.name} ({edit.upstream})" + (f": {detail}" if detail else ""))
    if mismatch and not args.check:
        print("patch_verl_hopper: an anchor did not match; nothing written", file=sys.stderr)
    if args.check:
        return 0 if all(state == ALREADY for _, _, state, _ in states) else 1
    return 1 if mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
