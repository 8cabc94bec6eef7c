#!/usr/bin/env python3
"""Patch verl 0.5.0 so that its FSDP + Hugging Face rollout path trains in FP32 without flash-attn.

The P40 (sm_61) has no bf16, no FlashAttention-2 and no Triton, and verl 0.5.0 hard-codes all three on
the FSDP path. Each site below is an exact anchor text: the script checks that every anchor matches
exactly once (or that its patched text already does) before it writes anything, so a new verl release
or a changed line fails the image build with the file and site named instead of half-patching it.

    python3 scripts/patch_verl_p40.py                    # patch the installed verl
    python3 scripts/patch_verl_p40.py --check            # report only; exit 1 if anything is unpatched
    python3 scripts/patch_verl_p40.py --verl-root DIR    # patch a verl package directory (DIR/verl-like)
    python3 scripts/patch_verl_p40.py --skip critic-attn-implementation   # all but one site (to show its failure)

Each site prints PATCHED (changed now), ALREADY (patched before) or MISMATCH (anchor not found exactly
once). Running it twice changes nothing. Exit codes: 0 ok, 1 mismatch (or unpatched under --check),
2 bad input (no verl found, or a verl version other than 0.5.0).

Stdlib only: it runs in the image build right after `pip install verl`, before rlrecipes is installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

VERL_VERSION = "0.5.0"
MARK = "rlrecipes-p40"


@dataclass(frozen=True)
class Site:
    file: str  # relative to the verl package directory
    name: str
    why: str
    anchor: str
    patched: str


def _guard_flash_attn(indent: str = "") -> tuple[str, str]:
    anchor = (
        f"{indent}if is_cuda_available:\n"
        f"{indent}    from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input\n"
    )
    patched = (
        f"{indent}if is_cuda_available:\n"
        f"{indent}    try:  # {MARK}: flash-attn is absent on Pascal; only use_remove_padding=True needs these\n"
        f"{indent}        from flash_attn.bert_padding import index_first_axis, pad_input, rearrange, unpad_input\n"
        f"{indent}    except ImportError:\n"
        f"{indent}        pass\n"
    )
    return anchor, patched


_FA_ANCHOR, _FA_PATCHED = _guard_flash_attn()

SITES: tuple[Site, ...] = (
    Site(
        "workers/actor/dp_actor.py", "actor-flash-attn-import",
        "module-level flash_attn import fails with ModuleNotFoundError when flash-attn is not installed",
        _FA_ANCHOR, _FA_PATCHED,
    ),
    Site(
        "workers/critic/dp_critic.py", "critic-flash-attn-import",
        "module-level flash_attn import fails with ModuleNotFoundError when flash-attn is not installed",
        _FA_ANCHOR, _FA_PATCHED,
    ),
    Site(
        "workers/engine/fsdp/engine_impl.py", "engine-flash-attn-import",
        "module-level flash_attn import fails with ModuleNotFoundError when flash-attn is not installed",
        _FA_ANCHOR, _FA_PATCHED,
    ),
    Site(
        "workers/fsdp_workers.py", "critic-attn-implementation",
        "the critic config is always built with flash_attention_2 and its override_config is never applied;"
        " honour override_config._attn_implementation, default eager",
        "        critic_model_config = AutoConfig.from_pretrained(\n"
        "            local_path,\n"
        '            attn_implementation="flash_attention_2",\n',
        "        critic_model_config = AutoConfig.from_pretrained(\n"
        "            local_path,\n"
        f"            # {MARK}: honour the critic's override_config (eager unless it names another)\n"
        '            attn_implementation=override_config_kwargs.get("_attn_implementation", "eager"),\n',
    ),
    Site(
        "utils/model.py", "valuehead-token-classification-attn",
        "load_valuehead_model passes flash_attention_2 explicitly, overriding the critic config",
        "            config=model_config,\n"
        '            attn_implementation="flash_attention_2",\n'
        "            trust_remote_code=trust_remote_code,\n"
        "        )\n"
        "        return model\n",
        "            config=model_config,\n"
        f"            # {MARK}: take the attention the caller configured instead of forcing flash_attention_2\n"
        '            attn_implementation=getattr(model_config, "_attn_implementation", None) or "eager",\n'
        "            trust_remote_code=trust_remote_code,\n"
        "        )\n"
        "        return model\n",
    ),
    Site(
        "utils/model.py", "valuehead-causal-lm-attn",
        "load_valuehead_model's trl fallback passes flash_attention_2 explicitly",
        "    ori_model = module_class.from_pretrained(\n"
        "        pretrained_model_name_or_path=local_path,\n"
        "        torch_dtype=torch_dtype,\n"
        "        config=model_config,\n"
        '        attn_implementation="flash_attention_2",\n',
        "    ori_model = module_class.from_pretrained(\n"
        "        pretrained_model_name_or_path=local_path,\n"
        "        torch_dtype=torch_dtype,\n"
        "        config=model_config,\n"
        f"        # {MARK}: take the attention the caller configured instead of forcing flash_attention_2\n"
        '        attn_implementation=getattr(model_config, "_attn_implementation", None) or "eager",\n',
    ),
    Site(
        "workers/actor/dp_actor.py", "actor-bf16-autocast",
        "bf16 autocast is hard-coded; a float32 autocast dtype only warns, so disable it for FP32",
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16):\n",
        f"        # {MARK}: no bf16 on Pascal; the FSDP mixed-precision config decides the dtype\n"
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16, enabled=False):\n",
    ),
    Site(
        "workers/critic/dp_critic.py", "critic-bf16-autocast",
        "bf16 autocast is hard-coded; disable it for FP32",
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16):\n",
        f"        # {MARK}: no bf16 on Pascal; the FSDP mixed-precision config decides the dtype\n"
        "        with torch.autocast(device_type=self.device_name, dtype=torch.bfloat16, enabled=False):\n",
    ),
    Site(
        "workers/rollout/hf_rollout.py", "rollout-bf16-autocast",
        "bf16 autocast is hard-coded around generate; disable it for FP32",
        "        with param_ctx, torch.autocast(device_type=get_device_name(), dtype=torch.bfloat16):\n",
        f"        # {MARK}: no bf16 on Pascal; generate in the module's own dtype\n"
        "        with param_ctx, torch.autocast(device_type=get_device_name(), dtype=torch.bfloat16, enabled=False):\n",
    ),
    Site(
        "workers/fsdp_workers.py", "reward-model-bf16-autocast",
        "bf16 autocast is hard-coded in the reward model forward; disable it for FP32",
        "        with torch.no_grad(), torch.autocast(device_type=device_name, dtype=torch.bfloat16):\n",
        f"        # {MARK}: no bf16 on Pascal\n"
        "        with torch.no_grad(), torch.autocast(device_type=device_name, dtype=torch.bfloat16, enabled=False):\n",
    ),
    Site(
        "workers/rollout/hf_rollout.py", "rollout-num-return-sequences",
        "the trainer already repeats each prompt n times, so generate(num_return_sequences=n) makes n*n"
        " responses (upstream fix verl #2881, in 0.6.0)",
        '                "num_return_sequences": self.config.n,\n',
        f"                # {MARK}: the trainer already repeated the batch n times (verl #2881)\n"
        '                "num_return_sequences": 1,\n',
    ),
    Site(
        "workers/rollout/hf_rollout.py", "rollout-position-ids",
        "generate(position_ids=...) (verl #1637) pins every new token to the last prompt position: transformers"
        " slices the given ids and never extends them, so the rollout samples garbage (verl #2344)",
        "                attention_mask=attention_mask,\n"
        "                position_ids=position_ids,\n"
        "                do_sample=do_sample,\n",
        "                attention_mask=attention_mask,\n"
        f"                # {MARK}: no position_ids: generate() derives them from the left-padded mask at every\n"
        "                # step; given ones are never extended, so each new token got the last prompt position\n"
        "                do_sample=do_sample,\n",
    ),
)

PATCHED, ALREADY, TODO, MISMATCH = "PATCHED", "ALREADY", "UNPATCHED", "MISMATCH"


def default_verl_root() -> Path | None:
    # find_spec locates the package without importing it (importing verl pulls in torch and ray).
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def verl_version(root: Path) -> str | None:
    version_file = root / "version" / "version"
    if not version_file.is_file():
        return None
    return version_file.read_text(encoding="utf-8").strip()


def site_state(text: str, site: Site) -> tuple[str, str]:
    """(state, detail) of one site in a file's current text."""
    n_anchor = text.count(site.anchor)
    n_patched = text.count(site.patched)
    if n_anchor == 1 and n_patched == 0:
        return TODO, ""
    if n_anchor == 0 and n_patched == 1:
        return ALREADY, ""
    return MISMATCH, f"anchor found {n_anchor} times, patched text {n_patched} times (expected exactly one of them once)"


