#!/usr/bin/env python3
"""Offline wheel bundle: carry a Python stack to a GPU host that has no internet access.

Pack (on a machine with internet):

    python3 scripts/wheel_bundle.py pack -r docker/hopper.lock --skip-file benchmarks/gpu/h200-host-provides.txt \
        --build antlr4-python3-runtime --lzma vllm --out bundle/

  1. reads the pins (NAME==VERSION lines, `--hash=` continuation lines of a hashed lock honoured) and
     drops every name that a `--skip`/`--skip-file` pattern matches (what the host already has, e.g.
     torch and the CUDA libraries of its image, or what the run does not import);
  2. `pip download --no-deps --only-binary=:all:` the rest as CPython wheels for `--python-version` on
     manylinux x86_64 (pip checks the lock's hashes); names given to `--build` are sdist-only pure-Python
     packages: `pip wheel --no-deps` builds them;
  3. strips Ray's wheel to what a single-node trainer imports (no jars, RLlib, Tune, Train, Data, Serve,
     LLM, dashboard client build, source maps; its RECORD is rewritten to match);
  4. optionally recompresses the members of big wheels with LZMA (`--lzma NAME`): the result is still a
     valid wheel (a zip whose members use the LZMA method, which Python's zipfile and therefore pip read);
  5. writes one uncompressed tar of all wheels, split into parts of at most `--part-mib` MiB, plus
     manifest.json with the size and sha256 of every part and every wheel.

Install (on the host, any Python >= 3.8 with pip; stdlib only):

    python3 wheel_bundle.py install bundle/ --target /opt/site      # verify, reassemble, pip install
    export PYTHONPATH=/opt/site

  verifies each part's sha256 (a missing or damaged part is named), reassembles and unpacks the wheels,
  verifies each wheel's sha256, then `pip install --no-index --no-deps --no-compile --target`.
  `check bundle/` only verifies the parts that are present (useful while parts arrive one at a time).

Resplit (when a transfer allows less per part than the bundle was packed with):

    python3 scripts/wheel_bundle.py resplit bundle/ --out bundle-40/ --part-mib 40

  verifies the parts, cuts the same byte stream into parts of at most `--part-mib` MiB and writes them with a
  manifest of the same wheels (each part written under a temporary name, then renamed; the manifest last).
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

MANIFEST = "manifest.json"
PART_GLOB = "wheels.tar.part-*"
MANYLINUX = ["manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"] + [
    f"manylinux_2_{n}_x86_64" for n in (24, 27, 28, 31, 34, 35)]
# Ray packages whose import is not needed by a single-node trainer (verl imports ray, ray.util, ray.actor,
# ray._private, ray.dashboard modules for the job API, ...): removed from its wheel. *.map: source maps.
RAY_STRIP = ("ray/jars/", "ray/rllib/", "ray/tune/", "ray/train/", "ray/data/", "ray/serve/", "ray/llm/",
             "ray/dashboard/client/build/", "ray/air/")
RAY_STRIP_SUFFIX = (".map",)


class BundleError(Exception):
    pass


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ------------------------------------------------------------------------------------ requirements

def read_pins(text: str) -> list[tuple[str, str, list[str]]]:
    """[(name, version, [hash, ...])] from a pins file or a hashed lock (pip-compile/uv format)."""
    pins: list[tuple[str, str, list[str]]] = []
    logical = re.sub(r"\\\n", " ", text)
    for lineno, line in enumerate(logical.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;]+)(.*)$", line)
        if not match:
            raise BundleError(f"line {lineno}: not a NAME==VERSION pin: {line[:80]!r}")
        hashes = re.findall(r"--hash=(\S+)", match.group(3))
        pins.append((match.group(1), match.group(2), hashes))
    return pins


def select(pins, skip: list[str]) -> tuple[list, list]:
    """Split pins into (kept, skipped) by fnmatch patterns on the canonical name."""
    patterns = [_canon(p) for p in skip]
    kept, skipped = [], []
    for pin in pins:
        (skipped if any(fnmatch.fnmatch(_canon(pin[0]), p) for p in patterns) else kept).append(pin)
    return kept, skipped


def wheel_key(filename: str) -> tuple[str, str]:
    """(canonical name, version) from a wheel file name (PEP 427: NAME-VERSION-...whl)."""
    name, version = filename.split("-")[:2]
    return _canon(name), version


def read_patterns(path: Path) -> list[str]:
    return [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines() if ln.split("#", 1)[0].strip()]


def requirement_lines(pins) -> str:
    return "".join(f"{n}=={v}" + "".join(f" --hash={h}" for h in hashes) + "\n" for n, v, hashes in pins)


# ---------------------------------------------------------------------------------- wheel rewriting

def _rewrite_wheel(path: Path, keep, compression: int, compresslevel: int | None = None) -> tuple[int, int]:
    """Rewrite a wheel keeping members for which keep(name) is true, with the given zip compression;
    the RECORD loses the dropped files. Returns (members before, members after)."""
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src:
        infos = src.infolist()
        record = next((i.filename for i in infos if i.filename.endswith(".dist-info/RECORD")), None)
        kept = [i for i in infos if i.filename == record or keep(i.filename)]
        with zipfile.ZipFile(tmp, "w", compression=compression, compresslevel=compresslevel) as dst:
            for info in kept:
                data = src.read(info)
                if info.filename == record:
                    names = {i.filename for i in kept}
                    lines = [ln for ln in data.decode().splitlines() if ln.split(",", 1)[0] in names]
                    data = ("\n".join(lines) + "\n").encode()
                new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
                new.external_attr = info.external_attr
                new.compress_type = compression
                dst.writestr(new, data, compress_type=compression, compresslevel=compresslevel)
    os.replace(tmp, path)
    return len(infos), len(kept)


def strip_ray(path: Path) -> tuple[int, int]:
    def keep(name: str) -> bool:
        return not name.startswith(RAY_STRIP) and not name.endswith(RAY_STRIP_SUFFIX)
    return _rewrite_wheel(path, keep, zipfile.ZIP_DEFLATED, 6)


def lzma_repack(path: Path) -> tuple[int, int]:
    return _rewrite_wheel(path, lambda name: True, zipfile.ZIP_LZMA)


# -------------------------------------------------------------------------------------- pack/split

def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def split_parts(wheels: list[Path], out: Path, part_bytes: int) -> list[dict]:
    """Write one uncompressed tar of `wheels` (flat names) as parts of at most part_bytes each."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob(PART_GLOB):
        old.unlink()
    parts: list[dict] = []

    class PartWriter(io.RawIOBase):
        def __init__(self):
            self.fh = None
            self.left = 0

        def writable(self):
            return True

        def write(self, data):
            view = memoryview(data)
            while view:
                if self.left == 0:
                    self._next()
                n = min(self.left, len(view))
                self.fh.write(view[:n])
                self.left -= n
                view = view[n:]
            return len(data)

        def _next(self):
            if self.fh:
                self.fh.close()
            path = out / f"wheels.tar.part-{len(parts):03d}"
            parts.append({"name": path.name})
            self.fh = open(path, "wb")
            self.left = part_bytes

        def close(self):
            if self.fh:
                self.fh.close()
                self.fh = None
            super().close()

    writer = PartWriter()
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for wheel in sorted(wheels):
            info = tar.gettarinfo(str(wheel), arcname=wheel.name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(wheel, "rb") as fh:
                tar.addfile(info, fh)
    writer.close()
    for part in parts:
        path = out / part["name"]
        part.update(size=path.stat().st_size, sha256=sha256(path))
    return parts


def pip_download(pins, dest: Path, python_version: str, build: set[str], pip: list[str]) -> None:
    binary = [p for p in pins if _canon(p[0]) not in build]
    source = [p for p in pins if _canon(p[0]) in build]
    with tempfile.TemporaryDirectory() as tmp:
        if binary:
            req = Path(tmp) / "binary.txt"
            req.write_text(requirement_lines(binary))
            cmd = [*pip, "download", "--no-deps", "--only-binary=:all:", "--python-version", python_version,
                   "--implementation", "cp", *[a for p in MANYLINUX for a in ("--platform", p)],
                   "-d", str(dest), "-r", str(req)]
            subprocess.run(cmd, check=True)
        for name, version, hashes in source:
            req = Path(tmp) / f"{_canon(name)}.txt"
            req.write_text(requirement_lines([(name, version, hashes)]))
            subprocess.run([*pip, "wheel", "--no-deps", "--no-binary", name, "-w", str(dest), "-r", str(req)],
                           check=True)


def pack(args) -> int:
    text = args.requirements.read_text()
    skip = list(args.skip or [])
    for path in args.skip_file or []:
        skip += read_patterns(path)
    kept, skipped = select(read_pins(text), skip)
    if not kept:
        raise BundleError("every pin was skipped: nothing to pack")
    out = args.out
    wheel_dir = out / "wheels" if args.keep_wheels else Path(tempfile.mkdtemp(prefix="wheel-bundle-"))
    wheel_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.wheels_from:
            for whl in args.wheels_from.glob("*.whl"):
                shutil.copy2(whl, wheel_dir)
        else:
            pip_download(kept, wheel_dir, args.python_version, {_canon(b) for b in args.build or []},
                         [sys.executable, "-m", "pip"])
        wanted = {(_canon(n), v) for n, v, _ in kept}
        wheels = sorted(w for w in wheel_dir.glob("*.whl") if wheel_key(w.name) in wanted)
        by_name = {wheel_key(w.name)[0]: w for w in wheels}
        missing = [f"{n}=={v}" for n, v, _ in kept if _canon(n) not in by_name]
        if missing:
            raise BundleError(f"no wheel for: {', '.join(missing)}")
        notes = {}
        if "ray" in by_name and not args.no_strip_ray:
            before = by_name["ray"].stat().st_size
            strip_ray(by_name["ray"])
            notes["ray"] = f"stripped {before} -> {by_name['ray'].stat().st_size} bytes"
        for name in args.lzma or []:
            whl = by_name.get(_canon(name))
            if whl is None:
                raise BundleError(f"--lzma {name}: no such wheel in the bundle")
            before = whl.stat().st_size
            lzma_repack(whl)
            notes[_canon(name)] = f"LZMA members {before} -> {whl.stat().st_size} bytes"
        parts = split_parts(wheels, out, int(args.part_mib * (1 << 20)))
        manifest = {
            "format": "rlrecipes-wheel-bundle/1",
            "python_version": args.python_version,
            "source": str(args.requirements),
            "skipped": sorted(f"{n}=={v}" for n, v, _ in skipped),
            "notes": notes,
            "wheels": [{"name": w.name, "size": w.stat().st_size, "sha256": sha256(w)} for w in wheels],
            "parts": parts,
        }
        tmp = out / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")
        os.replace(tmp, out / MANIFEST)
    finally:
        if not args.keep_wheels:
            shutil.rmtree(wheel_dir, ignore_errors=True)
    total = sum(p["size"] for p in parts)
    print(f"{len(wheels)} wheels, {len(skipped)} pins skipped, {total / (1 << 20):.1f} MiB in {len(parts)} "
          f"part(s) of <= {args.part_mib:g} MiB: {out}")
    for name, note in notes.items():
        print(f"  {name}: {note}")
    return 0


# ----------------------------------------------------------------------------------- check/install

def load_manifest(bundle: Path) -> dict:
    path = bundle / MANIFEST
    if not path.is_file():
        raise BundleError(f"{path}: no manifest (copy manifest.json with the parts)")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != "rlrecipes-wheel-bundle/1":
        raise BundleError(f"{path}: unknown bundle format {manifest.get('format')!r}")
    return manifest


def verify_parts(bundle: Path, manifest: dict, partial: bool = False) -> list[str]:
    """Names of missing parts; raises on a part whose size or sha256 differs."""
    missing = []
    for part in manifest["parts"]:
        path = bundle / part["name"]
        if not path.is_file():
            missing.append(part["name"])
            continue
        if path.stat().st_size != part["size"] or sha256(path) != part["sha256"]:
            raise BundleError(f"{path}: size or sha256 differs from the manifest (copy it again)")
    if missing and not partial:
        raise BundleError(f"{bundle}: missing part(s) {', '.join(missing)}")
    return missing


class _Concat(io.RawIOBase):
    def __init__(self, paths):
        self.paths = list(paths)
        self.fh = None

    def readable(self):
        return True

    def readinto(self, buf):
        while True:
            if self.fh is None:
                if not self.paths:
                    return 0
                self.fh = open(self.paths.pop(0), "rb")
            n = self.fh.readinto(buf)
            if n:
                return n
            self.fh.close()
            self.fh = None


def unpack(bundle: Path, dest: Path) -> list[Path]:
    manifest = load_manifest(bundle)
    verify_parts(bundle, manifest)
    dest.mkdir(parents=True, exist_ok=True)
    expected = {w["name"]: w for w in manifest["wheels"]}
    stream = io.BufferedReader(_Concat(bundle / p["name"] for p in manifest["parts"]), 1 << 20)
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if not member.isfile() or "/" in member.name or member.name not in expected:
                raise BundleError(f"unexpected tar member {member.name!r}")
            with tar.extractfile(member) as src, open(dest / member.name, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    wheels = []
    for name, meta in expected.items():
        path = dest / name
        if not path.is_file() or sha256(path) != meta["sha256"]:
            raise BundleError(f"{path}: missing or sha256 differs after unpacking")
        wheels.append(path)
    return sorted(wheels)


def check(args) -> int:
    manifest = load_manifest(args.bundle)
    missing = verify_parts(args.bundle, manifest, partial=True)
    have = len(manifest["parts"]) - len(missing)
    print(f"{have}/{len(manifest['parts'])} parts present and verified"
          + (f"; missing: {', '.join(missing)}" if missing else ""))
    return 0 if not missing else 3


def resplit(args) -> int:
    manifest = load_manifest(args.bundle)
    verify_parts(args.bundle, manifest)
    out = args.out
    if out.resolve() == args.bundle.resolve():
        raise BundleError(f"{out}: resplit writes to another folder than the bundle it reads")
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob(PART_GLOB), out / MANIFEST]:
        old.unlink(missing_ok=True)
    part_bytes = int(args.part_mib * (1 << 20))
    parts: list[dict] = []
    with io.BufferedReader(_Concat(args.bundle / p["name"] for p in manifest["parts"]), 1 << 20) as stream:
        while True:
            chunk_left, path = part_bytes, out / f"wheels.tar.part-{len(parts):03d}"
            tmp = path.with_name(path.name + ".tmp")
            with open(tmp, "wb") as fh:
                while chunk_left and (data := stream.read(min(chunk_left, 1 << 20))):
                    fh.write(data)
                    chunk_left -= len(data)
            if chunk_left == part_bytes:
                tmp.unlink()
                break
            tmp.rename(path)
            parts.append({"name": path.name, "size": path.stat().st_size, "sha256": sha256(path)})
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps({**manifest, "parts": parts}, indent=1) + "\n")
    tmp.rename(out / MANIFEST)
    print(f"{len(parts)} part(s) of <= {args.part_mib:g} MiB: {out}")
    return 0


