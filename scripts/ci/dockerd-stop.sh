#!/usr/bin/env bash
# Stop the private Docker daemon started by dockerd-start.sh (by the PID in its pidfile, never by name).
# Usage: dockerd-stop.sh STATE_DIR
set -euo pipefail

state=${1:?usage: dockerd-stop.sh STATE_DIR}
pidfile="$state/dockerd.pid"
[ -f "$pidfile" ] || exit 0
pid=$(cat "$pidfile")
if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 60); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "dockerd $pid did not stop in 30 s; sending SIGKILL" >&2
        kill -9 "$pid"
    fi
fi
rm -f "$pidfile"
