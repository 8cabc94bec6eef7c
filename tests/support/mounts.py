"""Size-capped and read-only filesystems for fault tests (root only: skip otherwise, fail under RLRECIPES_REQUIRE_FS=1)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support.require import skip_or_fail


class Mounts:
    """mount("tmpfs", size) -> a fresh size-capped tmpfs; mount("tmpfs", size, readonly=True) -> read-only."""

    def __init__(self, base: Path):
        self.base = base
        self.mounted: list[Path] = []

    def __call__(self, kind: str = "tmpfs", size: int = 1 << 20, readonly: bool = False) -> Path:
        if os.geteuid() != 0:
            skip_or_fail("fs", "mounting a size-limited filesystem needs root")
        where = self.base / f"{kind}{len(self.mounted)}"
        where.mkdir()
        opts = f"size={size}" + (",ro" if readonly else "")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], capture_output=True,
                              text=True)
        if done.returncode:
            skip_or_fail("fs", f"cannot mount {kind}: {done.stderr.strip()}")
        self.mounted.append(where)
        return where

    def remount_readonly(self, where: Path) -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)

    def cleanup(self) -> None:
        for where in reversed(self.mounted):
            if subprocess.run(["umount", str(where)], capture_output=True).returncode:
                subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(where: Path) -> None:
    """Write until the filesystem is full (ENOSPC)."""
    fd = os.open(where / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)
