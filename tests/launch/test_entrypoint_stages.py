"""The image entry point takes the dataset from the recipe (never a hard-coded name), gives `eval` the
recipe's own validation file, and hands any other rlrecipes command to the CLI (its table, not a list
kept in the script)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STUB = """#!/usr/bin/env bash
printf '%s\\n' "$*" >> "$CALLS"
exit 0
"""


def stage(tmp_path: Path, *argv: str, recipe: str = "qwen2.5-0.5b-gsm8k-ppo") -> tuple[subprocess.CompletedProcess, list[str]]:
    home = tmp_path / "home"
    if not home.exists():
        shutil.copytree(REPO / "recipes", home / "recipes")
        # a dataset that is not gsm8k: the entry point must take its name and directory from the recipe
        path = home / "recipes" / "qwen2.5-0.5b-gsm8k-ppo.yaml"
        text = path.read_text()
        assert "name: gsm8k" in text
        path.write_text(text.replace("name: gsm8k", "name: mathx"))
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "rlrecipes").write_text(STUB)
        (bin_dir / "rlrecipes").chmod(0o755)
        (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "CALLS": str(tmp_path / "calls"),
           "PYTHONPATH": str(REPO), "RLRECIPES_HOME": str(home), "RECIPE": recipe, "PROFILE": "",
           **{k: str(tmp_path / k.lower()) for k in ("MODELS_DIR", "DATA_DIR", "CKPT_DIR", "LOG_DIR")}}
    env.pop("RUNPOD_POD_ID", None)
    calls = tmp_path / "calls"
    calls.unlink(missing_ok=True)
    proc = subprocess.run(["bash", str(REPO / "scripts" / "entrypoint.sh"), *argv], env=env, capture_output=True,
                          text=True, timeout=120)
    return proc, calls.read_text().splitlines() if calls.exists() else []


def test_data_stage_prepares_the_recipes_dataset(tmp_path):
    proc, calls = stage(tmp_path, "data")
    assert proc.returncode == 0, proc.stderr
    data = [c for c in calls if c.startswith("data ")]
    assert data and data[0].startswith(f"data mathx --out {tmp_path / 'data_dir'}/"), calls


def test_eval_gets_the_recipes_validation_file_and_args_win(tmp_path):
    proc, calls = stage(tmp_path, "eval", "/m/merged", "--limit", "5")
    assert proc.returncode == 0, proc.stderr
    assert calls == [f"eval --fast-data {tmp_path / 'data_dir'}/mathx/test.parquet /m/merged --limit 5"]


def test_other_rlrecipes_commands_pass_through_and_the_rest_runs_as_a_command(tmp_path):
    proc, calls = stage(tmp_path, "plan", "smoke-ppo", "--json")
    assert proc.returncode == 0 and calls == ["plan smoke-ppo --json"], proc.stderr
    proc, calls = stage(tmp_path, "runpod-template")
    assert calls == ["runpod-template"]
    proc, calls = stage(tmp_path, "echo", "hello")
    assert proc.stdout.strip() == "hello" and calls == []
