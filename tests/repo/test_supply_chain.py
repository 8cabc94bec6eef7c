"""What `make lock` pins besides the PyPI locks (scripts/lock_sources.py): the P40 torch from the PyTorch index
as an explicit uv index, base images by digest, the FlashAttention wheel by sha256 -- and how the build uses
them. The hosts involved are unreachable here, so the registry protocol runs against a local stand-in registry
and the committed files are checked for shape: produced (every entry hashed / digested) or a header only."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import lock_sources as src  # noqa: E402

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(("ref", "parts"), [
    ("nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04", ("registry-1.docker.io", "nvidia/cuda", "12.8.1-cudnn-devel-ubuntu22.04")),
    ("python:3.12-slim", ("registry-1.docker.io", "library/python", "3.12-slim")),
    ("ghcr.io/me/img:v1", ("ghcr.io", "me/img", "v1")),
    ("localhost:5000/x/y:z", ("localhost:5000", "x/y", "z")),
])
def test_split_reference(ref, parts):
    assert src.split_reference(ref) == parts


class FakeRegistry(http.server.BaseHTTPRequestHandler):
    """Registry API v2 as Docker Hub answers it: 401 with a bearer challenge, a token service, then the digest."""

    seen: list[tuple[str, str, str]] = []

    def log_message(self, *args):
        pass

    def do_GET(self):  # the token service
        self.seen.append(("GET", self.path, self.headers.get("Authorization", "")))
        body = json.dumps({"token": "tok123"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):
        self.seen.append(("HEAD", self.path, self.headers.get("Authorization", "")))
        if self.headers.get("Authorization") != "Bearer tok123":
            port = self.server.server_address[1]
            self.send_response(401)
            self.send_header("WWW-Authenticate", f'Bearer realm="http://127.0.0.1:{port}/token",'
                                                  f'service="registry.test",scope="repository:nvidia/cuda:pull"')
            self.end_headers()
            return
        if not self.path.endswith("/manifests/12.8.1-cudnn-devel-ubuntu22.04"):
            self.send_response(404)
            self.end_headers()
            return
        assert "application/vnd.oci.image.index.v1+json" in self.headers["Accept"]
        self.send_response(200)
        self.send_header("Docker-Content-Digest", DIGEST)
        self.end_headers()


@pytest.fixture
def registry():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeRegistry)
    FakeRegistry.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_registry_digest_follows_the_bearer_challenge(registry):
    digest = src.registry_digest(f"{registry}/nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04", scheme="http")
    assert digest == DIGEST
    methods = [(m, p.split("?")[0]) for m, p, _ in FakeRegistry.seen]
    assert methods == [("HEAD", "/v2/nvidia/cuda/manifests/12.8.1-cudnn-devel-ubuntu22.04"), ("GET", "/token"),
                       ("HEAD", "/v2/nvidia/cuda/manifests/12.8.1-cudnn-devel-ubuntu22.04")]
    assert "scope=repository:nvidia/cuda:pull" in FakeRegistry.seen[1][1]


def test_an_unknown_tag_or_unreachable_registry_is_a_source_error(registry):
    with pytest.raises(src.SourceError, match="404"):
        src.registry_digest(f"{registry}/nvidia/cuda:9.9-gone", scheme="http")
    with pytest.raises(src.SourceError):
        src.registry_digest("127.0.0.1:9/nvidia/cuda:x", scheme="http")


def test_refresh_bases_pins_every_dockerfile_base(tmp_path, monkeypatch):
    monkeypatch.setattr(src, "BASES_LOCK", tmp_path / "bases.lock")
    src.refresh_bases(digest_of=lambda ref: DIGEST)
    lines = src.entries(tmp_path / "bases.lock")
    assert {line.split("@")[0] for line in lines} == {
        "nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04", "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04",
        "python:3.12-slim", "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"} | set(src.base_images())
    assert all(line.endswith("@" + DIGEST) for line in lines)
    assert src.pinned_base("python:3.12-slim", tmp_path / "bases.lock") == f"python:3.12-slim@{DIGEST}"
    assert src.pinned_base("debian:12", tmp_path / "bases.lock") is None


def test_flash_attn_wheel_name_and_lock_line(tmp_path, monkeypatch):
    url = src.flash_attn_url()
    assert url.endswith("/v2.8.3/flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl")
    monkeypatch.setattr(src, "FLASH_LOCK", tmp_path / "flash-attn.lock")
    src.refresh_flash_attn(hash_of=lambda u: "cd" * 32)
    (line,) = [ln for ln in (tmp_path / "flash-attn.lock").read_text().splitlines() if not ln.startswith("#")][:1]
    assert line == f"flash-attn @ {url} \\"
    # The Dockerfile's grep accepts exactly this shape for the ABI torch reports.
    step = (REPO / "docker" / "a100.Dockerfile").read_text()
    pattern = re.search(r'grep -q "(\^flash-attn @ [^"]+)"', step).group(1)
    pattern = pattern.replace("${FLASH_ATTN_VERSION}", "2.8.3").replace("${abi}", "TRUE")
    assert re.search(pattern, (tmp_path / "flash-attn.lock").read_text(), flags=re.M)


def test_p40_torch_comes_only_from_an_explicit_pytorch_index():
    project = tomllib.loads((REPO / "docker" / "pins" / "p40-torch" / "pyproject.toml").read_text())
    (index,) = project["tool"]["uv"]["index"]
    assert index["url"] == "https://download.pytorch.org/whl/cu118" and index["explicit"] is True
    assert project["tool"]["uv"]["sources"] == {"torch": {"index": index["name"]}}
    assert project["project"]["dependencies"] == ["torch==2.6.0+cu118"]
    assert "python_version == '3.10'" in project["tool"]["uv"]["environments"][0]


@pytest.mark.parametrize(("name", "entry"), [
    ("p40-torch.lock", r"^[a-z0-9][a-z0-9._-]*==\S+ \\$"),
    ("bases.lock", r"^\S+:\S+@sha256:[0-9a-f]{64}$"),
    ("flash-attn.lock", r"^flash-attn @ https://github\.com/\S+\.whl \\$"),
])
def test_committed_source_locks_are_produced_or_header_only(name, entry):
    text = (REPO / "docker" / name).read_text()
    assert text.startswith("# Generated by `make lock` (scripts/lock_sources.py)")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    heads = [ln for ln in lines if not ln.startswith(" ")]
    if not heads:
        assert "NOT PRODUCED YET" in text  # says so, and the build falls back to version pins, loudly
        return
    assert all(re.match(entry, h) for h in heads), heads
    if name != "bases.lock":
        assert text.count("--hash=sha256:") >= len(heads)


def fake_docker(tmp_path: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$DOCKER_ARGV"\n')
    (bin_dir / "docker").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "DOCKER_ARGV": str(tmp_path / "argv")}


@pytest.mark.parametrize(("args", "base"), [
    (["p40"], f"nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04@{DIGEST}"),
    (["a100"], f"nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04@{DIGEST}"),
    (["a100", "--runpod"], f"runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404@{DIGEST}"),
    (["watchdog"], f"python:3.12-slim@{DIGEST}"),
    (["p40", "--standin"], "nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04"),  # stand-ins exist only by tag
])
def test_build_image_uses_the_pinned_digest(tmp_path, args, base):
    lock = tmp_path / "bases.lock"
    lock.write_text("# header\n" + "".join(f"{ref}@{DIGEST}\n" for ref in src.base_images()))
    env = dict(os.environ, **fake_docker(tmp_path), RLRECIPES_BASES_LOCK=str(lock))
    subprocess.run(["bash", str(REPO / "scripts" / "build-image.sh"), *args], env=env, check=True,
                   capture_output=True)
    argv = (tmp_path / "argv").read_text().splitlines()
    assert f"BASE_IMAGE={base}" in argv


def test_build_image_without_a_pin_builds_from_the_tag(tmp_path):
    env = dict(os.environ, **fake_docker(tmp_path), RLRECIPES_BASES_LOCK=str(tmp_path / "none.lock"))
    subprocess.run(["bash", str(REPO / "scripts" / "build-image.sh"), "p40"], env=env, check=True, capture_output=True)
    assert "BASE_IMAGE=nvidia/cuda:11.8.0-cudnn8-devel-ubuntu22.04" in (tmp_path / "argv").read_text().splitlines()


def test_make_lock_reports_what_it_could_not_refresh(tmp_path, monkeypatch, capsys):
    import lock

    monkeypatch.setattr(src, "refresh_bases", lambda: (_ for _ in ()).throw(src.SourceError("registry unreachable")))
    monkeypatch.setattr(src, "refresh_flash_attn", lambda: REPO / "docker" / "flash-attn.lock")
    monkeypatch.setattr(src, "entries", lambda path: [])
    assert lock.main(["--only", "bases", "--only", "flash-attn"]) == 1
    err = capsys.readouterr().err
    assert "bases: cannot refresh from here: registry unreachable (the committed file is unchanged)" in err
