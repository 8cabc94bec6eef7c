#!/usr/bin/env bash
# GPU: the seed runs' relay from one sitting to the next. A seed run (benchmarks/gpu/canary_seeds.sh) whose host
# was shut down mid-run goes on at the next sitting from its last whole checkpoint, through the command a user
# runs after a stop (`make reproduce RECIPE=R PROFILE=P SEED=N` again: the train stage resumes), instead of from
# step 0. What travels is the run's checkpoint folder and its log folder (its metrics, console logs, run
# directory and reproduce state), with the sha256 of its assets and the name of its first launch's GPU. The
# assets do not travel (a GRPO-LoRA canary's checkpoint is about 21 MB, its model 13.7 MB more): the next host
# builds them again from the seed, and the run goes on only where they come out byte for byte as the relayed
# run's were.
#
#   relay.sh pack DIR     each seed run under /root/w/seeds that saved a checkpoint and has not ended (no
#                         out/seeds-R-N.tgz, which canary_seeds.sh packs as a run ends, newer than its start),
#                         as DIR/relay-R-N.tgz.K
#                         pieces of at most 15 MiB (what a file brought back may be); a run whose relay is over
#                         RELAY_MAX_MIB (default 30: what one copy onto the next host holds beside the repository) is
#                         left out and named. benchmarks/gpu/job_follow.sh runs it at every follow.
#   relay.sh carry SRC    the pieces SRC holds (a folder brought over with the repository, as a bundle part is) into
#                         /root/relay, where canary_seeds.sh looks (RELAY); one copy per folder, before the bundle's
#                         last part is installed
#   relay.sh unpack DIR   (canary_seeds.sh, before the assets) each relay DIR holds, whole or not at all, into
#                         /root/w/seeds; prints the R:N of each one unpacked
#   relay.sh check N R    (canary_seeds.sh, once seed N's assets were built again) 0 when they are the bytes the
#                         relayed run had; otherwise its checkpoint and logs go to /root/w/seeds/relayed-off/ (kept,
#                         not used) and the run starts from step 0; prints what it did either way
#   relay.sh sums N       the sha256 of seed N's assets under SEEDS_DIR (default /root/w/seeds), as check compares
#                         them (seed_assets in canary_recovery_common.sh keeps them beside each seed's start:
#                         two hosts' builds of a seed compared)
set -uo pipefail
W="${SEEDS_DIR:-/root/w/seeds}"
O="${OUT_DIR:-/root/w/out}"
PIECE=15M

assets_of() {  # $1 seed: the asset files a run of that seed reads, relative to W (the builder's canary-manifest.json
  # records how long the SFT took, so it differs between two builds of the same bytes: not compared)
  (cd "$W" && find "models/seed-$1" "data/seed-$1" -type f ! -name canary-manifest.json ! -name '*.lock' \
    2>/dev/null | sort)
}
sums() { (cd "$W" && assets_of "$1" | xargs -r sha256sum); }  # $1 seed: the sha256 of its assets, as check compares
gpu_name() { nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1; }

ended() {  # $1 recipe, $2 seed: the run packed its results as it ended (out/seeds-R-N.tgz) and was not started
  # again since (canary_seeds.sh touches out/started-R-N as it starts one; the same command again after a failed
  # start, by hand or by the seed runner, goes on in the same folders and is relayed like any other)
  local tgz="$O/seeds-$1-$2.tgz" started="$O/started-$1-$2"
  [ -f "$tgz" ] && { [ ! -f "$started" ] || [ "$tgz" -nt "$started" ]; }
}

