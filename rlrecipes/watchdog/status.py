"""The watchdog's outputs: a JSON status file, Prometheus text metrics on loopback, a health verdict."""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from rlrecipes.fsutil import atomic_write_text

STATUS_VERSION = 1
PREFIX = "rlrecipes_watchdog"


def write_status(path: Path, status: dict) -> None:
    atomic_write_text(path, json.dumps(status, indent=2, sort_keys=True) + "\n")


def read_status(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


# A status stamped further in the future than this is not trusted (a clock jump or a forged file).
FUTURE_TOLERANCE_S = 60.0


def _finite(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def health(status: dict, now: float | None = None, max_age_s: float | None = None,
           ignore: frozenset[str] = frozenset()) -> tuple[bool, str]:
    """(healthy, reason). Healthy: the last pass is fresh and raised no error finding.

    A malformed status (not an object, a time that is not a finite number, findings that are not a
    list) is unhealthy, never an exception; so is one dated in the future. A status written by a
    one-shot pass (`--once`: no interval) is unhealthy unless `max_age_s` says how old it may be:
    nothing keeps it fresh, so "healthy" would otherwise hold forever. Error findings whose code is in
    `ignore` do not count (compose.yaml's gate ignores `run-stalled`: the trainer's stop guard acts on it).
    """
    now = time.time() if now is None else now
    if not isinstance(status, dict):
        return False, f"malformed status: a JSON {type(status).__name__}, not an object"
    if status.get("version") != STATUS_VERSION:
        return False, f"unknown status version {status.get('version')!r}"
    stamp = _finite(status.get("time"))
    if stamp is None:
        return False, f"malformed status: time {status.get('time')!r} is not a number"
    interval = _finite(status.get("interval_s"))
    if max_age_s is None:
        if interval is None or interval <= 0:
            return False, ("status was written by a one-shot pass (--once): no watchdog keeps it fresh "
                           "(pass --max-age to accept it)")
        # A pass may be slow on a big root; allow three missed intervals before calling it stuck.
        max_age_s = 3 * interval + 30 + (_finite(status.get("scan_seconds")) or 0.0)
    age = now - stamp
    if age < -FUTURE_TOLERANCE_S:
        return False, f"status is dated {-age:.0f}s in the future: clock skew or not written by the watchdog"
    if age > max_age_s:
        return False, f"status is {age:.0f}s old (limit {max_age_s:.0f}s): the watchdog is not running"
    findings = status.get("findings", [])
    if not isinstance(findings, list) or not all(isinstance(f, dict) for f in findings):
        return False, "malformed status: findings is not a list of objects"
    errors = [f for f in findings if f.get("severity") == "error"]
    ignored = [f for f in errors if f.get("code") in ignore]
    errors = [f for f in errors if f not in ignored]
    if errors or (status.get("healthy") is not True and not ignored):
        text = "; ".join(f"{f.get('experiment') or 'root'}: {f.get('message')}" for f in errors)
        return False, text or "status says unhealthy"
    return True, f"healthy ({max(age, 0):.0f}s ago)"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    """A sample value, exactly: Prometheus parses it as a float64 (Go's ParseFloat).

    `{:g}` kept 6 significant digits (a timestamp of 1764547200.5 became 1.76455e+09, 47 minutes off);
    `repr` is the shortest text that reads back as the same float. The image is stdlib-only and installs
    no lock, so this replaces prometheus_client's `floatToGoString` rather than adding the package.
    """
    if isinstance(value, int):  # bool included; exact at any size
        return str(int(value))
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def render_metrics(status: dict) -> str:
    """Prometheus text exposition format (version 0.0.4) of a status dict."""
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict, float]]) -> None:
        lines.append(f"# HELP {PREFIX}_{name} {help_text}")
        lines.append(f"# TYPE {PREFIX}_{name} {kind}")
        for labels, value in samples:
            label_text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{PREFIX}_{name}{{{label_text}}} {_number(value)}" if label_text
                         else f"{PREFIX}_{name} {_number(value)}")

    budget = status.get("budget", {})
    metric("healthy", "gauge", "1 when the last pass raised no error finding.",
           [({}, 1.0 if status.get("healthy") else 0.0)])
    metric("last_scan_timestamp_seconds", "gauge", "Unix time of the last pass.", [({}, status.get("time", 0))])
    metric("scan_duration_seconds", "gauge", "Duration of the last pass.", [({}, status.get("scan_seconds", 0))])
    metric("scans_total", "counter", "Passes since start.", [({}, status.get("counters", {}).get("scans", 0))])
    metric("root_bytes", "gauge", "Bytes allocated under the checkpoint root.", [({}, status.get("root_bytes", 0))])
    metric("fs_free_bytes", "gauge", "Free bytes on the root's filesystem.", [({}, budget.get("fs_free_bytes", 0))])
    metric("next_checkpoint_bytes", "gauge", "Estimated bytes the next save still has to write.",
           [({}, budget.get("need_bytes", 0))])
    if budget.get("room_after_bytes") is not None:
        metric("budget_room_bytes", "gauge", "Bytes the budget allows after this pass's deletions.",
               [({}, budget["room_after_bytes"])])
    counters = status.get("counters", {})
    metric("deleted_total", "counter", "Checkpoint directories deleted since start.",
           [({}, counters.get("deleted", 0))])
    metric("deleted_bytes_total", "counter", "Bytes deleted since start.", [({}, counters.get("deleted_bytes", 0))])
    metric("tracker_repairs_total", "counter", "Tracker files rewritten since start.",
           [({}, counters.get("tracker_repairs", 0))])
    samples: list[tuple[dict, float]] = []
    bytes_samples: list[tuple[dict, float]] = []
    newest: list[tuple[dict, float]] = []
    for exp in status.get("experiments", []):
        counts: dict[str, int] = {}
        for step in exp.get("steps", []):
            counts[step["state"]] = counts.get(step["state"], 0) + 1
        for state in ("complete", "writing", "interrupted", "incomplete", "damaged"):
            samples.append(({"experiment": exp["name"], "state": state}, counts.get(state, 0)))
        bytes_samples.append(({"experiment": exp["name"]}, sum(s["bytes"] for s in exp.get("steps", []))))
        if exp.get("newest_complete") is not None:
            newest.append(({"experiment": exp["name"]}, exp["newest_complete"]))
    metric("checkpoints", "gauge", "Step directories by state.", samples)
    metric("checkpoint_bytes", "gauge", "Bytes in step directories.", bytes_samples)
    metric("newest_complete_step", "gauge", "Step that auto-resume will load.", newest)
    metric("hog_bytes", "gauge", "Size of other known disk hogs.",
           [({"name": h["name"], "path": h["path"]}, h["bytes"]) for h in status.get("hogs", [])
            if h.get("bytes") is not None])
    metric("findings", "gauge", "Findings of the last pass by severity.",
           [({"severity": sev}, sum(1 for f in status.get("findings", []) if f.get("severity") == sev))
            for sev in ("info", "warn", "error")])
    return "\n".join(lines) + "\n"


class MetricsServer:
    """Serves /metrics (Prometheus text), /status (JSON) and /healthz on a loopback port, in a thread."""

    def __init__(self, host: str, port: int):
        self._lock = threading.Lock()
        self._status: dict = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                snapshot = server.snapshot()
                if self.path.split("?")[0] in ("/metrics", "/"):
                    body, ctype, code = render_metrics(snapshot).encode(), "text/plain; version=0.0.4", 200
                elif self.path == "/status":
                    body, ctype, code = json.dumps(snapshot).encode(), "application/json", 200
                elif self.path == "/healthz":
                    ok, reason = health(snapshot) if snapshot else (False, "no pass yet")
                    body, ctype, code = (reason + "\n").encode(), "text/plain", 200 if ok else 503
                else:
                    body, ctype, code = b"not found\n", "text/plain", 404
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # scrapes every few seconds would flood the log
                pass

        self.httpd = HTTPServer((host, port), Handler)
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="watchdog-metrics", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def update(self, status: dict) -> None:
        with self._lock:
            self._status = status

    def snapshot(self) -> dict:
        with self._lock:
            return self._status

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
