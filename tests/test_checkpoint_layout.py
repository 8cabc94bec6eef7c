"""verl's checkpoint layout read from a real directory tree (rlrecipes/verl/checkpoints.py): the tracker as
verl reads it, what a tree costs on disk (checked against `du`), and the zip check with its cache."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from rlrecipes.verl.checkpoints import TRACKER_NAME, Tracker, ZipCache, read_tracker, tracker_note_path, tree_stats
from rlrecipes.watchdog.actions import write_tracker

T = 1_700_000_000  # a whole second, so st_mtime reads back exactly


def _tracker(tmp_path: Path, content: bytes | None) -> None:
    if content is None:
        return
    if content == b"<dir>":
        (tmp_path / TRACKER_NAME).mkdir()
    else:
        (tmp_path / TRACKER_NAME).write_bytes(content)
    os.utime(tmp_path / TRACKER_NAME, (T, T))


@pytest.mark.parametrize(("content", "expected"), [
    (None, Tracker("missing")),
    (b"", Tracker("empty", None, "", T)),
    (b"  \n", Tracker("empty", None, "  \n", T)),
    (b"12\n", Tracker("ok", 12, "12\n", T)),
    (b"0", Tracker("ok", 0, "0", T)),  # verl's int() reads step 0 like any other
    (b"-3", Tracker("unparsable", None, "-3", T)),
    (b"global_step_12", Tracker("unparsable", None, "global_step_12", T)),
    # raw text is kept to 80 characters, for messages
    (b"x" * 100, Tracker("unparsable", None, "x" * 80, T)),
    (b"-" + b"9" * 99, Tracker("unparsable", None, "-" + "9" * 79, T)),
    # not UTF-8 (a torn write, a stray binary file): unparsable, never a crash
    (b"\xff12", Tracker("unparsable", None, "\ufffd12", T)),
    (b"<dir>", Tracker("unparsable", None, "<not a regular file>", T)),
])
def test_read_tracker_in_full(tmp_path, content, expected):
    _tracker(tmp_path, content)
    assert read_tracker(tmp_path) == expected


@pytest.mark.parametrize(("note", "ours"), [
    ("written", True),  # the watchdog's own write, untouched since
    ("garbage", False),  # a note that is not JSON proves nothing
    ("stale", False),  # verl rewrote the tracker after the watchdog
])
def test_tracker_written_by_the_watchdog_is_told_apart(tmp_path, note, ours):
    write_tracker(tmp_path, 5)
    if note == "garbage":
        tracker_note_path(tmp_path).write_text("{not json\n")
    elif note == "stale":
        (tmp_path / TRACKER_NAME).write_text("5")  # the same text rewritten in place, as verl's open("w") does
        os.utime(tmp_path / TRACKER_NAME, (T, T))
    tracker = read_tracker(tmp_path)
    assert (tracker.status, tracker.step, tracker.ours) == ("ok", 5, ours)


def _du_bytes(path: Path) -> int:
    """Allocated bytes as GNU du counts them (st_blocks * 512, symlinks not followed)."""
    return int(subprocess.run(["du", "-s", "-B1", str(path)], capture_output=True, text=True, check=True).stdout.split()[0])


def _tree(tmp_path: Path) -> Path:
    d = tmp_path / "global_step_1"
    (d / "actor").mkdir(parents=True)
    (d / "data.pt").write_bytes(b"d" * 10_000)
    (d / "actor" / "model.pt").write_bytes(b"m" * 50_000)
    (d / "actor" / "link.pt").symlink_to(d / "data.pt")
    os.utime(d / "actor" / "link.pt", (T + 9, T + 9), follow_symlinks=False)  # the newest entry is the link
    os.utime(d / "data.pt", (T + 5, T + 5))
    os.utime(d / "actor" / "model.pt", (T + 7, T + 7))
    os.utime(d / "actor", ns=(T * 10**9 + 1, T * 10**9 + 1))
    os.utime(d, ns=(T * 10**9 + 2, T * 10**9 + 2))
    return d


def test_tree_stats_counts_what_du_counts(tmp_path):
    d = _tree(tmp_path)
    links: list[Path] = []
    stats = tree_stats(d, links, keep_entries=True)
    assert stats.bytes == _du_bytes(d) and stats.bytes >= 60_000
    assert stats.files == 3  # data.pt, model.pt and the link; directories are not files
    assert stats.newest_mtime == T + 9
    assert links == [d / "actor" / "link.pt"]  # recorded, not followed
    assert stats.dir_mtimes == {str(d): T * 10**9 + 2, str(d / "actor"): T * 10**9 + 1}
    assert {k: sorted(v) for k, v in stats.entries.items()} == {
        str(d): ["actor", "data.pt"], str(d / "actor"): ["link.pt", "model.pt"]}
    # Without a list to fill and without keep_entries: the same figures, no listings kept, no crash on the link.
    plain = tree_stats(d)
    assert (plain.bytes, plain.files, plain.newest_mtime, plain.entries) == (stats.bytes, 3, T + 9, {})


def test_tree_stats_of_a_file_and_of_nothing(tmp_path):
    f = tmp_path / "data.pt"
    f.write_bytes(b"x" * 5000)
    os.utime(f, (T, T))
    stats = tree_stats(f)
    assert (stats.bytes, stats.files, stats.newest_mtime) == (_du_bytes(f), 1, T)
    assert stats.bytes >= 5000
    gone = tree_stats(tmp_path / "nothing")
    assert (gone.bytes, gone.files, gone.newest_mtime, gone.dir_mtimes) == (0, 0, 0.0, {})


def test_tree_stats_walks_on_past_an_unreadable_directory(tmp_path, monkeypatch):
    d = _tree(tmp_path)
    (d / "critic").mkdir()
    (d / "critic" / "model.pt").write_bytes(b"c" * 20_000)
    whole = tree_stats(d)
    real_scandir = os.scandir

    def scandir(path):  # what a non-root watchdog meets on a directory it may not read (root reads all)
        if str(path) == str(d / "critic"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    partial = tree_stats(d)
    # everything but critic/'s content: actor/ is still walked whichever order the stack pops in
    assert partial.files == whole.files - 1 == 3
    assert partial.bytes == whole.bytes - (os.lstat(d / "critic" / "model.pt").st_blocks * 512)


def _archive(path: Path, payload: bytes = b"x" * 300) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", payload)


def _whole(zips: ZipCache, path: Path) -> bool:
    return zips.whole(str(path.parent), str(path), os.stat(path))


def test_zip_check_reads_the_end_of_central_directory(tmp_path):
    zips = ZipCache()
    empty = tmp_path / "empty.pt"
    with zipfile.ZipFile(empty, "w"):
        pass
    assert empty.stat().st_size == 22 and _whole(zips, empty)  # an empty archive is the record alone
    short = tmp_path / "short.pt"
    short.write_bytes(b"PK\x05\x06" + b"\0" * 6)  # 10 bytes: shorter than any record
    assert not _whole(zips, short)
    whole, cut = tmp_path / "whole.pt", tmp_path / "cut.pt"
    _archive(whole)
    cut.write_bytes(whole.read_bytes()[:-30])
    assert _whole(zips, whole) and not _whole(zips, cut)
    # A shard that disappears between the listing and the check (verl's retention, a user) is not whole.
    gone = tmp_path / "gone.pt"
    _archive(gone)
    st = os.stat(gone)
    gone.unlink()
    assert not zips.whole(str(tmp_path), str(gone), st)


def test_zip_check_on_a_read_error_says_not_whole(tmp_path, monkeypatch):
    shard = tmp_path / "model.pt"
    _archive(shard)

    def pread(fd, n, offset):  # a failing disk
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "pread", pread)
    assert not _whole(ZipCache(), shard)


def test_zip_cache_reads_a_file_once_until_its_size_or_mtime_changes(tmp_path, monkeypatch):
    shard = tmp_path / "model.pt"
    _archive(shard)
    opened: list[str] = []
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    zips = ZipCache()
    assert _whole(zips, shard) and _whole(zips, shard)  # a settled shard: one read for any number of passes
    assert opened == [str(shard)] and len(zips) == 1
    mtime_ns = shard.stat().st_mtime_ns
    # Cut short but the mtime put back: the size alone tells it changed.
    shard.write_bytes(shard.read_bytes()[:-30])
    os.utime(shard, ns=(mtime_ns, mtime_ns))
    assert not _whole(zips, shard)
    # Whole again at the same size with the tail broken and a new mtime: the mtime alone tells it changed.
    _archive(shard)
    assert _whole(zips, shard)
    data = bytearray(shard.read_bytes())
    data[-22:-18] = b"XXXX"  # no end-of-central-directory record any more, same size
    shard.write_bytes(bytes(data))
    os.utime(shard, ns=(mtime_ns + 10**9, mtime_ns + 10**9))
    assert not _whole(zips, shard)
    assert len(opened) == 4
    zips.forget(str(tmp_path))
    assert len(zips) == 0


@pytest.mark.parametrize(("case", "files", "expected"), [
    ("no actor/ at all", None, (False, "no actor/ directory")),
    ("shards of two world sizes", ["model_world_size_1_rank_0.pt", "model_world_size_2_rank_0.pt",
                                   "model_world_size_2_rank_1.pt", "fsdp_config.json", "huggingface/config.json"],
     (False, "shards of several world sizes [1, 2]")),
    ("no huggingface/config.json", ["model_world_size_1_rank_0.pt", "fsdp_config.json"],
     (False, "no huggingface/config.json")),
    ("mergeable", ["model_world_size_1_rank_0.pt", "fsdp_config.json", "huggingface/config.json"], (True, "")),
])
def test_actor_complete_says_why_a_merge_cannot_read_it(tmp_path, case, files, expected):
    from rlrecipes.verl.checkpoints import actor_complete

    actor = tmp_path / "global_step_3" / "actor"
    for name in files or []:
        (actor / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".pt"):
            _archive(actor / name)
        else:
            (actor / name).write_text("{}")
    assert actor_complete(actor) == expected, case
