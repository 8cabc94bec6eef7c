"""scripts/wheel_bundle.py with tiny fake wheels, no network: pins and hashed-lock parsing, skip
patterns, Ray stripping (RECORD rewritten), LZMA repacking, split into size-capped parts with a sha256
manifest, partial/corrupt part detection, and a real `pip install --no-index --no-deps --target` of the
reassembled wheels (the LZMA-compressed one included)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "wheel_bundle.py"

_spec = importlib.util.spec_from_file_location("wheel_bundle", SCRIPT)
wb = importlib.util.module_from_spec(_spec)
sys.modules["wheel_bundle"] = wb
_spec.loader.exec_module(wb)


def make_wheel(folder: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD with sha256 of every file)."""
    dist = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    members[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    members[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    return path


@pytest.fixture
def wheels(tmp_path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    # Incompressible payloads so the parts really split; a compressible one to see LZMA act.
    rng = hashlib.sha256(b"seed").digest()
    noise = b"".join(hashlib.sha256(rng + bytes([i % 256, i // 256])).digest() for i in range(2048))  # 64 KiB
    make_wheel(src, "alpha", "1.0", {"alpha/__init__.py": b"VALUE = 'alpha'\n", "alpha/blob.bin": noise})
    make_wheel(src, "bigtext", "2.0", {"bigtext/__init__.py": b"X = 1\n", "bigtext/data.txt": b"abc " * 50000})
    make_wheel(src, "ray", "2.58.0", {
        "ray/__init__.py": b"import ray.util\n",
        "ray/util/__init__.py": b"",
        "ray/rllib/__init__.py": b"raise ImportError('stripped')\n",
        "ray/jars/ray_dist.jar": noise[:4096],
        "ray/dashboard/client/build/static/main.js": b"js",
        "ray/dashboard/modules/job/__init__.py": b"",
        "ray/core/app.js.map": b"map",
    })
    make_wheel(src, "skipme", "0.1", {"skipme/__init__.py": b""})
    return src


LOCK = """\
# comment line
alpha==1.0 \\
    --hash=sha256:aaaa \\
    --hash=sha256:bbbb
    # via something
bigtext[extra]==2.0
ray==2.58.0 ; python_version >= "3.10"
skipme==0.1
Torch==2.11.0
nvidia-cublas==13.1.0.3
"""


def test_read_pins_hashed_lock_and_markers():
    pins = wb.read_pins(LOCK)
    assert [(n, v) for n, v, _ in pins] == [("alpha", "1.0"), ("bigtext", "2.0"), ("ray", "2.58.0"),
                                             ("skipme", "0.1"), ("Torch", "2.11.0"), ("nvidia-cublas", "13.1.0.3")]
    assert pins[0][2] == ["sha256:aaaa", "sha256:bbbb"]
    assert pins[1][2] == []


def test_read_pins_rejects_unpinned_line():
    with pytest.raises(wb.BundleError, match=r"line 2: not a NAME==VERSION pin"):
        wb.read_pins("alpha==1.0\nbeta>=2\n")


def test_select_skip_patterns_canonical_names():
    kept, skipped = wb.select(wb.read_pins(LOCK), ["torch", "NVIDIA_*", "SkipMe"])
    assert [n for n, _, _ in kept] == ["alpha", "bigtext", "ray"]
    assert [n for n, _, _ in skipped] == ["skipme", "Torch", "nvidia-cublas"]


def test_strip_ray_drops_folders_and_rewrites_record(wheels):
    ray = wheels / "ray-2.58.0-py3-none-any.whl"
    before, after = wb.strip_ray(ray)
    assert (before, after) == (10, 6)
    with zipfile.ZipFile(ray) as zf:
        names = set(zf.namelist())
        record = zf.read("ray-2.58.0.dist-info/RECORD").decode()
    assert "ray/util/__init__.py" in names and "ray/dashboard/modules/job/__init__.py" in names
    assert not any(n.startswith(("ray/rllib/", "ray/jars/", "ray/dashboard/client/build/")) for n in names)
    assert "ray/core/app.js.map" not in names
    recorded = {line.split(",", 1)[0] for line in record.splitlines()}
    assert recorded == names


def pack(tmp_path, wheels, *extra) -> tuple[int, Path]:
    req = tmp_path / "lock.txt"
    req.write_text(LOCK)
    out = tmp_path / "bundle"
    rc = wb.main(["pack", "-r", str(req), "--out", str(out), "--wheels-from", str(wheels),
                  "--skip", "torch", "--skip", "nvidia-*", "--skip", "skipme", "--part-mib", str(20 / 1024), *extra])
    return rc, out


def test_pack_splits_into_capped_parts_with_manifest(tmp_path, wheels):
    rc, out = pack(tmp_path, wheels, "--lzma", "bigtext")
    assert rc == 0
    manifest = json.loads((out / "manifest.json").read_text())
    parts = manifest["parts"]
    assert len(parts) >= 3  # > 60 KiB of noise in 20 KiB parts
    assert all(p["size"] <= 20 * 1024 for p in parts)
    assert all((out / p["name"]).stat().st_size == p["size"] for p in parts)
    assert all(hashlib.sha256((out / p["name"]).read_bytes()).hexdigest() == p["sha256"] for p in parts)
    assert sorted(w["name"].split("-")[0] for w in manifest["wheels"]) == ["alpha", "bigtext", "ray"]
    assert manifest["skipped"] == ["Torch==2.11.0", "nvidia-cublas==13.1.0.3", "skipme==0.1"]
    assert "ray" in manifest["notes"] and "bigtext" in manifest["notes"]


def test_pack_fails_naming_a_pin_without_wheel(tmp_path, wheels):
    (wheels / "ray-2.58.0-py3-none-any.whl").unlink()
    rc, out = pack(tmp_path, wheels)
    assert rc == 2
    assert not (out / "manifest.json").exists()


def test_check_reports_missing_and_rejects_corrupt_parts(tmp_path, wheels, capsys):
    _, out = pack(tmp_path, wheels)
    parts = sorted(out.glob("wheels.tar.part-*"))
    assert wb.main(["check", str(out)]) == 0
    parts[1].rename(tmp_path / parts[1].name)
    assert wb.main(["check", str(out)]) == 3
    assert f"missing: {parts[1].name}" in capsys.readouterr().out
    assert wb.main(["install", str(out)]) == 2
    assert f"missing part(s) {parts[1].name}" in capsys.readouterr().err
    (tmp_path / parts[1].name).rename(parts[1])
    data = bytearray(parts[0].read_bytes())
    data[100] ^= 0xFF
    parts[0].write_bytes(bytes(data))
    assert wb.main(["check", str(out)]) == 2
    assert f"{parts[0].name}: size or sha256 differs" in capsys.readouterr().err


def test_install_reassembles_verifies_and_pip_installs(tmp_path, wheels):
    _, out = pack(tmp_path, wheels, "--lzma", "bigtext")
    target = tmp_path / "site"
    kept = tmp_path / "wheels"
    rc = wb.main(["install", str(out), "--target", str(target), "--wheels", str(kept)])
    assert rc == 0
    assert sorted(p.name.split("-")[0] for p in kept.glob("*.whl")) == ["alpha", "bigtext", "ray"]
    with zipfile.ZipFile(next(kept.glob("bigtext-*.whl"))) as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_LZMA}
    with zipfile.ZipFile(next(kept.glob("alpha-*.whl"))) as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}
    result = subprocess.run(
        [sys.executable, "-c",
         "import alpha, bigtext, ray, importlib.util as u; "
         "print(alpha.VALUE, len(open(bigtext.__file__.replace('__init__.py', 'data.txt')).read()), "
         "u.find_spec('ray.rllib') is None)"],
        capture_output=True, text=True, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["alpha", "200000", "True"]


def test_resplit_cuts_the_same_stream_into_smaller_parts_that_install(tmp_path, wheels, capsys):
    _, out = pack(tmp_path, wheels)
    small = tmp_path / "small"
    assert wb.main(["resplit", str(out), "--out", str(small), "--part-mib", str(7 / 1024)]) == 0
    old = json.loads((out / "manifest.json").read_text())
    new = json.loads((small / "manifest.json").read_text())
    assert new["wheels"] == old["wheels"]
    assert len(new["parts"]) > len(old["parts"])
    assert all(p["size"] <= 7 * 1024 for p in new["parts"])
    joined = b"".join((small / p["name"]).read_bytes() for p in new["parts"])
    assert joined == b"".join((out / p["name"]).read_bytes() for p in old["parts"])
    assert not list(small.glob("*.tmp"))
    kept = tmp_path / "kept"
    assert wb.main(["install", str(small), "--wheels", str(kept)]) == 0
    assert sorted(p.name.split("-")[0] for p in kept.glob("*.whl")) == ["alpha", "bigtext", "ray"]
    # a damaged source part is refused before anything is written; the folder it reads is not its output
    part = out / old["parts"][0]["name"]
    part.write_bytes(part.read_bytes()[:-1])
    assert wb.main(["resplit", str(out), "--out", str(tmp_path / "other"), "--part-mib", "1"]) == 2
    assert "size or sha256 differs" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
    assert wb.main(["resplit", str(small), "--out", str(small), "--part-mib", "1"]) == 2
    assert "another folder" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["pack", "resplit"])
@pytest.mark.parametrize("mib", ["0", "-1", "nan", "inf", "abc"])
def test_part_size_must_be_a_positive_number_and_nothing_is_written(tmp_path, wheels, capsys, command, mib):
    _, out = pack(tmp_path, wheels)
    target = tmp_path / "new"
    if command == "pack":
        req = tmp_path / "lock.txt"
        args = ["pack", "-r", str(req), "--out", str(target), "--wheels-from", str(wheels), "--part-mib", mib]
    else:
        args = ["resplit", str(out), "--out", str(target), "--part-mib", mib]
    with pytest.raises(SystemExit) as exc:
        wb.main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--part-mib" in err and repr(mib) in err
    assert not target.exists()
