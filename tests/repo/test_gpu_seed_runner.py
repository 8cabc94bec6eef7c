"""benchmarks/gpu/canary_seeds.sh rehearsed on a CPU host, in a folder of its own (HOST_ROOT), before a GPU sitting
spends its minutes on it: the script itself and what it sources are real; `make`, `rlrecipes`, `nvidia-smi` and
`python3` are stand-ins on its PATH that record how they were called. A seed run and its control share the GPU
(the control starting once the run's rollout engine is up, each vLLM engine with a fixed KV-cache share), a seed
whose assets are refused is skipped, a control whose start fails for a reason another run caused ([Errno 98], or
vLLM's memory profiling upset, as on the PPO sittings' hosts) runs again with the same command once the runs beside
it have ended, and each run's results are packed from its own folders."""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# `rlrecipes canary-assets --models-dir M --data-dir D --seed N`: a model and data in miniature; seed 9 refused
RLRECIPES = r"""#!/bin/bash
[ "$1" = canary-assets ] || { echo "unexpected: rlrecipes $*" >&2; exit 9; }
shift
while [ $# -gt 0 ]; do case $1 in --models-dir) m=$2; shift 2;; --data-dir) d=$2; shift 2;; --seed) s=$2; shift 2;;
  *) shift;; esac; done
[ "$s" = 9 ] && { echo "refused: held-out start 0.45 outside the start band 0.10-0.40"; exit 3; }
mkdir -p "$m/canary-qwen2" "$d/canary-gsm8k"
echo "weights $s" > "$m/canary-qwen2/model.safetensors"
echo '{"sft": {"seconds": 1.0}, "settings": {"seed": '"$s"'}}' > "$m/canary-qwen2/canary-manifest.json"
echo "rows $s" > "$d/canary-gsm8k/train.parquet"
echo "model  $m/canary-qwen2  (SFT 1 steps in 0.1 s; held-out greedy accuracy 0.180 on 512 problems)"
"""

# `make reproduce RECIPE=R PROFILE=P SEED=N ARGS=...`: records the call, writes a console log where the run would;
# a control's first start fails as a PPO run's did beside another (FAIL_WITH: what its console log said)
MAKE = r"""#!/bin/bash
for a in "$@"; do case $a in RECIPE=*) r=${a#RECIPE=};; SEED=*) s=${a#SEED=};; ARGS=*) args=${a#ARGS=};; esac; done
logs="$LOG_DIR/seed-$s/$r"; mkdir -p "$logs"
echo "$* | MODELS_DIR=$MODELS_DIR REWARD_FN=${REWARD_FN:-}" >> "$logs/calls.txt"
sleep 0.2
console="$logs/console-$(date +%s%N).log"
if [[ $args == *optim.lr=0* ]] && [ ! -f "$logs/failed-once" ]; then
  touch "$logs/failed-once"
  printf '%s\n' "$FAIL_WITH" > "$console"
  echo "[reproduce] train failed (exit 1)"; exit 2
fi
echo "(TaskRunnerV1 pid=1) checkpoint engine manager initialized" > "$console"
# a seed run steps on for a while after its engine is up (the runner looks every 5 s), a control briefly
if [ -n "$args" ]; then sleep 1; else sleep 7; fi
mkdir -p "$REPORTS_DIR/seed-$s/$r" "$MODELS_DIR/seed-$s/$r-merged/eval"
echo '{"accuracy": 0.4}' > "$MODELS_DIR/seed-$s/$r-merged/eval/eval-summary.json"
echo "# report" > "$REPORTS_DIR/seed-$s/$r/report.md"
echo '{"status": "met"}' > "$logs/expect.json"
echo "[reproduce] $r on $PROFILE (seed $s): expected result MET ($logs/expect.json)"
"""


def stub(bin_dir: Path, name: str, text: str) -> None:
    path = bin_dir / name
    path.write_text(text)
    path.chmod(0o755)


def rehearse(tmp_path: Path, runs: str, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    host = tmp_path / "host"
    (host / "bin").mkdir(parents=True)
    (host / "repo").symlink_to(REPO)  # the scripts read the repository; they write under host/w only
    stub(host / "bin", "rlrecipes", RLRECIPES)
    stub(host / "bin", "make", MAKE)
    stub(host / "bin", "nvidia-smi", "#!/bin/sh\ncase \"$*\" in *memory.used*) echo '5120, 81559';;\n"
                                      "*) echo 'NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04, 9.0';; esac\n")
    stub(host / "bin", "python3", "#!/bin/sh\necho 'python3 stand-in'\n")  # record_env's versions and verl edits
    environ = {**os.environ, "HOST_ROOT": str(host), "RUNS": runs, "PATH": f"{host / 'bin'}:{os.environ['PATH']}",
               **env}
    done = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu" / "canary_seeds.sh")], capture_output=True,
                          text=True, env=environ, timeout=300)
    return done, host / "w"


def calls(folder: Path) -> list[str]:
    return (folder / "calls.txt").read_text().splitlines()


# the failures a run beside it caused, as the recorded console logs say them, and how the runner names them
NO_PORT = ("sock.bind((bind_host, 0))\nOSError: [Errno 98] Address already in use",  # the PPO control beside seed 1
           "the kernel had no free port to give (a bind to port 0 refused: [Errno 98] Address already in use)")
PROFILING = ("AssertionError: Error in memory profiling. Initial free memory 43.88 GiB, current free memory 73.93 "
             "GiB.",  # PPO seed 0 beside seed 2
             "vLLM's memory profiling saw another run free GPU memory (its engine going to sleep)")
SHARE = "+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes=1073741824"