def plan(root: Path, skip: frozenset[str] = frozenset()) -> tuple[list[tuple[Site, str, str]], dict[str, str]]:
    """States of all sites, and the new text of every file that has sites to patch (nothing written).
    Sites named in `skip` are checked but left as they are."""
    results: list[tuple[Site, str, str]] = []
    new_texts: dict[str, str] = {}
    for site in SITES:
        path = root / site.file
        if site.file not in new_texts:
            if not path.is_file():
                results.append((site, MISMATCH, f"file not found: {path}"))
                continue
            new_texts[site.file] = path.read_text(encoding="utf-8")
        text = new_texts[site.file]
        state, detail = site_state(text, site)
        if state == TODO and site.name not in skip:
            new_texts[site.file] = text.replace(site.anchor, site.patched, 1)
        results.append((site, state, detail))
    return results, new_texts


def _write_atomic(path: Path, text: str) -> None:
    # Temp file + rename in the same directory, keeping the mode: a reader never sees half a module.
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verl-root", type=Path, default=None,
                        help="verl package directory (the one holding version/version); default: the installed verl")
    parser.add_argument("--check", action="store_true", help="report each site and change nothing; exit 1 unless all are patched")
    parser.add_argument("--skip", action="append", default=[], metavar="SITE",
                        help="leave this site unpatched (repeatable): to show what fails without it")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.skip) - {s.name for s in SITES})
    if unknown:
        print(f"error: --skip: unknown site(s) {unknown}; known: {', '.join(s.name for s in SITES)}", file=sys.stderr)
        return 2

    root = args.verl_root or default_verl_root()
    if root is None:
        print("error: verl is not installed here; pass --verl-root DIR", file=sys.stderr)
        return 2
    root = root.resolve()
    version = verl_version(root)
    if version is None:
        print(f"error: {root}: not a verl package directory (no version/version file)", file=sys.stderr)
        return 2
    if version != VERL_VERSION:
        print(f"error: {root}: verl {version} found; this patch is for verl {VERL_VERSION} only "
              "(from 0.6.0 on the HF rollout is gone and the sites differ)", file=sys.stderr)
        return 2

    results, new_texts = plan(root, skip=frozenset(args.skip))
    mismatches = [(s, d) for s, state, d in results if state == MISMATCH]
    todo = [s for s, state, _ in results if state == TODO and s.name not in args.skip]

    print(f"verl {version} at {root}{' (check only)' if args.check else ''}")
    for site, state, detail in results:
        shown = state
        if state == TODO and not args.check and not mismatches and site.name not in args.skip:
            shown = PATCHED
        line = f"  {shown:<9} {site.file}  [{site.name}]"
        if state == MISMATCH:
            line += f"  -- {detail}"
        print(line)

    if mismatches:
        print(f"error: {len(mismatches)} site(s) do not match verl {VERL_VERSION} as released; nothing was changed:",
              file=sys.stderr)
        for site, detail in mismatches:
            print(f"  {site.file} [{site.name}]: {detail}", file=sys.stderr)
        return 1
    if args.check:
        if any(state == TODO for _, state, _ in results):
            n_todo = sum(state == TODO for _, state, _ in results)
            print(f"{n_todo} of {len(SITES)} site(s) unpatched; run without --check to patch", file=sys.stderr)
            return 1
        print(f"all {len(SITES)} sites patched")
        return 0

    changed_files = sorted({s.file for s in todo})
    for rel in changed_files:
        _write_atomic(root / rel, new_texts[rel])
    print(f"{len(todo)} site(s) patched in {len(changed_files)} file(s); "
          f"{sum(state == ALREADY for _, state, _ in results)} already patched"
          + (f"; left unpatched on request: {', '.join(args.skip)}" if args.skip else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
