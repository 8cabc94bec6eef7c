#!/usr/bin/env python3
"""Anchored edits to the installed verl, one table of edits per image, applied at image build time.

p40 (verl 0.5.0, FSDP + Hugging Face rollout, FP32): the P40 (sm_61) has no bf16, no FlashAttention-2 and
no Triton, and verl 0.5.0 hard-codes all three on the FSDP path; two more edits fix the HF rollout
(n*n responses, verl #2881; pinned position ids, verl #2344).

hopper (verl 0.9.1 + vLLM 0.24.0):
critic-attn (verl #5210, open; fix PRs #4292, #6495 not merged): `verl.utils.model.load_valuehead_model`
passes `attn_implementation="flash_attention_2"` to both of its `from_pretrained` calls, although the
caller's config already carries the attention chosen by `critic.model.override_config.attn_implementation`.
Without flash-attn -- the Hopper image has none: no wheel exists for CUDA 13 + torch 2.11 -- every recipe
with a critic (PPO) fails at start-up with "FlashAttention2 has been toggled on, but it cannot be used".
The edit makes both arguments take the config's choice (flash_attention_2 stays the default when the
config names none, as upstream).
rollout-skip-detokenize (verl PR #7679, open; on the hopper image and on a100, verl 0.8.0 + vLLM 0.11.0, whose
`vLLMHttpServer.generate` has the same line): verl's vLLM rollout is token-in/token-out --
`vLLMHttpServer.generate` reads only `outputs[0].token_ids`, the log-probs and `finish_reason` -- but vLLM's
default `SamplingParams.detokenize=True` makes vLLM's front end detokenize every generated token. On an
H200 without internet access (the 3B GRPO-LoRA recipe, 64 prompts x 5 x 1024 tokens) the GPU sat idle for
the last 8-11 s of each ~26-28 s rollout phase while the server was still returning responses; without
detokenization the phase took 18.2 s with no idle stretch (docs/bench/gpu-hopper-3b.md). The edit sets
`detokenize=False` unless the request has string `stop` or `bad_words` (those need the text); `setdefault`
keeps a caller's explicit choice.

rows-on-host (verl 0.9.1's FSDP engine, `FSDPEngineWithLMHead.forward_step`): each micro batch is copied to the GPU
with `TensorDict.to(device)`, and the batch a worker gets from TransferQueue carries every field the rollout wrote,
the per-row non-tensor ones too (the prompt's messages, `reward_model`, `data_source`, `extra_info`, ...: tensordict
`NonTensorStack`s, which `.to()` rebuilds one row at a time). The engine, its loss functions and
`prepare_model_outputs` read none of them but `multi_modal_inputs`; the edit leaves the others out of the copy (the
worker's batch keeps them). On one H200 the canary's three training phases took 2.76-3.96 s a step with it against
4.54-5.92 s without, the rollout-trainer agreement unchanged (docs/bench/gpu-overhead.md, "The seventh sitting").

Each edit is data (`Edit` below): the file, optionally the exact `def` line of the function it lands in
(and of the class, for a method), the exact anchor text, its replacement (carrying the edit's marker
comment) and how many times the anchor must occur there. The verl version must be the one the table was
written for, and every edit is checked before any file is written: one mismatch and nothing is written;
each changed file is then replaced atomically. Running it twice changes nothing.

    python3 scripts/patch_verl.py --image p40              # patch the installed verl
    python3 scripts/patch_verl.py --image p40 --check      # change nothing; exit 1 unless every edit is applied
    python3 scripts/patch_verl.py --image hopper --verl-root DIR   # a verl package directory (holding version/version)
    python3 scripts/patch_verl.py --image p40 --skip critic-attn-implementation   # all but one (to show its failure)

One line per edit: PATCHED (changed now), ALREADY (applied before), UNPATCHED (not applied: under --check,
skipped, or because another edit mismatched) or MISMATCH (anchor not as expected), then the file, the
edit's name and why. Exit codes: 0 ok, 1 mismatch (or unpatched under --check), 2 bad input (no verl
found, --verl-root empty or not a verl package directory, a verl version other than the image's, an
unknown --skip name, a site file that cannot be read).

Stdlib only: it runs in the image build right after verl is installed, before rlrecipes is.
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
REVERTED = "REVERTED"  # benchmarks/gpu/verl_trial.py's --revert: an applied edit taken out again


@dataclass(frozen=True)
class Edit:
    name: str  # printed on its status line
    file: str  # relative to the verl package directory
    anchor: str  # exact text, found `sites` times in the scope, each replaced by `replacement`
    replacement: str
    marker: str  # the comment every replacement carries: the trace that tells a patched site from a changed one
    why: str  # printed on its status line: the verl issue or the hardware limit the edit answers
    function: str = ""  # the exact `def` line (with its indentation) the edit lands in; "" for the whole file
    within: str = ""  # the exact `class` line when `function` is a method
    sites: int = 1

    def __post_init__(self) -> None:
        if self.marker not in self.replacement or self.sites < 1:
            raise ValueError(f"edit {self.name}: its replacement must carry {self.marker!r}, at >= 1 site")


@dataclass(frozen=True)
class Table:
    verl: str  # the only verl version whose source these anchors were read from
    edits: tuple[Edit, ...]


# --- p40: verl 0.5.0 -------------------------------------------------------------------------------

P40_MARK = "# rlrecipes-p40"
_FA_MARK = f"{P40_MARK}: flash-attn is absent on Pascal; only use_remove_padding=True needs these"
_FA_ANCHOR = (
    "if is_cuda_available:\n"
    "    from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input\n"
)
_FA_PATCHED = (
    "if is_cuda_available:\n"
    f"    try:  {_FA_MARK}\n"
    "        from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input\n"
    "    except ImportError:\n"
    "        pass\n"
)
_FA_WHY = "module-level flash_attn import; no flash-attn on Pascal"
_AUTOCAST_MARK = f"{P40_MARK}: no bf16 on Pascal; the FSDP mixed-precision config decides the dtype"
# Both valuehead sites sit in one function: their markers differ so that each site's count is its own.
_VH_MARK = f"{P40_MARK}: take the attention the caller configured instead of forcing flash_attention_2"
_VH_TRL_MARK = f"{P40_MARK}: the trl fallback too takes the attention the caller configured"

P40_EDITS: tuple[Edit, ...] = (
    Edit("actor-flash-attn-import", "workers/actor/dp_actor.py", _FA_ANCHOR, _FA_PATCHED, _FA_MARK, _FA_WHY),
    Edit("critic-flash-attn-import", "workers/critic/dp_critic.py", _FA_ANCHOR, _FA_PATCHED, _FA_MARK, _FA_WHY),
    Edit("engine-flash-attn-import", "workers/engine/fsdp/engine_impl.py", _FA_ANCHOR, _FA_PATCHED, _FA_MARK,
         _FA_WHY),
    # The critic config is always built with flash_attention_2 and its override_config never applied;
    # the edit honours override_config._attn_implementation, default eager.
    Edit(
        "critic-attn-implementation", "workers/fsdp_workers.py",
        "        critic_model_config = AutoConfig.from_pretrained(\n"
        "            local_path,\n"
        '            attn_implementation="flash_attention_2",\n',
        "        critic_model_config = AutoConfig.from_pretrained(\n"
        "            local_path,\n"
        f"            {P40_MARK}: honour the critic's override_config (eager unless it names another)\n"
        '            attn_implementation=override_config_kwargs.get("_attn_implementation", "eager"),\n',
        f"{P40_MARK}: honour the critic's override_config",
        "critic config forces flash_attention_2",
    ),
    # load_valuehead_model passes flash_attention_2 explicitly, overriding the critic config.
    Edit(
        "valuehead-token-classification-attn", "utils/model.py",
        "            config=model_config,\n"
        '            attn_implementation="flash_attention_2",\n'
        "            trust_remote_code=trust_remote_code,\n"
        "        )\n"
        "        return model\n",
        "            config=model_config,\n"
        f"            {_VH_MARK}\n"
        '            attn_implementation=getattr(model_config, "_attn_implementation", None) or "eager",\n'
        "            trust_remote_code=trust_remote_code,\n"
        "        )\n"
        "        return model\n",
        _VH_MARK, "valuehead loader forces flash_attention_2",
    ),
    Edit(
        "valuehead-causal-lm-attn", "utils/model.py",
        "    ori_model = module_class.from_pretrained(\n"
        "        pretrained_model_name_or_path=local_path,\n"
        "        torch_dtype=torch_dtype,\n"
        "        config=model_config,\n"
        '        attn_implementation="flash_attention_2",\n',
        "    ori_model = module_class.from_pretrained(\n"
        "        pretrained_model_name_or_path=local_path,\n"
        "        torch_dtype=torch_dtype,\n"
        "        config=model_config,\n"
        f"        {_VH_TRL_MARK}\n"
        '        attn_implementation=getattr(model_config, "_attn_implementation", None) or "eager",\n',
        _VH_TRL_MARK, "valuehead trl fallback forces flash_attention_2",
    ),
    # bf16 autocast is hard-coded; a float32 autocast dtype only warns, so the edits disable it for FP32.
    Edit(
        "actor-bf16-autocast", "workers/actor/dp_actor.py",
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16):\n",
        f"        {_AUTOCAST_MARK}\n"
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16, enabled=False):\n",
        _AUTOCAST_MARK, "bf16 autocast; no bf16 on Pascal",
    ),
    Edit(
        "critic-bf16-autocast", "workers/critic/dp_critic.py",
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16):\n",
        f"        {_AUTOCAST_MARK}\n"
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16, enabled=False):\n",
        _AUTOCAST_MARK, "bf16 autocast; no bf16 on Pascal",
    ),
    Edit(
        "rollout-bf16-autocast", "workers/rollout/hf_rollout.py",
        "        with param_ctx, torch.autocast(device_type=get_device_name(), dtype=torch.bfloat16):\n",
        f"        {P40_MARK}: no bf16 on Pascal; generate in the module's own dtype\n"
        "        with param_ctx, torch.autocast(device_type=get_device_name(), dtype=torch.bfloat16, enabled=False):\n",
        f"{P40_MARK}: no bf16 on Pascal; generate in the module's own dtype", "bf16 autocast around generate",
    ),
    Edit(
        "reward-model-bf16-autocast", "workers/fsdp_workers.py",
        "        with torch.no_grad(), torch.autocast(device_type=device_name, dtype=torch.bfloat16):\n",
        f"        {P40_MARK}: no bf16 on Pascal\n"
        "        with torch.no_grad(), torch.autocast(device_type=device_name, dtype=torch.bfloat16, enabled=False):\n",
        f"{P40_MARK}: no bf16 on Pascal", "bf16 autocast in the reward model forward",
    ),
    # The trainer already repeats each prompt n times, so generate(num_return_sequences=n) makes n*n
    # responses (upstream fix in 0.6.0).
    Edit(
        "rollout-num-return-sequences", "workers/rollout/hf_rollout.py",
        '                "num_return_sequences": self.config.n,\n',
        f"                {P40_MARK}: the trainer already repeated the batch n times (verl #2881)\n"
        '                "num_return_sequences": 1,\n',
        f"{P40_MARK}: the trainer already repeated the batch n times", "verl #2881",
    ),
    # generate(position_ids=...) (verl #1637) pins every new token to the last prompt position:
    # transformers slices the given ids and never extends them, so the rollout samples garbage.
    Edit(
        "rollout-position-ids", "workers/rollout/hf_rollout.py",
        "                attention_mask=attention_mask,\n"
        "                position_ids=position_ids,\n"
        "                do_sample=do_sample,\n",
        "                attention_mask=attention_mask,\n"
        f"                {P40_MARK}: no position_ids: generate() derives them from the left-padded mask at every\n"
        "                # step; given ones are never extended, so each new token got the last prompt position\n"
        "                do_sample=do_sample,\n",
        f"{P40_MARK}: no position_ids", "verl #2344",
    ),
)

# --- hopper (verl 0.9.1) and a100 (verl 0.8.0): the rollout without per-token detokenization -------

DETOKENIZE = Edit(
    name="rollout-skip-detokenize",
    file="workers/rollout/vllm_rollout/vllm_async_server.py",
    within="class vLLMHttpServer:\n",
    function="    async def generate(\n",
    anchor="\n        sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)\n",
    replacement=('\n        if not sampling_params.get("stop") and not sampling_params.get("bad_words"):'
                 "  # rlrecipes: verl PR #7679\n"
                 '            sampling_params.setdefault("detokenize", False)\n'
                 "        sampling_params = SamplingParams(max_tokens=max_tokens, **sampling_params)\n"),
    marker="# rlrecipes: verl PR #7679",
    why="verl PR #7679",
)

# --- hopper: verl 0.9.1 ----------------------------------------------------------------------------

HOPPER_EDITS: tuple[Edit, ...] = (
    Edit(
        name="critic-attn",
        file="utils/model.py",
        function="def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):\n",
        anchor='attn_implementation="flash_attention_2",\n',
        replacement=('attn_implementation=getattr(model_config, "_attn_implementation", None) or "flash_attention_2",'
                     "  # rlrecipes: verl #5210\n"),
        marker="# rlrecipes: verl #5210",
        why="verl #5210",
        sites=2,
    ),
    DETOKENIZE,
    Edit(
        name="rows-on-host",
        file="workers/engine/fsdp/transformer_impl.py",
        within="class FSDPEngineWithLMHead(FSDPEngine):\n",
        function="    def forward_step(self, micro_batch: TensorDict, loss_function, forward_only):\n",
        anchor="\n        micro_batch = micro_batch.to(get_device_id())\n",  # the whole line: a deeper one is not it
        replacement=(
            "\n        # rlrecipes: rows-on-host -- the per-row non-tensor fields stay out of the copy to the device\n"
            "        # (.to() rebuilds them row by row); nothing below reads one but multi_modal_inputs\n"
            "        from tensordict import NonTensorStack\n"
            "\n"
            "        rows = [k for k, v in micro_batch.items()\n"
            "                if isinstance(v, NonTensorStack) and k != \"multi_modal_inputs\"]\n"
            "        micro_batch = micro_batch.exclude(*rows).to(get_device_id())\n"),
        marker="# rlrecipes: rows-on-host",
        why="per-row non-tensor fields copied to the GPU row by row",
    ),
)

# --- a100: verl 0.8.0 (vLLM 0.11.0) -------------------------------------------------------------------
# The A100 image has flash-attn, so the critic edit is not needed; its vLLMHttpServer.generate is the same
# token-in/token-out code with the same SamplingParams line.
A100_EDITS: tuple[Edit, ...] = (DETOKENIZE,)

IMAGES: dict[str, Table] = {"p40": Table("0.5.0", P40_EDITS), "hopper": Table("0.9.1", HOPPER_EDITS),
                            "a100": Table("0.8.0", A100_EDITS)}


def verl_root(explicit: str | None) -> Path:
    # an empty value (`--verl-root "$DIR"` with DIR unset) is an error, not the installed verl
    if explicit is not None:
        if not explicit:
            raise FileNotFoundError("--verl-root is empty")
        return Path(explicit)
    # find_spec locates the package without importing it (importing verl pulls in torch and ray)
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("no verl package importable here")
    return Path(list(spec.submodule_search_locations)[0])


def verl_version(root: Path) -> str | None:
    version_file = root / "version" / "version"
    if not version_file.is_file():
        return None
    return version_file.read_text(encoding="utf-8").strip()


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


def scope(text: str, edit: Edit) -> tuple[int, int] | None:
    """(start, end) of the text an edit's anchor is counted in: its function (inside its class, for a method), or
    the whole file; None unless that function is found exactly once."""
    span: tuple[int, int] | None = (0, len(text))
    if edit.function:
        within = block(text, edit.within) if edit.within else span
        span = block(text, edit.function, *within) if within else None
    return span


def apply(text: str, edit: Edit) -> tuple[str, str, str]:
    """(new text, state, detail) of one edit: state UNPATCHED (new text has it applied), ALREADY or MISMATCH."""
    span = scope(text, edit)
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
    scope_name = repr(edit.function.strip()) if edit.function else edit.file
    return text, MISMATCH, f"found {counts} times in {scope_name} (expected {sites})"


def revert(text: str, edit: Edit) -> tuple[str, str, str]:
    """(new text, state, detail) of taking one edit out: REVERTED (new text has the released anchor back wherever
    the edit is applied as the table has it), UNPATCHED (nothing to take out) or MISMATCH (as `apply` says)."""
    _, state, detail = apply(text, edit)
    if state != ALREADY:
        return text, state, detail
    start, end = scope(text, edit)  # found: the edit is applied there
    return text[:start] + text[start:end].replace(edit.replacement, edit.anchor) + text[end:], REVERTED, ""


def write_atomically(path: Path, text: str) -> None:
    # Temp file + rename in the same directory, keeping the mode: a reader never sees half a module.
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".patch-{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def table_root(explicit: str | None, image: str) -> Path:
    """The verl package directory (`explicit`, else the importable verl) holding the verl version `image`'s edits
    were written for; ValueError naming what is wrong otherwise."""
    root = None
    try:
        root = verl_root(explicit).resolve()
        version = verl_version(root)
    except OSError as exc:
        raise ValueError(str(exc)) from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{root / 'version' / 'version'}: not UTF-8 text "
                         f"({exc.reason} at byte {exc.start})") from exc
    if version is None:
        raise ValueError(f"{root}: not a verl package directory (no version/version file)")
    if version != IMAGES[image].verl:
        raise ValueError(f"{root}: verl {version} found; the {image} edits are for verl {IMAGES[image].verl} only")
    return root


def _error(message: str) -> int:
    print(f"patch_verl: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True, choices=sorted(IMAGES),
                        help="whose table of edits: p40 (verl 0.5.0), hopper (verl 0.9.1) or a100 (verl 0.8.0)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 unless every edit is applied")
    parser.add_argument("--verl-root", help="the verl package directory (default: the importable verl)")
    parser.add_argument("--skip", action="append", default=[], metavar="EDIT",
                        help="leave this edit unapplied (repeatable): to show what fails without it")
    args = parser.parse_args(argv)
    table = IMAGES[args.image]
    unknown = sorted(set(args.skip) - {e.name for e in table.edits})
    if unknown:
        return _error(f"--skip: unknown edit(s) {unknown}; known: {', '.join(e.name for e in table.edits)}")
    try:
        root = table_root(args.verl_root, args.image)
    except ValueError as exc:
        return _error(str(exc))

    texts: dict[str, str] = {}
    try:
        for rel in dict.fromkeys(e.file for e in table.edits):
            if (root / rel).is_file():
                texts[rel] = (root / rel).read_text(encoding="utf-8")
    except OSError as exc:
        return _error(str(exc))
    except UnicodeDecodeError as exc:
        return _error(f"{root / rel}: not UTF-8 text ({exc.reason} at byte {exc.start})")
    new = dict(texts)
    states: list[tuple[Edit, str, str]] = []
    for edit in table.edits:
        if edit.file not in new:
            states.append((edit, MISMATCH, f"file not found: {root / edit.file}"))
            continue
        patched, state, detail = apply(new[edit.file], edit)
        if edit.name not in args.skip:
            new[edit.file] = patched
        states.append((edit, state, detail))
    mismatches = [(edit, detail) for edit, state, detail in states if state == MISMATCH]
    write = not args.check and not mismatches
    changed = sorted(rel for rel in new if new[rel] != texts[rel])
    if write:
        for rel in changed:
            write_atomically(root / rel, new[rel])

    print(f"verl {table.verl} at {root} ({args.image} edits{', check only' if args.check else ''})")
    for edit, state, detail in states:
        shown = PATCHED if state == UNPATCHED and write and edit.name not in args.skip else state
        print(f"{shown} {root / edit.file} {edit.name} ({edit.why})" + (f": {detail}" if detail else ""))
    n_todo = sum(state == UNPATCHED for _, state, _ in states)
    n_patched = sum(state == UNPATCHED and edit.name not in args.skip for edit, state, _ in states)
    n_already = sum(state == ALREADY for _, state, _ in states)
    if mismatches:
        print(f"patch_verl: {len(mismatches)} edit(s) do not match verl {table.verl} as released; nothing written:",
              file=sys.stderr)
        for edit, detail in mismatches:
            print(f"  {edit.file} [{edit.name}]: {detail}", file=sys.stderr)
        return 1
    if args.check:
        if n_todo:
            print(f"{n_todo} of {len(states)} edit(s) unpatched; run without --check to patch", file=sys.stderr)
            return 1
        print(f"all {len(states)} edits applied")
        return 0
    print(f"{n_patched} edit(s) patched in {len(changed)} file(s); {n_already} already patched"
          + (f"; left unpatched on request: {', '.join(args.skip)}" if args.skip else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