@pytest.mark.parametrize("failure, named", [NO_PORT, PROFILING])
def test_a_seed_run_and_its_control_share_the_host_and_a_failed_start_runs_again(tmp_path, failure, named):
    done, w = rehearse(tmp_path, "canary-ppo:1 canary-ppo:1:frozen-actor canary-ppo:9", PARALLEL="2",
                       CONTROL_STEPS="30", UP_WAIT_S="60", FAIL_WITH=failure)
    assert done.returncode == 0, done.stderr
    out, seeds = w / "out", w / "seeds"
    assert (out / "DONE").is_file()
    timeline = (out / "timeline.txt").read_text()
    assert "canary-ppo seed 9: skipped (its assets were refused)" in timeline
    # the control started once the seed run's engine was up
    assert timeline.index("canary-ppo seed 1: rollout engine up") < timeline.index(
        "canary-ppo seed 1 (control: frozen-actor): make reproduce")
    retry = f"canary-ppo seed 1 (control: frozen-actor): {named}; the runs beside it ended "
    assert retry in timeline
    assert "s later: the same command again" in timeline[timeline.index(retry):].splitlines()[0]
    # ... and only once the seed run had ended: its ports' TIME_WAIT no longer held, its engine no longer waking
    assert timeline.index("canary-ppo seed 1: exit 0") < timeline.index(retry)
    assert "canary-ppo seed 1 (control: frozen-actor): exit 0; [reproduce] canary-ppo" in timeline
    assert "canary-ppo seed 1: exit 0; [reproduce] canary-ppo" in timeline
    # the seed run: once, as shipped but for vLLM's fixed KV-cache share (two runs share the GPU), on the seed's assets
    (seed_call,) = calls(seeds / "logs/seed-1/canary-ppo")
    assert seed_call == (f"reproduce RECIPE=canary-ppo PROFILE=any-1gpu-hopper SEED=1 ARGS={SHARE} | "
                         f"MODELS_DIR={seeds / 'models'} REWARD_FN=")
    # the control: twice (the same command again), with its breakage, on a copy of the seed's assets
    control = seeds / "control-frozen-actor"
    assert calls(control / "logs/seed-1/canary-ppo") == [
        f"reproduce RECIPE=canary-ppo PROFILE=any-1gpu-hopper SEED=1 ARGS={SHARE} actor_rollout_ref.actor.optim.lr=0 "
        f"trainer.total_training_steps=30 | MODELS_DIR={control / 'models'} REWARD_FN="] * 2
    assert (control / "models/seed-1/canary-qwen2/model.safetensors").read_text() == "weights 1\n"
    # each run packed from its own folders, without weights
    for name, folder in (("seeds-canary-ppo-1", seeds), ("seeds-canary-ppo-1-frozen-actor", control)):
        with tarfile.open(out / f"{name}.tgz") as tar:
            members = tar.getnames()
        assert "logs/seed-1/canary-ppo/expect.json" in members
        assert "models/seed-1/canary-ppo-merged/eval/eval-summary.json" in members
        assert "models/seed-1/canary-qwen2/canary-manifest.json" in members
        assert not any(m.endswith(".safetensors") for m in members)
        assert (folder / "models/seed-1/canary-ppo-merged/eval/eval-summary.json").is_file()
    assert not (out / "seeds-canary-ppo-9.tgz").exists()
    assert (out / "sockstat.txt").read_text().startswith("ephemeral ports: ")
    reuse = Path("/proc/sys/net/ipv4/tcp_tw_reuse").read_text().strip()
    assert (out / "sockstat.txt").read_text().splitlines()[1] == f"tcp_tw_reuse: {reuse}"
    # the GPU's memory in use beside it, sampled from the start (what bounds how many engines can start beside)
    memory = (out / "gpu-memory.txt").read_text().splitlines()
    assert memory[0] == "memory.used, memory.total [MiB]"
    assert memory[1:] and all(re.fullmatch(r"\[\d+s\] 5120, 81559", line) for line in memory[1:])


@pytest.mark.parametrize("env", [{"PARALLEL": "1"}, {"PARALLEL": "2", "KV_CACHE_BYTES": "0"}])
def test_a_run_alone_on_the_gpu_or_told_so_keeps_the_shipped_kv_cache(tmp_path, env):
    """vLLM sizes its KV cache by profiling, as shipped, when no run shares the GPU (or KV_CACHE_BYTES=0)."""
    done, w = rehearse(tmp_path, "canary-ppo:1", **env)
    assert done.returncode == 0, done.stderr
    (seed_call,) = calls(w / "seeds" / "logs/seed-1/canary-ppo")
    assert seed_call.startswith("reproduce RECIPE=canary-ppo PROFILE=any-1gpu-hopper SEED=1 ARGS= | ")


@pytest.mark.parametrize("runs, env, said", [
    ("canary-ppo:1 canary-ppo:one", {}, "RUNS: 'canary-ppo:one' is not RECIPE:SEED or RECIPE:SEED:CONTROL"),
    ("canary-ppo:1:frozen-critic", {}, "RUNS: 'canary-ppo:1:frozen-critic' names no known control"),
    ("canary-ppo:1", {"KV_CACHE_BYTES": "1G"}, "KV_CACHE_BYTES: '1G' is not a number of bytes"),
    ("canary-ppo:1", {"KV_CACHE_BYTES": "-1"}, "KV_CACHE_BYTES: '-1' is not a number of bytes"),
])
def test_a_bad_runs_entry_starts_nothing(tmp_path, runs, env, said):
    done, w = rehearse(tmp_path, runs, **env)
    assert done.returncode == 2
    assert said in (w / "out" / "timeline.txt").read_text()
    assert (w / "out" / "DONE").is_file()  # the follow call does not wait out its limit
    assert not (w / "seeds" / "logs").exists() and not (w / "seeds" / "models").exists()
