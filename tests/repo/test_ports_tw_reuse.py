"""benchmarks/ports_time_wait.py --steady: connections closed by the client at a steady rate against a listener on a
non-loopback address, in a network namespace of its own per case. With the kernel's default tcp_tw_reuse (2:
loopback only) they fill the whole range and bind() to port 0 finds none; with 1 they take back their own ports and
stay in connect()'s half (the even ports), which leaves bind() the other. The record
(docs/bench/cpu-data/ports-tw-reuse.txt) says the same."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "ports_time_wait.py"
RECORD = REPO / "docs" / "bench" / "cpu-data" / "ports-tw-reuse.txt"
LINE = re.compile(r"tcp_tw_reuse=(?P<reuse>\d) to (?P<to>[\d.]+): (?P<made>\d+) of (?P<total>\d+) connections made .*"
                  r"refused: (?P<refused>.+); TIME_WAIT sockets (?P<tw>\d+) on (?P<ports>\d+) ports \((?P<even>\d+) "
                  r"even, (?P<odd>\d+) odd\); bind\(\('', 0\)\) afterwards: (?P<binds>\d+) listeners of (?P<size>\d+)")


def cases(text: str) -> list[dict]:
    return [{k: (v if k in ("to", "refused") else int(v)) for k, v in m.groupdict().items()}
            for m in map(LINE.search, text.splitlines()) if m]


def judge(found: list[dict]) -> None:
    default, reuse, loopback = found
    assert (default["reuse"], default["to"]) == (2, "192.0.2.2") and default["total"] > default["size"]
    # the default: every port of both halves in TIME_WAIT, later connections refused, no port left for bind()
    assert default["made"] == default["ports"] == default["size"] and default["odd"] == default["size"] // 2
    assert default["refused"].endswith("EADDRNOTAVAIL") and default["binds"] == 0
    # reuse 1, and the default on loopback: every connection made, all in the even half, bind() keeps the odd half
    for case in (reuse, loopback):
        assert case["made"] == case["total"] and case["refused"] == "none" and case["odd"] == 0
        assert case["ports"] <= case["size"] // 2 and case["binds"] == case["size"] - case["ports"]
    assert (reuse["reuse"], reuse["to"], loopback["reuse"], loopback["to"]) == (1, "192.0.2.2", 2, "127.0.0.1")


def test_the_record_shows_connections_taking_back_their_own_ports_only_with_reuse():
    text = RECORD.read_text()
    assert text.startswith("$ python3 benchmarks/ports_time_wait.py --ports 1000 --steady 200 6")
    found = cases(text)
    assert len(found) == 6  # the command run twice
    judge(found[:3])
    judge(found[3:])
    # the figures docs/bench/gpu-canary.md and docs/benchmarks.md quote
    reuse = [c for c in found if c["reuse"] == 1]

    def span(key: str) -> str:
        return f"{min(c[key] for c in reuse)}-{max(c[key] for c in reuse)}"

    canary = " ".join((REPO / "docs" / "bench" / "gpu-canary.md").read_text().split())
    assert (f"all 1,200 made, TIME_WAIT on {span('ports')} ports, all even, and {span('binds')} listeners could "
            "still bind port 0") in canary
    assert f"TIME_WAIT on {span('ports')} even ports, {span('binds')} listeners" in (
        REPO / "docs" / "benchmarks.md").read_text()


def _can_unshare() -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _can_unshare(), reason="needs root and network namespaces (unshare -n)")
def test_the_benchmark_shows_it_on_this_host():
    out = subprocess.run([sys.executable, str(SCRIPT), "--ports", "400", "--steady", "100", "5"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.splitlines()[0] == "ephemeral range in each namespace: 40000-40399"
    judge(cases(out))


@pytest.mark.parametrize("bad", [["nan", "6"], ["200", "0"], ["-1", "6"], ["inf", "6"], ["x", "6"]])
def test_a_rate_or_duration_that_is_not_a_positive_number_is_refused(bad):
    done = subprocess.run([sys.executable, str(SCRIPT), "--steady", *bad], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--steady" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_the_single_runs_record_shows_bind_failing_once_time_wait_covers_the_range():
    """docs/bench/cpu-data/ports-time-wait.txt: --ports 200 connections closed by the client leave every port of the
    range in TIME_WAIT, and bind(("", 0)) then fails with EADDRINUSE."""
    lines = (REPO / "docs" / "bench" / "cpu-data" / "ports-time-wait.txt").read_text().splitlines()
    assert lines[0].startswith("$ python3 benchmarks/ports_time_wait.py --ports 200")
    assert lines[1:] == ["ephemeral range in this namespace: ['40000', '40199']", lines[2],
                         "connections made and closed by the client: 200; TIME_WAIT sockets: 200",
                         "bind(('', 0)) after: OSError [Errno 98] Address already in use (EADDRINUSE)"]
    assert re.fullmatch(r"bind\(\('', 0\)\) before: port 40\d\d\d", lines[2])


@pytest.mark.skipif(not _can_unshare(), reason="needs root and network namespaces (unshare -n)")
def test_the_single_run_shows_it_on_this_host():
    """The same command as the record, run again here: its own namespace, the same outcome."""
    out = subprocess.run([sys.executable, str(SCRIPT), "--ports", "200"], capture_output=True, text=True, check=True,
                         timeout=120).stdout.splitlines()
    assert out[0] == "ephemeral range in this namespace: ['40000', '40199']"
    assert out[2:] == ["connections made and closed by the client: 200; TIME_WAIT sockets: 200",
                       "bind(('', 0)) after: OSError [Errno 98] Address already in use (EADDRINUSE)"]