def install(args) -> int:
    wheel_dir = args.wheels or Path(tempfile.mkdtemp(prefix="wheel-bundle-"))
    try:
        wheels = unpack(args.bundle, wheel_dir)
        print(f"{len(wheels)} wheels verified in {wheel_dir}")
        if args.target:
            cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                   "--no-cache-dir", "--upgrade", "--target", str(args.target), *map(str, wheels)]
            subprocess.run(cmd, check=True)
            print(f"installed into {args.target} (put it on PYTHONPATH)")
    finally:
        if args.wheels is None:
            shutil.rmtree(wheel_dir, ignore_errors=True)
    return 0


def _part_mib(text: str) -> float:
    """--part-mib: a positive, finite number of MiB (0 would write no part at all, or never finish one)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value * (1 << 20) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number of MiB (at least one byte), got {text!r}")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="wheel_bundle.py", description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="download, strip, split into parts with a sha256 manifest")
    p.add_argument("-r", "--requirements", type=Path, required=True, help="pins or hashed lock (NAME==VERSION)")
    p.add_argument("--out", type=Path, required=True, help="folder for the parts and manifest.json")
    p.add_argument("--skip", action="append", help="fnmatch pattern of names not to bundle (repeatable)")
    p.add_argument("--skip-file", action="append", type=Path, help="file of such patterns, one a line")
    p.add_argument("--build", action="append", help="sdist-only pure-Python name: build its wheel here")
    p.add_argument("--lzma", action="append", help="recompress this wheel's members with LZMA")
    p.add_argument("--no-strip-ray", action="store_true", help="keep Ray's wheel whole")
    p.add_argument("--part-mib", type=_part_mib, default=60, help="largest part, MiB (default 60)")
    p.add_argument("--python-version", default="3.12", help="target CPython (default 3.12)")
    p.add_argument("--keep-wheels", action="store_true", help="keep the wheels in OUT/wheels")
    p.add_argument("--wheels-from", type=Path, help="take the wheels from this folder instead of pip download")
    p.set_defaults(func=pack)
    c = sub.add_parser("check", help="verify the parts present so far against the manifest")
    c.add_argument("bundle", type=Path)
    c.set_defaults(func=check)
    r = sub.add_parser("resplit", help="verify, then cut the same bundle into smaller parts in another folder")
    r.add_argument("bundle", type=Path)
    r.add_argument("--out", type=Path, required=True, help="folder for the new parts and manifest.json")
    r.add_argument("--part-mib", type=_part_mib, required=True, help="largest part, MiB")
    r.set_defaults(func=resplit)
    i = sub.add_parser("install", help="verify, reassemble, unpack and pip install --no-deps --target")
    i.add_argument("bundle", type=Path)
    i.add_argument("--target", type=Path, help="pip install --target (omit to only unpack and verify)")
    i.add_argument("--wheels", type=Path, help="keep the unpacked wheels here")
    i.set_defaults(func=install)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (BundleError, subprocess.CalledProcessError, OSError) as exc:
        print(f"wheel_bundle: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
