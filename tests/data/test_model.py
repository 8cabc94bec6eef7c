"""`rlrecipes model`: the real huggingface_hub client against a local fake hub (HF_ENDPOINT) and a local
HF cache (HF_HUB_OFFLINE=1). No network. The CLI runs in a subprocess because huggingface_hub reads
HF_ENDPOINT / HF_HUB_OFFLINE / HF_HOME when it is imported."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECIPE = "qwen2.5-0.5b-gsm8k-ppo"
HUB_ID = "Qwen/Qwen2.5-0.5B-Instruct"
SHA = "a" * 40
FILES = {
    "config.json": b'{"model_type": "qwen2", "hidden_size": 8}',
    "model.safetensors": b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ",
    "pytorch_model.bin": b"the same weights again, which the stage must not download",
    "tokenizer.json": b'{"version": "1.0"}',
}


class FakeHub(BaseHTTPRequestHandler):
    """The four hub endpoints snapshot_download and list_repo_files use, for one repo (HUB_ID @ SHA).

    `behaviour` (class attribute): 'ok', 'gated' (401 GatedRepo), 'missing' (404 RepoNotFound).
    """

    behaviour = "ok"
    requests: list[str] = []
    auth: list[str | None] = []  # the Authorization header of each GET

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _error(self, code: int, error_code: str) -> None:
        self.send_response(code)
        self.send_header("X-Error-Code", error_code)
        self.send_header("X-Error-Message", error_code)
        self.send_header("Content-Type", "application/json")
        body = json.dumps({"error": error_code}).encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj) -> None:
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self):  # noqa: N802
        self._file(head=True)

    def do_GET(self):  # noqa: N802
        FakeHub.requests.append(self.path)
        FakeHub.auth.append(self.headers.get("Authorization"))
        if self.behaviour == "gated":
            return self._error(401, "GatedRepo")
        if self.behaviour == "missing":
            return self._error(404, "RepoNotFound")
        if self.path.startswith(f"/api/models/{HUB_ID}/revision/"):
            return self._json({"id": HUB_ID, "sha": SHA, "siblings": [{"rfilename": f} for f in FILES]})
        if self.path.startswith(f"/api/models/{HUB_ID}/tree/"):
            return self._json([{"type": "file", "path": f, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                               for f, b in FILES.items()])
        return self._file(head=False)

    def _file(self, head: bool):
        if head:
            FakeHub.requests.append("HEAD " + self.path)
        if self.behaviour != "ok":
            return self._error(401 if self.behaviour == "gated" else 404,
                               "GatedRepo" if self.behaviour == "gated" else "RepoNotFound")
        prefix = f"/{HUB_ID}/resolve/"
        if not self.path.startswith(prefix):
            return self._error(404, "EntryNotFound")
        name = self.path[len(prefix):].split("/", 1)[1].split("?")[0]
        if name not in FILES:
            return self._error(404, "EntryNotFound")
        body = FILES[name]
        self.send_response(200)
        self.send_header("X-Repo-Commit", SHA)
        self.send_header("ETag", '"' + hashlib.sha1(body).hexdigest() + '"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)


@pytest.fixture
def fake_hub():
    FakeHub.behaviour = "ok"
    FakeHub.requests = []
    FakeHub.auth = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_model(tmp_path: Path, *args: str, recipe: str = RECIPE, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("HF_", "HUGGINGFACE_", "HUGGING_FACE_")) and k != "TRANSFORMERS_OFFLINE"}
    base.update({"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1",
                 "HF_HUB_DISABLE_XET": "1", "PYTHONPATH": str(REPO)})
    base.update(env)
    return subprocess.run([sys.executable, "-m", "rlrecipes", "model", recipe, "--models-dir",
                           str(tmp_path / "models"), *args],
                          capture_output=True, text=True, env=base, cwd=REPO, timeout=120)


def make_cache(hf_home: Path) -> Path:
    """A real HF cache layout (blobs + snapshot symlinks + refs/main) holding HUB_ID at SHA."""
    repo = hf_home / "hub" / ("models--" + HUB_ID.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(SHA)
    snap = repo / "snapshots" / SHA
    snap.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for name, body in FILES.items():
        blob = repo / "blobs" / hashlib.sha1(body).hexdigest()
        blob.write_bytes(body)
        (snap / name).symlink_to(os.path.relpath(blob, snap))
    return snap


def test_online_download_lands_in_models_dir_named_after_hub_id(tmp_path, fake_hub):
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub)
    assert proc.returncode == 0, proc.stderr
    target = tmp_path / "models" / "Qwen2.5-0.5B-Instruct"
    assert (target / "config.json").read_bytes() == FILES["config.json"]
    assert (target / "model.safetensors").read_bytes() == FILES["model.safetensors"]
    # safetensors present -> the .bin twin is not downloaded
    assert not (target / "pytorch_model.bin").exists()
    marker = json.loads((target / ".rlrecipes-model.json").read_text())
    assert marker["hub_id"] == HUB_ID and marker["source"] == "hub"
    assert "ready at" in proc.stdout


def test_second_run_is_a_no_op_without_network(tmp_path, fake_hub):
    assert run_model(tmp_path, HF_ENDPOINT=fake_hub).returncode == 0
    FakeHub.requests = []
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub)
    assert proc.returncode == 0, proc.stderr
    assert "already at" in proc.stdout
    assert FakeHub.requests == []


def test_interrupted_download_without_marker_is_downloaded_again(tmp_path, fake_hub):
    target = tmp_path / "models" / "Qwen2.5-0.5B-Instruct"
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")  # half a model: no weights, no marker
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub)
    assert proc.returncode == 0, proc.stderr
    assert (target / "model.safetensors").is_file()
    assert (target / ".rlrecipes-model.json").is_file()


@pytest.mark.parametrize(
    ("behaviour", "token", "expected"),
    [
        ("gated", "", "is gated: it needs a token"),
        ("gated", "hf_fake", "HF_TOKEN has no access"),
        ("missing", "", "not found on the hub (or private and no HF_TOKEN is set and `hf auth login` saved none)"),
        ("missing", "hf_fake", "HF_TOKEN cannot see it"),
    ],
)
def test_hub_errors_are_clear_and_exit_2(tmp_path, fake_hub, behaviour, token, expected):
    FakeHub.behaviour = behaviour
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub, **({"HF_TOKEN": token} if token else {}))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expected in proc.stderr
    assert not (tmp_path / "models" / "Qwen2.5-0.5B-Instruct" / ".rlrecipes-model.json").exists()


def test_a_token_saved_by_hf_auth_login_is_used_and_named(tmp_path, fake_hub):
    # `hf auth login` writes HF_HOME/token; huggingface_hub.get_token() finds it without HF_TOKEN
    (tmp_path / "hf-home").mkdir()
    (tmp_path / "hf-home" / "token").write_text("hf_saved_by_login")
    FakeHub.behaviour = "gated"
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the token `hf auth login` saved" in proc.stderr and "has no access" in proc.stderr
    assert "it needs a token" not in proc.stderr
    assert FakeHub.auth and set(FakeHub.auth) == {"Bearer hf_saved_by_login"}


@pytest.mark.parametrize("switch", [{"HF_HUB_OFFLINE": "1"}, {"TRANSFORMERS_OFFLINE": "1"}])
def test_offline_copies_the_cached_snapshot_without_touching_the_hub(tmp_path, fake_hub, switch):
    make_cache(tmp_path / "hf-home")
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub, **switch)
    assert proc.returncode == 0, proc.stderr
    target = tmp_path / "models" / "Qwen2.5-0.5B-Instruct"
    assert not (target / "config.json").is_symlink()  # a standalone copy, not links into the cache
    assert (target / "tokenizer.json").read_bytes() == FILES["tokenizer.json"]
    assert json.loads((target / ".rlrecipes-model.json").read_text())["source"].startswith("cache:")
    assert FakeHub.requests == []


def test_offline_without_cache_names_where_it_looked(tmp_path, fake_hub):
    proc = run_model(tmp_path, HF_HUB_OFFLINE="1", HF_ENDPOINT=fake_hub)
    assert proc.returncode == 2
    assert "offline (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1)" in proc.stderr
    assert str(tmp_path / "hf-home" / "hub") in proc.stderr
    assert FakeHub.requests == []


def test_unreachable_hub_is_a_stage_failure(tmp_path):
    proc = run_model(tmp_path, HF_ENDPOINT="http://127.0.0.1:9", HF_HUB_ETAG_TIMEOUT="2",
                     HF_HUB_DOWNLOAD_TIMEOUT="2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "cannot reach the hub" in proc.stderr


def test_unknown_recipe_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rlrecipes", "model", "no-such-recipe", "--models-dir",
                           str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 2
    assert "no-such-recipe" in proc.stderr


def test_a_recipe_built_offline_is_never_downloaded(tmp_path, fake_hub):
    """canary-grpo-lora's model is built by `rlrecipes canary-assets`: `make model` names that command."""
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub, recipe="canary-grpo-lora")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "rlrecipes/canary-qwen2 is built offline by `rlrecipes canary-assets`, never downloaded" in proc.stderr
    assert f"rlrecipes canary-assets --models-dir {tmp_path / 'models'} --data-dir" in proc.stderr
    assert FakeHub.requests == []
    built = tmp_path / "models" / "canary-qwen2"
    built.mkdir(parents=True)
    (built / "config.json").write_text("{}")
    proc = run_model(tmp_path, HF_ENDPOINT=fake_hub, recipe="canary-grpo-lora")
    assert proc.returncode == 0, proc.stderr
    assert f"already at {built}" in proc.stdout and FakeHub.requests == []
