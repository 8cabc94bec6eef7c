"""benchmarks/gpu/relay.sh, the seed runs' relay from one GPU sitting to the next, run as canary_seeds.sh and
job_follow.sh run it: a run cut by its host's shutdown is packed (checkpoint, logs, its assets' sha256, its GPU)
in pieces a file brought back may be, unpacked whole or not at all on a fresh host, and kept only where the
assets rebuilt from the seed are the same bytes. A fake `nvidia-smi` names the GPU; everything else is real."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RELAY = REPO / "benchmarks" / "gpu" / "relay.sh"
RUN = "canary-grpo-lora"


def relay(host: Path, *args: str, gpu: str = "NVIDIA H100 80GB HBM3", **env) -> subprocess.CompletedProcess:
    bin_dir = host / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{gpu}'\n")
    smi.chmod(0o755)
    environ = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SEEDS_DIR": str(host / "seeds"),
               "OUT_DIR": str(host / "out"), **env}
    return subprocess.run(["bash", str(RELAY), *args], capture_output=True, text=True, env=environ, timeout=120)


def build_assets(seeds: Path, seed: int, model: bytes) -> None:
    """What `rlrecipes canary-assets --seed N` leaves, in miniature: the model, its data, and the manifest whose
    SFT seconds differ between two builds of the same bytes."""
    models, data = seeds / f"models/seed-{seed}/canary-qwen2", seeds / f"data/seed-{seed}/canary-gsm8k"
    models.mkdir(parents=True, exist_ok=True)
    data.mkdir(parents=True, exist_ok=True)
    (models / "model.safetensors").write_bytes(model)
    (models / "canary-manifest.json").write_text('{"sft": {"seconds": %d}}' % len(os.urandom(3)))
    (data / "train.parquet").write_bytes(b"rows of seed %d" % seed)


def cut_run(seeds: Path, seed: int, step: int, checkpoint_bytes: int = 1024) -> None:
    """A run cut mid-way: verl's tracker naming its last whole checkpoint, that checkpoint, and the run's logs."""
    ckpt = seeds / f"ckpt/seed-{seed}/{RUN}"
    (ckpt / f"global_step_{step}/actor").mkdir(parents=True)
    (ckpt / f"global_step_{step}/actor/model_world_size_1_rank_0.pt").write_bytes(os.urandom(checkpoint_bytes))
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))
    logs = seeds / f"logs/seed-{seed}/{RUN}"
    logs.mkdir(parents=True)
    (logs / "metrics-20261207T052713Z.jsonl").write_text('{"step": 1}\n')
    (logs / "reproduce.json").write_text('{"stages": {"train": {"status": "running"}}}')


@pytest.fixture
def packed(tmp_path):
    """Seed 1 cut after its step-30 checkpoint (20 MiB of it), seed 2 ended on this host: the relay packed."""
    first = tmp_path / "first"
    build_assets(first / "seeds", 1, b"weights of seed 1")
    cut_run(first / "seeds", 1, 30, checkpoint_bytes=20 * 1024 * 1024)
    build_assets(first / "seeds", 2, b"weights of seed 2")
    cut_run(first / "seeds", 2, 30)
    (first / "out").mkdir()
    (first / "out" / f"seeds-{RUN}-2.tgz").write_bytes(b"")  # canary_seeds.sh packs a run as it ends
    result = relay(first, "pack", str(tmp_path / "results"))
    assert result.returncode == 0, result.stderr
    return tmp_path, result.stdout


def test_a_cut_run_is_packed_in_pieces_and_an_ended_one_is_not(packed):
    tmp_path, printed = packed
    pieces = sorted(p.name for p in (tmp_path / "results").iterdir())
    assert pieces == [f"relay-{RUN}-1.tgz.0", f"relay-{RUN}-1.tgz.1"]  # 20 MiB of random bytes: 15 MiB + the rest
    assert all((tmp_path / "results" / p).stat().st_size <= 15 * 1024 * 1024 for p in pieces)
    assert printed == f"relay {RUN} seed 1: checkpoint of step 30, 20 MiB in 2 piece(s)\n"


def test_a_run_started_again_after_it_ended_is_packed(tmp_path):
    """Seed 2's first start failed and packed its results; the same command started it again (canary_seeds.sh
    touches its start marker) and it saved a checkpoint: not ended, so relayed -- as on the H100 host where seed 2's
    second start ran after its first had failed (docs/bench/gpu-canary.md, "Bounds from seeds")."""
    host = tmp_path / "host"
    build_assets(host / "seeds", 2, b"weights of seed 2")
    cut_run(host / "seeds", 2, 30)
    (host / "out").mkdir()
    ended = host / "out" / f"seeds-{RUN}-2.tgz"
    ended.write_bytes(b"")
    os.utime(ended, (1_000_000_000, 1_000_000_000))
    (host / "out" / f"started-{RUN}-2").touch()  # started again since
    result = relay(host, "pack", str(tmp_path / "results"))
    assert result.stdout == f"relay {RUN} seed 2: checkpoint of step 30, 0 MiB in 1 piece(s)\n", result.stderr
    os.utime(ended)  # and ended again, after that start: nothing to relay
    (tmp_path / "results" / f"relay-{RUN}-2.tgz.0").unlink()
    assert relay(host, "pack", str(tmp_path / "results")).stdout == ""


def test_the_next_host_goes_on_from_the_checkpoint_on_the_same_bytes(packed):
    tmp_path, _ = packed
    host = tmp_path / "next"
    unpacked = relay(host, "unpack", str(tmp_path / "results"))
    assert unpacked.stdout == f"{RUN}:1\n" and unpacked.stderr == ""
    seeds = host / "seeds"
    assert (seeds / f"ckpt/seed-1/{RUN}/latest_checkpointed_iteration.txt").read_text() == "30"
    assert (seeds / f"ckpt/seed-1/{RUN}/global_step_30/actor/model_world_size_1_rank_0.pt").stat().st_size == 20 << 20
    assert (seeds / f"logs/seed-1/{RUN}/reproduce.json").is_file()
    build_assets(seeds, 1, b"weights of seed 1")  # the seed's assets built again: the same bytes, other seconds
    checked = relay(host, "check", "1", RUN)
    assert checked.returncode == 0
    assert checked.stdout == f"relay {RUN} seed 1: assets rebuilt byte for byte; goes on from step 30\n"


def test_other_assets_set_the_relayed_run_aside_and_it_starts_from_step_0(packed):
    tmp_path, _ = packed
    host = tmp_path / "next"
    relay(host, "unpack", str(tmp_path / "results"))
    build_assets(host / "seeds", 1, b"weights of seed 1, built on another GPU")
    checked = relay(host, "check", "1", RUN)
    assert checked.returncode == 1
    assert "the rebuilt assets differ from the relayed run's; set aside, from step 0" in checked.stdout
    assert not (host / "seeds" / f"ckpt/seed-1/{RUN}").exists() and not (host / "seeds" / f"logs/seed-1/{RUN}").exists()
    kept = host / "seeds" / "relayed-off" / "seed-1"
    assert (kept / f"ckpt/{RUN}/latest_checkpointed_iteration.txt").read_text() == "30"
    assert (kept / f"logs/{RUN}/reproduce.json").is_file()


def test_a_missing_asset_file_is_not_the_same_assets(packed):
    tmp_path, _ = packed
    host = tmp_path / "next"
    relay(host, "unpack", str(tmp_path / "results"))
    build_assets(host / "seeds", 1, b"weights of seed 1")
    (host / "seeds" / "data/seed-1/canary-gsm8k/train.parquet").unlink()
    assert relay(host, "check", "1", RUN).returncode == 1


def test_another_gpu_model_is_named_and_the_run_still_goes_on(packed):
    tmp_path, _ = packed
    host = tmp_path / "next"
    relay(host, "unpack", str(tmp_path / "results"))
    build_assets(host / "seeds", 1, b"weights of seed 1")
    checked = relay(host, "check", "1", RUN, gpu="NVIDIA H200")
    assert checked.returncode == 0
    assert ("(its first launch ran on NVIDIA H100 80GB HBM3, this one on NVIDIA H200: its step times are read per "
            "launch, not as one run's)") in checked.stdout


@pytest.mark.parametrize("damage", ["last piece missing", "piece cut short"])
def test_an_incomplete_relay_is_not_used_at_all(packed, damage):
    tmp_path, _ = packed
    pieces = tmp_path / "results"
    if damage == "last piece missing":
        (pieces / f"relay-{RUN}-1.tgz.1").unlink()
    else:
        first = pieces / f"relay-{RUN}-1.tgz.0"
        first.write_bytes(first.read_bytes()[: 1 << 20])
    host = tmp_path / "next"
    unpacked = relay(host, "unpack", str(pieces))
    assert unpacked.stdout == ""
    assert unpacked.stderr == f"relay {RUN}-1: incomplete or unreadable, not used\n"
    assert not (host / "seeds" / "ckpt").exists() and not (host / "seeds" / "logs").exists()


def test_a_relay_over_the_limit_is_left_out_and_named(tmp_path):
    host = tmp_path / "first"
    build_assets(host / "seeds", 1, b"weights")
    cut_run(host / "seeds", 1, 50, checkpoint_bytes=3 * 1024 * 1024)
    result = relay(host, "pack", str(tmp_path / "results"), RELAY_MAX_MIB="2")
    assert result.stdout == f"relay {RUN} seed 1: left out, 3 MiB at step 50 (over 2 MiB)\n"
    assert list((tmp_path / "results").iterdir()) == []


def test_a_run_relayed_here_and_not_run_again_keeps_the_sums_and_gpu_it_came_with(packed):
    """A relay unpacked on a host whose job did not run that seed (not among its RUNS) is packed again as it came:
    this host has no assets of that seed to take sums of, and its GPU is not the run's first."""
    tmp_path, _ = packed
    host = tmp_path / "next"
    relay(host, "unpack", str(tmp_path / "results"))
    again = relay(host, "pack", str(tmp_path / "again"), gpu="NVIDIA H200")
    assert again.stdout == f"relay {RUN} seed 1: checkpoint of step 30, 20 MiB in 2 piece(s)\n"
    third = tmp_path / "third"
    relay(third, "unpack", str(tmp_path / "again"))
    build_assets(third / "seeds", 1, b"weights of seed 1")
    checked = relay(third, "check", "1", RUN)  # on the first host's GPU model
    assert checked.returncode == 0 and "first launch ran on" not in checked.stdout
