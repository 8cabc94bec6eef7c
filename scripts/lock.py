#!/usr/bin/env python3
"""Compile docker/pins/<image>.in into docker/<image>.lock (exact versions + sha256 hashes) with uv.

`make lock` runs this. Each pins file carries its own resolver options on `# lock:` lines (target Python,
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
IMAGES = ("a100", "p40")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("images", nargs="*", metavar="IMAGE", help=f"one of {', '.join(IMAGES)} (default: all)")
    parser.add_argument("--check", action="store_true", help="fail if a committed lock is stale")
    args = parser.parse_args(argv)
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
