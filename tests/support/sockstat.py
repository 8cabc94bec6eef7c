"""Reading the sockstat.txt a GPU sitting's seed runner writes (benchmarks/gpu/canary_seeds.sh): after the line
naming the ephemeral range, a sample every 30 s -- the kernel's /proc/net/sockstat TCP line and `tw-ports`, the
distinct local ports its TIME_WAIT sockets held."""

from __future__ import annotations

import re
from pathlib import Path


def samples(sockstat: Path) -> list[tuple[int, int]]:
    """(TIME_WAIT sockets, distinct ports they held), sample by sample; empty for a record from before the
    `tw-ports` column."""
    found = []
    for line in sockstat.read_text().splitlines()[1:]:
        match = re.search(r"\btw (\d+)\b.*\btw-ports (\d+)$", line)
        if match:
            found.append((int(match.group(1)), int(match.group(2))))
    return found


def tw_ports(sockstat: Path) -> list[int]:
    """The distinct local ports the host's TIME_WAIT sockets held, sample by sample."""
    return [ports for _, ports in samples(sockstat)]
