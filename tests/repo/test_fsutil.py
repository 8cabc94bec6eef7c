"""Atomic writes: the old file survives a failure (ENOSPC, read-only), and new files honour the umask."""

from __future__ import annotations

import os
import stat

import pytest

from rlrecipes.fsutil import atomic_write_text, current_umask
from tests.support.mounts import Mounts, fill


@pytest.fixture
def mounts(tmp_path):
    m = Mounts(tmp_path)
    yield m
    m.cleanup()


@pytest.fixture
def umask():
    def set_(mask: int) -> None:
        os.umask(mask)

    old = os.umask(0o022)
    os.umask(old)
    yield set_
    os.umask(old)


@pytest.mark.parametrize(("mask", "mode", "expected"), [
    (0o022, None, 0o644), (0o002, None, 0o664), (0o077, None, 0o600),
    (0o022, 0o755, 0o755), (0o077, 0o755, 0o700), (0o002, 0o644, 0o644),
])
def test_atomic_writes_honour_the_umask(tmp_path, umask, mask, mode, expected):
    umask(mask)
    assert current_umask() == mask
    target = tmp_path / "f.txt"
    atomic_write_text(target, "x", mode=mode)
    assert stat.S_IMODE(target.stat().st_mode) == expected
    assert target.read_text() == "x"


def test_old_file_survives_enospc(mounts):
    where = mounts("tmpfs", 256 * 1024)
    target = where / "config.yaml"
    target.write_text("old\n")
    fill(where)
    with pytest.raises(OSError) as err:
        atomic_write_text(target, "new\n" * 100_000)
    assert err.value.errno == 28  # ENOSPC
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in where.iterdir()) == ["config.yaml", "filler"]  # no temp file left behind


def test_old_file_survives_a_read_only_filesystem(mounts):
    where = mounts("tmpfs", 256 * 1024)
    target = where / "config.yaml"
    target.write_text("old\n")
    mounts.remount_readonly(where)
    with pytest.raises(OSError):
        atomic_write_text(target, "new\n")
    assert target.read_text() == "old\n"


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two renames"])
def test_atomic_dir_replaces_the_folder_whole_or_not_at_all(tmp_path, monkeypatch, exchange):
    from rlrecipes import fsutil

    if not exchange:  # a kernel or filesystem without RENAME_EXCHANGE
        monkeypatch.setattr(fsutil.ctypes, "CDLL", lambda *a, **k: type("NoRenameat2", (), {})())
    target = tmp_path / "report"
    with fsutil.atomic_dir(target) as work:
        assert work.parent == tmp_path and work.name.startswith(".report.partial-") and not target.exists()
        (work / "a.md").write_text("one")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    assert [p.name for p in target.iterdir()] == ["a.md"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~current_umask()
    with pytest.raises(RuntimeError):
        with fsutil.atomic_dir(target) as work:
            (work / "b.md").write_text("two")
            raise RuntimeError("killed between the files")
    assert [p.name for p in target.iterdir()] == ["a.md"] and (target / "a.md").read_text() == "one"
    with fsutil.atomic_dir(target) as work:
        (work / "b.md").write_text("two")
    assert [p.name for p in target.iterdir()] == ["b.md"]  # the old set is gone, not merged into the new
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]


def test_a_second_writer_into_a_claimed_output_is_refused(tmp_path):
    from rlrecipes.errors import StageFailed
    from rlrecipes.fsutil import claim_output

    out = tmp_path / "reports" / "run"
    with claim_output(out, "report"):
        with pytest.raises(StageFailed, match=r"another report is writing this output \(pid \d+"):
            claim_output(out, "report")
    with claim_output(out, "report"):  # released with its file: the next one claims it
        pass
