#!/usr/bin/env python3
"""Compile docker/pins/<image>.in into docker/<image>.lock (exact versions + sha256 hashes) with uv.

`make lock` runs this. After the PyPI locks it refreshes what scripts/lock_sources.py pins from other hosts:
docker/p40-torch.lock (torch+cu118 from the PyTorch index, an explicit uv index), docker/bases.lock (base images
by digest) and docker/flash-attn.lock (the FlashAttention wheel by sha256); `--only` picks parts. Each pins file carries its own resolver options on `# lock:` lines (target Python,
the date cut-off, packages left to the Dockerfile), so the pins file alone says how its lock was made.
`--check` re-resolves into a temporary file and fails if the committed lock differs (needs the index).

Why a date cut-off (`--exclude-newer`): resolution alone is not proof of compatibility. Left free, the
resolver pairs vLLM 0.11.0 (Oct 2025) with transformers 5.x, pydantic/openai/protobuf majors and a
FastAPI/Starlette that postdate it. Cutting every package at the date the image's core pins were current,
with named exceptions for the few top-level pins released later, gives the set those releases were tested
against -- and makes the lock reproducible: re-running `make lock` yields the same file.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PINS_DIR = REPO / "docker" / "pins"
IMAGES = ("a100", "hopper", "p40")


def uv_binary() -> str:
    for candidate in (REPO / ".venvs" / "dev" / "bin" / "uv", shutil.which("uv")):
        if candidate and Path(candidate).exists():
            return str(candidate)
    sys.exit("lock: uv not found; install it with `.venvs/dev/bin/pip install uv`")


def lock_options(pins: Path) -> list[str]:
    """The uv options from the pins file's `# lock:` lines, relative paths resolved against docker/pins/."""
    options: list[str] = []
    for line in pins.read_text().splitlines():
        if line.startswith("# lock:"):
            options += shlex.split(line[len("# lock:"):])
    if not any(opt.startswith("--python-version") for opt in options):
        sys.exit(f"lock: {pins}: no `# lock: --python-version X.Y` line")
    return [str(PINS_DIR / opt[len("@"):]) if opt.startswith("@") else opt for opt in options]


def compile_lock(image: str, output: Path) -> None:
    pins = PINS_DIR / f"{image}.in"
    cmd = [
        uv_binary(), "pip", "compile", "--quiet", "--generate-hashes",
        "--python-platform", "x86_64-manylinux_2_28",
        "--custom-compile-command", f"make lock  # scripts/lock.py: docker/pins/{image}.in",
        *lock_options(pins), str(pins), "-o", str(output),
    ]
    env = dict(os.environ)
    # uv ships its own root certificates; behind a TLS-inspecting proxy the system bundle is the one to trust.
    if "SSL_CERT_FILE" not in env and Path("/etc/ssl/certs/ca-certificates.crt").exists():
        env["SSL_CERT_FILE"] = "/etc/ssl/certs/ca-certificates.crt"
    env.pop("UV_EXCLUDE_NEWER", None)
    result = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"lock: resolving {pins.relative_to(REPO)} failed:\n{result.stderr.strip()}")


SOURCES = ("pip", "torch", "bases", "flash-attn")


def refresh_sources(parts: list[str]) -> list[str]:
    """Refresh the non-PyPI pins; returns the parts that could not be refreshed from here."""
    import lock_sources as src

    failed = []
    steps = {"torch": lambda: src.refresh_torch(uv_binary()), "bases": src.refresh_bases,
             "flash-attn": src.refresh_flash_attn}
    for part in parts:
        try:
            path = steps[part]()
        except src.SourceError as exc:
            failed.append(part)
            print(f"lock: {part}: cannot refresh from here: {exc} (the committed file is unchanged)", file=sys.stderr)
            continue
        print(f"lock: wrote {path.relative_to(REPO)} ({len(src.entries(path))} entries)")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="*", metavar="IMAGE", help=f"one of {', '.join(IMAGES)} (default: all)")
    parser.add_argument("--check", action="store_true", help="fail if a committed lock is stale")
    parser.add_argument("--only", action="append", choices=SOURCES, default=None,
                        help="refresh only these parts (repeatable; default: all; --check covers pip only)")
    args = parser.parse_args(argv)
    parts = args.only or list(SOURCES)
    if "pip" not in parts:
        failed = refresh_sources(parts)
        return 1 if failed else 0
    unknown = sorted(set(args.images) - set(IMAGES))
    if unknown:
        parser.error(f"unknown image(s) {', '.join(unknown)}; choose from {', '.join(IMAGES)}")
    stale = []
    for image in args.images or IMAGES:
        lock = REPO / "docker" / f"{image}.lock"
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                fresh = Path(tmp) / lock.name
                compile_lock(image, fresh)
                new, old = fresh.read_text(), lock.read_text() if lock.exists() else ""
            if new != old:
                stale.append(image)
                sys.stdout.writelines(difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), f"{lock.name} (committed)", f"{lock.name} (fresh)"))
        else:
            tmp_out = lock.with_name(f".{lock.name}.tmp")
            try:
                compile_lock(image, tmp_out)
                os.replace(tmp_out, lock)
            finally:
                tmp_out.unlink(missing_ok=True)
            count = sum(1 for line in lock.read_text().splitlines() if line[:1].isalnum())
            print(f"lock: wrote {lock.relative_to(REPO)} ({count} packages)")
    if stale:
        print(f"lock: stale: {', '.join(stale)}; run `make lock` and commit the result", file=sys.stderr)
        return 1
    if not args.check and not args.images:
        failed = refresh_sources([p for p in parts if p != "pip"])
        if failed:
            print(f"lock: not refreshed here: {', '.join(failed)} (docs/images.md, 'Supply chain')", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