pack() {
  local dest="$1" tracker run recipe seed step tmp size built
  mkdir -p "$dest"
  for tracker in "$W"/ckpt/seed-*/*/latest_checkpointed_iteration.txt; do
    [ -f "$tracker" ] || continue
    run=${tracker%/latest_checkpointed_iteration.txt}; recipe=${run##*/}
    seed=${run%/*}; seed=${seed##*/seed-}; step=$(cat "$tracker")
    ended "$recipe" "$seed" && continue  # the run ended on this host: nothing to go on with
    [ -d "$run/global_step_$step" ] || { echo "relay $recipe seed $seed: no global_step_$step folder"; continue; }
    mkdir -p "$W/relay-meta"
    # the assets' sums as this host built them; a run relayed here and not run again keeps those it came with
    built=$(sums "$seed")
    if [ -n "$built" ]; then
      echo "$built" > "$W/relay-meta/$recipe-$seed.sha256"
    elif [ ! -s "$W/relay-meta/$recipe-$seed.sha256" ]; then
      echo "relay $recipe seed $seed: no assets on this host to compare a later build with; left out"; continue
    fi
    # the GPU of the run's first launch (kept as it came for a run relayed here)
    [ -s "$W/relay-meta/$recipe-$seed.gpu" ] || gpu_name > "$W/relay-meta/$recipe-$seed.gpu"
    tmp=$(mktemp -d)
    tar -czf "$tmp/relay.tgz" -C "$W" "ckpt/seed-$seed/$recipe/latest_checkpointed_iteration.txt" \
      "ckpt/seed-$seed/$recipe/global_step_$step" "logs/seed-$seed/$recipe" "relay-meta/$recipe-$seed.sha256" \
      "relay-meta/$recipe-$seed.gpu"
    size=$(( $(stat -c %s "$tmp/relay.tgz") / 1048576 ))
    if [ "$size" -gt "${RELAY_MAX_MIB:-30}" ]; then
      echo "relay $recipe seed $seed: left out, ${size} MiB at step $step (over ${RELAY_MAX_MIB:-30} MiB)"
    else
      rm -f "$dest/relay-$recipe-$seed.tgz".*
      split -b "$PIECE" -d -a 1 "$tmp/relay.tgz" "$dest/relay-$recipe-$seed.tgz."
      local pieces=("$dest/relay-$recipe-$seed.tgz".*)
      echo "relay $recipe seed $seed: checkpoint of step $step, ${size} MiB in ${#pieces[@]} piece(s)"
    fi
    rm -rf "$tmp"
  done
}

unpack() {
  local src="$1" first name tmp
  for first in "$src"/relay-*.tgz.0; do
    [ -f "$first" ] || continue
    name=${first%.tgz.0}; name=${name##*/relay-}
    tmp=$(mktemp -d)
    # the pieces in order; one missing or cut short fails gzip's check, and then nothing of this relay is used
    if cat "${first%.0}".? | tar -xz -C "$tmp" 2>/dev/null && [ -d "$tmp/ckpt" ] && [ -d "$tmp/logs" ]; then
      mkdir -p "$W"
      cp -a "$tmp"/. "$W"/
      echo "${name%-*}:${name##*-}"
    else
      echo "relay $name: incomplete or unreadable, not used" >&2
    fi
    rm -rf "$tmp"
  done
}

check() {
  local seed="$1" recipe="$2" sums="$W/relay-meta/$2-$1.sha256" off
  [ -f "$sums" ] || { echo "relay $recipe seed $seed: none"; return 1; }
  if (cd "$W" && sha256sum --quiet -c "$sums" > /dev/null 2>&1) \
      && [ "$(assets_of "$seed" | wc -l)" = "$(wc -l < "$sums")" ]; then
    local was now
    was=$(cat "$W/relay-meta/$recipe-$seed.gpu" 2>/dev/null); now=$(gpu_name)
    echo "relay $recipe seed $seed: assets rebuilt byte for byte; goes on from step" \
      "$(cat "$W/ckpt/seed-$seed/$recipe/latest_checkpointed_iteration.txt")$([ "$was" = "$now" ] \
        || echo " (its first launch ran on ${was:-an unnamed GPU}, this one on ${now:-an unnamed GPU}:" \
                "its step times are read per launch, not as one run's)")"
    return 0
  fi
  off="$W/relayed-off/seed-$seed"; mkdir -p "$off/ckpt" "$off/logs"
  mv "$W/ckpt/seed-$seed/$recipe" "$off/ckpt/" 2>/dev/null
  mv "$W/logs/seed-$seed/$recipe" "$off/logs/" 2>/dev/null
  echo "relay $recipe seed $seed: the rebuilt assets differ from the relayed run's; set aside, from step 0"
  return 1
}

case "${1:-}" in
  pack) pack "${2:?pack DIR}" ;;
  carry) mkdir -p /root/relay && cp "${2:?carry SRC}"/relay-*.tgz.* /root/relay/ && ls -l /root/relay ;;
  unpack) unpack "${2:?unpack DIR}" ;;
  check) check "${2:?check SEED RECIPE}" "${3:?check SEED RECIPE}" ;;
  sums) sums "${2:?sums SEED}" ;;
  *) echo "usage: relay.sh pack DIR | carry SRC | unpack DIR | check SEED RECIPE | sums SEED" >&2; exit 2 ;;
esac
