#!/usr/bin/env python3
"""Install an image's lock file exactly (hashes required, no resolver), optionally without the GPU-only wheels.

Used by docker/*.Dockerfile:

    python scripts/install-lock.py docker/a100.lock                  # the real image
    python scripts/install-lock.py docker/a100.lock --skip-gpu       # CI stand-in build (no CUDA base)

`--skip-gpu` drops torch, vLLM, Triton, xformers, CuPy and the nvidia-* CUDA runtime wheels (several GB that
need a CUDA base to be worth anything) and installs everything else from the same lock, so CI proves the rest
of the set downloads, verifies against its hashes and installs. Afterwards `pip check` runs; under --skip-gpu
only complaints about the skipped packages themselves are tolerated, so a real inconsistency still fails.

Stdlib only: it runs before anything from the lock is installed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# Wheels that need a CUDA base image (or are the CUDA runtime itself). Names as normalised in the lock.
GPU_ONLY = re.compile(
    r"^(torch|torchvision|torchaudio|triton|vllm|xformers|flashinfer(-python|-cubin)?|flash-attn|cupy-cuda\d+x?"
    r"|nvidia-(?!ml-py$)[a-z0-9-]+"
    # the Hopper lock's CUDA kernel packages (vLLM 0.24 / torch 2.11 dependencies): a Triton fork, TileLang,
    # CUDA Tile and the kernels built on them are GPU code only
    r"|tokenspeed-[a-z]+|tilelang|cuda-tile|quack-kernels|humming-kernels|torchcodec)$"
)
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==")


def split_lock(text: str, skip_gpu: bool) -> tuple[str, list[str]]:
    """The lock text with GPU-only requirement blocks removed (when skip_gpu), and the names removed."""
    kept: list[str] = []
    skipped: list[str] = []
    dropping = False
    for line in text.splitlines(keepends=True):
        match = _REQUIREMENT.match(line)
        if match:
            name = re.sub(r"[._]+", "-", match.group(1).lower())
            dropping = skip_gpu and bool(GPU_ONLY.match(name))
            if dropping:
                skipped.append(name)
        elif not line.startswith((" ", "\t")):
            dropping = False
        if not dropping:
            kept.append(line)
    return "".join(kept), skipped


def tolerated(problem: str) -> bool:
    """True for a `pip check` line that only involves a GPU-only package (missing, or the one that needs it).

    The P40 lock has no torch at all (the Dockerfile installs it from the PyTorch index first), so this goes
    by the GPU_ONLY names, not by what --skip-gpu removed from this lock.
    """
    match = re.match(r"^(\S+) [\d.]+\S* (?:requires|has requirement) ([A-Za-z0-9._-]+)", problem)
    if not match:
        return False
    owner, needed = (re.sub(r"[._]+", "-", g.lower()) for g in match.groups())
    return bool(GPU_ONLY.match(needed) or GPU_ONLY.match(owner))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("lock", type=Path)
    parser.add_argument("--skip-gpu", action="store_true", help="leave out GPU-only wheels (CI stand-in builds)")
    args = parser.parse_args(argv)

    text, skipped = split_lock(args.lock.read_text(), args.skip_gpu)
    if args.skip_gpu:
        print(f"install-lock: --skip-gpu leaves out {len(skipped)} GPU-only packages: {' '.join(skipped)}")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(text)
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "install", "--no-deps", "--require-hashes", "--no-input", "-r", fh.name],
        check=True,
    )
    Path(fh.name).unlink()

    check = subprocess.run([*pip, "check"], capture_output=True, text=True)
    problems = [ln for ln in check.stdout.splitlines() if ln.strip() and not ln.startswith("No broken")]
    real = [p for p in problems if not (args.skip_gpu and tolerated(p))]
    for problem in problems:
        print(f"  pip check: {problem}{'' if problem in real else '  (GPU-only package skipped: tolerated)'}")
    if real:
        print(f"install-lock: {len(real)} inconsistencies in the installed set", file=sys.stderr)
        return 1
    print("install-lock: installed set is consistent" + (" apart from the GPU-only wheels" if args.skip_gpu else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
