#!/usr/bin/env bash
# Start a private Docker daemon (its own data root, exec root, socket and pidfile) so tests never touch
# a system daemon. Prints the DOCKER_HOST to use. Usage: dockerd-start.sh STATE_DIR
# The data root holds the stand-in base images and the build cache; keep STATE_DIR between runs to reuse them.
set -euo pipefail

state=${1:?usage: dockerd-start.sh STATE_DIR}
mkdir -p "$state"
state=$(cd "$state" && pwd)
# The exec root holds containerd shims' sockets: unix socket paths must stay under 108 bytes, so keep it short.
exec_root=${RLRECIPES_DOCKER_EXEC_ROOT:-/run/rlrecipes-docker-$(echo "$state" | md5sum | cut -c1-8)}
sock="$state/docker.sock"
pidfile="$state/dockerd.pid"

if [ -S "$sock" ] && [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "unix://$sock"
    exit 0
fi

command -v dockerd >/dev/null || { echo "dockerd not found: run scripts/ci/install-system-deps.sh" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "dockerd needs root" >&2; exit 1; }

rm -f "$sock" "$pidfile"
# --bridge/--iptables stay on: compose networks need them. The daemon logs beside its state for post-mortems.
nohup dockerd \
    --data-root "$state/data" \
    --exec-root "$exec_root" \
    --pidfile "$pidfile" \
    -H "unix://$sock" \
    >"$state/dockerd.log" 2>&1 &

for _ in $(seq 1 120); do
    if [ -S "$sock" ] && DOCKER_HOST="unix://$sock" docker version >/dev/null 2>&1; then
        echo "unix://$sock"
        exit 0
    fi
    sleep 0.5
done
echo "dockerd did not come up within 60 s; its log:" >&2
tail -n 40 "$state/dockerd.log" >&2
exit 1
