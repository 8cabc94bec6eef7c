#!/usr/bin/env bash
# Hand the running hopper-3b.sh job its second verl launch: the overrides given here, one per argument
# ("skip" skips it), then follow the job like hopper-wait.sh. Usage:
#   bash scripts/gpu/hopper-variant.sh 500 actor_rollout_ref.rollout.agent.num_workers=16
set -uo pipefail
LIMIT="${1:-500}"; shift
if [ "${1:-}" = skip ]; then touch /root/w/variant.skip
else printf '%s\n' "$@" > /root/w/variant.args.tmp && mv /root/w/variant.args.tmp /root/w/variant.args; fi
exec bash "$(dirname "$0")/hopper-wait.sh" "$LIMIT"
