"""The image entry point's `run` stage asks `rlrecipes model` (idempotent, with its completion marker)
whether the base model is there, instead of trusting config.json: an interrupted download has one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECIPE = "qwen2.5-0.5b-gsm8k-ppo"

# Records each rlrecipes call; preflight fails so that the stage stops before the launcher.
STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$CALLS"
case "$1" in preflight) exit 1 ;; esac
exit 0
"""


def run_stage(tmp_path: Path) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rlrecipes").write_text(STUB)
    (bin_dir / "rlrecipes").chmod(0o755)
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # keeps its venv
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls"),
           "PYTHONPATH": str(REPO), "RECIPE": RECIPE, "PROFILE": "",
           **{k: str(tmp_path / k.lower()) for k in ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR")}}
    env.pop("RUNPOD_POD_ID", None)
    proc = subprocess.run(["bash", str(REPO / "scripts" / "entrypoint.sh"), "run"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # stopped by the failing preflight
    return (tmp_path / "calls").read_text().splitlines()


def test_run_asks_rlrecipes_model_even_when_config_json_is_there(tmp_path):
    # an interrupted download: config.json and a partial shard, no completion marker
    model = tmp_path / "models_dir" / "Qwen2.5-0.5B-Instruct"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors.incomplete").write_bytes(b"\0")
    calls = run_stage(tmp_path)
    assert f"model {RECIPE} --models-dir {tmp_path / 'models_dir'}" in calls
    assert [c.split()[0] for c in calls] == ["env", "data", "model", "preflight"]
