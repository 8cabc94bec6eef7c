#!/usr/bin/env bash
# GPU: where the canary starts on each seed -- `rlrecipes canary-assets --seed N` (the assets stage of
# `make reproduce ... SEED=N`) for every seed in SEEDS, PARALLEL at a time on the one GPU (each a 3.9M-parameter
# SFT and greedy checks: a few hundred MiB). Each seed's output and canary-manifest.json (SFT steps, the dev
# history, the held-out start) and the sha256 of its asset files land in /root/w/out/starts/; a seed whose
# held-out start falls outside the start band is refused by the builder, and its log says so. Tells the seed
# study (benchmarks/gpu/canary_seeds.sh, docs/bench/gpu-canary.md) which seeds a user's `make reproduce SEED=N`
# can run, before a canary run is spent on one. SEEDS default "0 1 2 3 4 5 6 7"; seed 0 is the shipped assets (its
# record: held-out 0.223 at SFT step 500).
# Run detached after the bundle is installed (benchmarks/gpu/bundle_install_and_start.sh with
# JOB=benchmarks/gpu/canary_starts.sh); follow with benchmarks/gpu/job_follow.sh.
set -uo pipefail
W=/root/w/starts
# shellcheck source=benchmarks/gpu/canary_recovery_common.sh
. /root/repo/benchmarks/gpu/canary_recovery_common.sh
S="$O/starts"; mkdir -p "$S"
record_env > "$O/env.txt" 2>&1
read -ra seeds <<< "${SEEDS:-0 1 2 3 4 5 6 7}"
PARALLEL="${PARALLEL:-4}"
for seed in "${seeds[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do sleep 2; done
  stamp "seed $seed: rlrecipes canary-assets --seed $seed"
  seed_assets "$seed" "$S" &
done
wait
stamp "all done: seeds ${seeds[*]}"
touch "$O/DONE"
