#!/usr/bin/env bash
# Hand the running flagship_3b_hopper.sh job its second verl launch: the overrides given here, one per argument
# ("skip" skips it; ENV:KEY=VALUE sets an environment variable of the launch), then follow the job like
# job_follow.sh. Usage:
#   bash benchmarks/gpu/flagship_3b_variant.sh 500 actor_rollout_ref.model.use_fused_kernels=true \
#       actor_rollout_ref.model.fused_kernel_options.impl_backend=torch 'ENV:RLRECIPES_VLLM_SAMPLING={"detokenize":false}'
set -uo pipefail
LIMIT="${1:-500}"; shift
if [ "${1:-}" = skip ]; then touch /root/w/variant.skip
else printf '%s\n' "$@" > /root/w/variant.args.tmp && mv /root/w/variant.args.tmp /root/w/variant.args; fi
exec bash "$(dirname "$0")/job_follow.sh" "$LIMIT"
