"""verl's checkpoint layout read from a real directory tree (rlrecipes/verl/checkpoints.py): the tracker as
verl reads it, what a tree costs on disk (checked against `du`), and the zip check with its cache."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from rlrecipes.verl.checkpoints import TRACKER_NAME, Tracker, ZipCache, read_tracker, tracker_note_path, tree_stats
from rlrecipes.verl.resume import write_tracker

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
    from rlrecipes.verl.checkpoint_ref import actor_complete

    actor = tmp_path / "global_step_3" / "actor"
    for name in files or []:
        (actor / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".pt"):
            _archive(actor / name)
        else:
            (actor / name).write_text("{}")
    assert actor_complete(actor) == expected, case


# -- locate_checkpoint: which actor a merge reads, and every refusal as the user sees it -------------------

def _actor(actor: Path, world: int = 1) -> Path:
    from rlrecipes.watchdog.simulate import write_pt

    (actor / "huggingface").mkdir(parents=True)
    (actor / "huggingface" / "config.json").write_text("{}")
    for rank in range(world):
        write_pt(actor / f"model_world_size_{world}_rank_{rank}.pt", 64)
    (actor / "fsdp_config.json").write_text("{}")
    return actor


def _run_dir(tmp_path: Path, tracker: str | None) -> Path:
    """A run dir (trainer.default_local_dir) with whole steps 2, 3 and 10, a file named like a step, a
    step dir without an actor (step 11) and other clutter."""
    run = tmp_path / "run"
    for n in (2, 3, 10):
        _actor(run / f"global_step_{n}" / "actor")
    (run / "global_step_11").mkdir()  # a save that died before its actor
    (run / "global_step_4").write_text("not a directory")
    (run / "notes").mkdir()
    if tracker is not None:
        (run / TRACKER_NAME).write_text(tracker)
    return run


RUN_HINT = "steps on disk: 2, 3, 10, 11"
NO_TRACKER = ("{run}/latest_checkpointed_iteration.txt: no usable latest_checkpointed_iteration.txt (verl writes it "
              "last; missing or empty means the run never finished a save) (hint: pass --step N; " + RUN_HINT
              + " (or repair: rlrecipes resume-check))")


@pytest.mark.parametrize(("tracker", "step", "expected"), [
    ("3", "latest", 3),
    (" 10\n", "latest", 10),  # numbers, not names: 10 is not taken for 1
    ("3", "2", 2),  # --step wins over the tracker
    (None, "10", 10),
    ("garbage", "3", 3),
    (None, "latest", NO_TRACKER),
    ("", "latest", NO_TRACKER),
    ("-3", "latest", NO_TRACKER),
    ("global_step_3", "latest", NO_TRACKER),
    ("9", "latest", "{run}/global_step_9: step 9 not on disk (hint: " + RUN_HINT + ")"),
    ("3", "4", "{run}/global_step_4: step 4 not on disk (hint: " + RUN_HINT + ")"),  # a file, not a step
    ("3", "7", "{run}/global_step_7: step 7 not on disk (hint: " + RUN_HINT + ")"),
    ("3", "11", "{run}/global_step_11/actor: incomplete actor checkpoint: no actor/ directory (hint: pick another "
                "step with --step N)"),
    ("3", "two", "--step: --step must be a number or 'latest', got 'two'"),
    ("3", "-2", "--step: --step must be a number or 'latest', got '-2'"),
    ("3", "", "--step: --step must be a number or 'latest', got ''"),
    ("3", "Latest", "--step: --step must be a number or 'latest', got 'Latest'"),
])
def test_locate_checkpoint_in_a_run_dir_in_full(tmp_path, tracker, step, expected):
    from rlrecipes.errors import RecipeError
    from rlrecipes.verl.checkpoint_ref import CheckpointRef, locate_checkpoint

    run = _run_dir(tmp_path, tracker)
    if isinstance(expected, int):
        assert locate_checkpoint(run, step) == CheckpointRef(run, expected, run / f"global_step_{expected}" / "actor")
        return
    with pytest.raises(RecipeError) as info:
        locate_checkpoint(run, step)
    assert str(info.value) == expected.format(run=run)


def test_locate_checkpoint_lists_none_when_no_step_is_on_disk(tmp_path):
    from rlrecipes.errors import RecipeError
    from rlrecipes.verl.checkpoint_ref import locate_checkpoint

    with pytest.raises(RecipeError) as info:
        locate_checkpoint(tmp_path)
    assert info.value.hint == "pass --step N; steps on disk: none (or repair: rlrecipes resume-check)"
    with pytest.raises(RecipeError) as info:
        locate_checkpoint(tmp_path, "1")
    assert str(info.value) == f"{tmp_path}/global_step_1: step 1 not on disk (hint: steps on disk: none)"


def test_locate_checkpoint_takes_a_step_dir_or_its_actor_relative_or_not(tmp_path, monkeypatch):
    from rlrecipes.errors import RecipeError
    from rlrecipes.verl.checkpoint_ref import CheckpointRef, locate_checkpoint

    tmp_path = tmp_path.resolve()
    run = _run_dir(tmp_path, "3")
    actor = run / "global_step_2" / "actor"
    want = CheckpointRef(run, 2, actor)
    assert locate_checkpoint(run / "global_step_2") == want
    assert locate_checkpoint(actor) == want
    assert locate_checkpoint(actor, "10") == want  # --step means nothing once the step is named by its path
    # Relative paths, "." included, are read where they point: "." inside a step dir is that step.
    monkeypatch.chdir(run / "global_step_2")
    assert locate_checkpoint(".") == want
    assert locate_checkpoint("actor") == want
    monkeypatch.chdir(run)
    assert locate_checkpoint(".") == CheckpointRef(run, 3, run / "global_step_3" / "actor")
    assert locate_checkpoint("global_step_10") == CheckpointRef(run, 10, run / "global_step_10" / "actor")
    with pytest.raises(RecipeError) as info:
        locate_checkpoint("nope")
    assert str(info.value) == f"{run}/nope: checkpoint directory not found"
    with pytest.raises(RecipeError) as info:
        locate_checkpoint("global_step_4")  # a file
    assert str(info.value) == f"{run}/global_step_4: checkpoint directory not found"


def test_locate_checkpoint_refuses_an_actor_outside_a_step_dir(tmp_path):
    from rlrecipes.errors import RecipeError
    from rlrecipes.verl.checkpoint_ref import locate_checkpoint

    copied = _actor(tmp_path / "backup" / "actor_copy", world=2)
    with pytest.raises(RecipeError) as info:
        locate_checkpoint(copied)
    assert str(info.value) == f"{copied}: cannot tell the step: expected the actor under global_step_N/"
    # A shard set cut short in an actor named directly: refused with the reason, before the step is asked.
    (copied / "model_world_size_2_rank_1.pt").unlink()
    with pytest.raises(RecipeError) as info:
        locate_checkpoint(copied)
    assert str(info.value) == (f"{copied}: incomplete actor checkpoint: missing shard(s) for rank(s) [1] of 2 "
                               "(hint: pick another step with --step N)")


# -- scan_root: the walk that decides what the watchdog sees (and so what it may delete) --------------------

def _root(tmp_path: Path) -> Path:
    """A checkpoint root as a user's disk holds one: experiments at several depths, clutter, symlinks, the
    watchdog's own folder, and a run nested deeper than discovery goes."""
    from rlrecipes.watchdog.simulate import save_checkpoint, write_pt

    root = tmp_path / "ckpt"
    a = root / "proj" / "a"  # depth 2
    save_checkpoint(a, 1)
    save_checkpoint(a, 2)
    save_checkpoint(a, 10, tracker=False)
    (a / "global_step_10" / "data.pt").unlink()  # a save that died before data.pt
    (a / "global_step_3").write_text("a file named like a step")
    (a / "global_step_7").symlink_to(a / "global_step_2")  # a step-like symlink: listed, never followed
    (a / "global_step_1" / "actor" / "extra.lnk").symlink_to("/nonexistent")
    (a / "logs").mkdir()
    write_pt(a / "logs" / "big.pt", 20_000)
    (a / "logs" / "latest").symlink_to(a / "logs" / "big.pt")
    (root / "notes.txt").write_text("n" * 9000)
    (root / "tracker-only").mkdir()
    (root / "tracker-only" / TRACKER_NAME).write_text("4")
    (root / "links-only").mkdir()
    (root / "links-only" / "global_step_5").symlink_to(a / "global_step_1")
    save_checkpoint(root / "w" / "x" / "y" / "edge", 6)  # depth 4: the deepest discovered
    save_checkpoint(root / "w" / "x" / "y" / "edge" / "deeper", 8)  # depth 5: not an experiment, but bytes
    (root / "w" / "x" / "y" / "edge" / "deeper" / "l").symlink_to("/nonexistent")
    dog = root / ".watchdog"
    save_checkpoint(dog / "trash", 9)  # never an experiment, whatever it holds
    (dog / "status.json").write_text("{}" * 3000)
    (dog / "l").symlink_to("/nonexistent")
    return root


def _layout(scan) -> list:
    return [(str(e.path.relative_to(scan.root)), e.tracker.status, e.tracker.step,
             [(s.step, s.complete, s.problem) for s in e.steps], [str(p.relative_to(scan.root)) for p in e.symlinks])
            for e in scan.experiments]


LAYOUT = [
    ("links-only", "missing", None, [], ["links-only/global_step_5"]),
    ("proj/a", "ok", 2, [(1, True, ""), (2, True, ""), (10, False, "data.pt missing")], ["proj/a/global_step_7"]),
    ("tracker-only", "ok", 4, [], []),
    ("w/x/y/edge", "ok", 6, [(6, True, "")], []),
]


@pytest.mark.parametrize("count_all", [True, False])
def test_scan_root_finds_every_experiment_and_sizes_the_root_like_du(tmp_path, count_all):
    from rlrecipes.verl.checkpoints import scan_root

    root = _root(tmp_path)
    scan = scan_root(root, count_all=count_all)
    assert scan.root == root and scan.errors == []
    assert _layout(scan) == LAYOUT
    for e in scan.experiments:
        for s in e.steps:
            assert (s.path, s.bytes) == (e.path / f"global_step_{s.step}", _du_bytes(s.path))
    # Every symlink met, sorted, none followed (the watchdog's own folder and the deep run only when sized).
    links = ["links-only/global_step_5", "proj/a/global_step_1/actor/extra.lnk", "proj/a/global_step_7",
             "proj/a/logs/latest"]
    if count_all:
        links = [".watchdog/l"] + links + ["w/x/y/edge/deeper/l"]
    assert [str(p.relative_to(root)) for p in scan.symlinks] == links
    # The quota's measure is all of it, as du counts it; without count_all, what is not walked is left out.
    deep = root / "w" / "x" / "y" / "edge" / "deeper"
    expected = _du_bytes(root) - (0 if count_all else _du_bytes(root / ".watchdog") + _du_bytes(deep))
    assert scan.root_bytes == expected


def test_scan_root_of_a_root_that_is_an_experiment_or_missing(tmp_path):
    from rlrecipes.verl.checkpoints import RootScan, scan_root
    from rlrecipes.watchdog.simulate import save_checkpoint

    save_checkpoint(tmp_path, 9)
    save_checkpoint(tmp_path, 10)
    save_checkpoint(tmp_path / ".watchdog" / "trash", 3)
    scan = scan_root(tmp_path)
    assert [(e.path, e.tracker.step, [s.step for s in e.steps]) for e in scan.experiments] == [(tmp_path, 10, [9, 10])]
    assert scan.root_bytes == _du_bytes(tmp_path)  # by default everything is sized, the watchdog's folder too
    assert scan_root(tmp_path / "gone") == RootScan(tmp_path / "gone", [], 0, [], [f"{tmp_path}/gone: does not exist"])


def test_scan_root_reports_an_unreadable_directory_and_walks_on(tmp_path, monkeypatch):
    from rlrecipes.verl.checkpoints import scan_root

    root = _root(tmp_path)
    denied = {str(root / "proj"), str(root / "tracker-only")}
    real_scandir = os.scandir

    def scandir(path):
        if str(path) in denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    scan = scan_root(root)
    assert sorted(scan.errors) == [f"{root}/proj: Permission denied", f"{root}/tracker-only: Permission denied"]
    assert _layout(scan) == [LAYOUT[0], LAYOUT[3]]


class _Listing:
    """os.scandir's result for one directory, with `vanish` deleted after the listing, before it is stat-ed
    (verl's retention or a user removing it mid-walk) and listed first."""

    def __init__(self, path, vanish: Path):
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: (e.name != vanish.name, e.name))
        if vanish.is_dir():
            import shutil

            shutil.rmtree(vanish)
        else:
            vanish.unlink()
        self.entries = entries

    def __iter__(self):
        return iter(self.entries)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_an_entry_vanishing_mid_walk_leaves_the_rest_of_its_directory_counted(tmp_path, monkeypatch):
    from rlrecipes.verl.checkpoints import scan_root

    root = _root(tmp_path)
    a = root / "proj" / "a"
    before = scan_root(root)
    gone = {str(a): a / "global_step_1", str(a / "global_step_2" / "actor"): a / "global_step_2" / "actor" / "huggingface"}
    lost = _du_bytes(a / "global_step_1") + _du_bytes(a / "global_step_2" / "actor" / "huggingface")
    real_scandir = os.scandir

    def scandir(path):
        vanish = gone.pop(str(path), None)
        return real_scandir(path) if vanish is None else _Listing(path, vanish)

    monkeypatch.setattr(os, "scandir", scandir)
    scan = scan_root(root)
    assert gone == {}  # both races happened
    assert scan.errors == []
    assert _layout(scan) == [LAYOUT[0], ("proj/a", "ok", 2, [(2, True, ""), (10, False, "data.pt missing")],
                                         ["proj/a/global_step_7"]), *LAYOUT[2:]]
    assert scan.root_bytes == before.root_bytes - lost == _du_bytes(root)


def test_scan_root_rereads_only_what_is_not_settled(tmp_path, monkeypatch):
    from rlrecipes.verl.checkpoints import StepCache, scan_root
    from rlrecipes.watchdog.simulate import write_pt

    root = _root(tmp_path)
    a = root / "proj" / "a"
    old = T  # long settled
    for p in [a, *a.rglob("*")]:
        os.utime(p, (old, old), follow_symlinks=False)
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path):
        listed.append(os.path.relpath(path, a))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    cache = StepCache(settled_s=60)
    first = scan_root(root, cache=cache)
    assert len(listed) == len(set(listed))  # one listing of each directory per pass, step dirs included

    def step_reads() -> list[str]:  # the step dirs of proj/a listed (read) since `listed` was last cleared
        return sorted({p.split(os.sep)[0] for p in listed if p.startswith("global_step_")})

    assert step_reads() == ["global_step_1", "global_step_10", "global_step_2"]
    listed.clear()
    again = scan_root(root, cache=cache)
    # Steps 1 and 2 are whole and quiet: served from the cache, the same reading, links and bytes included.
    # Step 10 is incomplete: read in full on every pass (it may be a save still being written).
    assert step_reads() == ["global_step_10"]
    assert (_layout(again), again.symlinks, again.root_bytes) == (_layout(first), first.symlinks, first.root_bytes)
    assert [s.bytes for s in again.experiments[1].steps] == [s.bytes for s in first.experiments[1].steps]
    # Anything added inside a cached step changes a directory's mtime: that step is read again.
    write_pt(a / "global_step_1" / "actor" / "model_world_size_2_rank_2.pt", 64)
    listed.clear()
    third = scan_root(root, cache=cache)
    assert step_reads() == ["global_step_1", "global_step_10"]
    assert third.experiments[1].steps[0].bytes == _du_bytes(a / "global_step_1")
    # A step written just now is not settled: never cached, read on every pass.
    fresh = StepCache(settled_s=10**10)
    scan_root(root, cache=fresh)
    listed.clear()
    scan_root(root, cache=fresh)
    assert step_reads() == ["global_step_1", "global_step_10", "global_step_2"]


# -- inspect_step and role_problem: what makes a step whole, on trees a real disk can hold ------------------

def _step(tmp_path: Path, critic: bool = False) -> Path:
    from rlrecipes.watchdog.simulate import save_checkpoint

    return save_checkpoint(tmp_path / "run", 1, critic=critic)


def _replace_by_file(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
    path.write_text("not a directory")


@pytest.mark.parametrize(("case", "expected"), [
    ("whole", ("", ("actor",))),
    ("whole with critic", ("", ("actor", "critic"))),
    ("actor/ is a file", ("actor/ missing", ())),
    ("critic/ is a file", ("critic is not a directory", ("actor",))),
    ("critic/ unreadable", ("critic/ unreadable", ("actor",))),
    ("step dir unreadable", ("unreadable", ())),
    # a shard that is a symlink (to a whole archive, even) is not what verl wrote: never followed
    ("symlinked shard", ("actor/: model_world_size_2_rank_0.pt is not a regular file", ())),
    # the first bad shard of a set is named, whatever kind sorts first
    ("truncated extra_state", ("actor/: extra_state_world_size_2_rank_0.pt is truncated (not a whole torch.save "
                               "archive)", ())),
    ("data.pt a directory", ("data.pt is truncated (not a whole torch.save archive)", ("actor", "critic"))),
])
def test_inspect_step_in_full(tmp_path, monkeypatch, case, expected):
    from rlrecipes.verl.checkpoints import StepDir, ZipCache, inspect_step

    d = _step(tmp_path, critic="critic" in case or "data.pt" in case)
    if case == "actor/ is a file":
        _replace_by_file(d / "actor")
    elif case == "critic/ is a file":
        _replace_by_file(d / "critic")
    elif case == "symlinked shard":
        shard = d / "actor" / "model_world_size_2_rank_0.pt"
        os.rename(shard, tmp_path / "elsewhere.pt")
        shard.symlink_to(tmp_path / "elsewhere.pt")
    elif case == "truncated extra_state":
        shard = d / "actor" / "extra_state_world_size_2_rank_0.pt"
        shard.write_bytes(shard.read_bytes()[:-30])
    elif case == "data.pt a directory":
        (d / "data.pt").unlink()
        (d / "data.pt").mkdir()
    denied = {"critic/ unreadable": str(d / "critic"), "step dir unreadable": str(d)}.get(case)
    real_scandir = os.scandir

    def scandir(path):
        if str(path) == denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    links: list[Path] = []
    info = inspect_step(d, 1, ZipCache(), symlinks=links)
    monkeypatch.setattr(os, "scandir", real_scandir)
    stats = tree_stats(d, keep_entries=True) if denied is None else None
    problem, roles = expected
    if stats is not None:
        assert (info.bytes, info.files, info.newest_mtime) == (stats.bytes, stats.files, stats.newest_mtime)
    assert info == StepDir(d, 1, info.bytes, info.files, info.newest_mtime, problem == "", problem, roles), case
    # symlinks met inside the step are handed back to the caller (the watchdog reports them)
    assert links == ([d / "actor" / "model_world_size_2_rank_0.pt"] if case == "symlinked shard" else [])


def test_inspect_step_counts_files_and_bytes_of_the_step(tmp_path):
    from rlrecipes.verl.checkpoints import ZipCache, inspect_step

    d = _step(tmp_path)
    info = inspect_step(d, 1, ZipCache())
    # 6 shards, huggingface/ with 3 files, fsdp_config.json, data.pt
    assert (info.files, info.bytes) == (11, _du_bytes(d))


@pytest.mark.parametrize(("case", "expected"), [
    ("whole", ""),
    ("symlinked shard", "model_world_size_2_rank_1.pt is not a regular file"),
    ("unreadable", "unreadable: Permission denied"),
    ("truncated, zip check off", ""),
    ("truncated", "optim_world_size_2_rank_1.pt is truncated (not a whole torch.save archive)"),
])
def test_role_problem_for_merge(tmp_path, monkeypatch, case, expected):
    from rlrecipes.verl.checkpoints import role_problem

    actor = _step(tmp_path) / "actor"
    if case == "symlinked shard":
        shard = actor / "model_world_size_2_rank_1.pt"
        os.rename(shard, tmp_path / "elsewhere.pt")
        shard.symlink_to(tmp_path / "elsewhere.pt")
    elif case.startswith("truncated"):
        shard = actor / "optim_world_size_2_rank_1.pt"
        shard.write_bytes(shard.read_bytes()[:-30])
    elif case == "unreadable":
        def scandir(path):
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(os, "scandir", scandir)
    assert role_problem(actor, zip_check=case != "truncated, zip check off") == expected


def test_step_cache_serves_a_settled_whole_step_until_a_directory_in_it_changes(tmp_path):
    from rlrecipes.verl.checkpoints import StepCache, ZipCache, inspect_step

    d = _step(tmp_path)
    (d / "actor" / "extra.lnk").symlink_to("/nonexistent")
    for p in [d, *d.rglob("*")]:
        os.utime(p, (T, T), follow_symlinks=False)
    links: list[Path] = []
    stats = tree_stats(d, links, keep_entries=True)
    info = inspect_step(d, 1, ZipCache(), stats=stats)
    assert info.complete and info.newest_mtime == T
    cache = StepCache(settled_s=60)
    cache.put(info, stats, links, now=T + 59.5)  # quiet for less than settled_s: not cached
    assert cache.get(d) is None
    cache.put(info, stats, links, now=T + 60)  # quiet for exactly settled_s: settled (as the grace is in policy)
    assert cache.get(d) == (info, [d / "actor" / "extra.lnk"])
    assert cache.get(tmp_path / "run" / "global_step_2") is None
    cache.forget(d)
    assert cache.get(d) is None
    # An incomplete step is never cached, however old.
    broken = inspect_step(d, 1, ZipCache(), stats=tree_stats(d, keep_entries=True))
    object.__setattr__(broken, "complete", False)
    cache.put(broken, stats, links, now=T + 10**6)
    assert cache.get(d) is None
    # A file added in actor/huggingface/ changes that directory's mtime: the reading is dropped, and stays dropped even once
    # the mtime is put back (cp -a and rsync -a restore a directory's mtime after writing into it).
    cache.put(info, stats, links, now=T + 60)
    (d / "actor" / "huggingface" / "new.json").write_text("{}")
    assert cache.get(d) is None
    os.utime(d / "actor" / "huggingface", (T, T))
    assert cache.get(d) is None
    # A directory of the step gone: not served either.
    cache.put(info, stats, links, now=T + 60)
    import shutil

    shutil.rmtree(d / "actor" / "huggingface")
    os.utime(d / "actor", (T, T))
    assert cache.get(d) is None
    # ... nor once a directory of that name is back with every mtime as cached: the old reading is gone.
    (d / "actor" / "huggingface").mkdir()
    for p in (d / "actor" / "huggingface", d / "actor"):
        os.utime(p, (T, T))
    assert cache.get(d) is None
    # A directory of the step replaced by a symlink to one that looks the same (same mtime), the parent's
    # mtime put back: the symlink itself is what is compared, so the reading is dropped.
    cache.put(info, stats, links, now=T + 60)
    os.rename(d / "actor" / "huggingface", tmp_path / "hf")
    (d / "actor" / "huggingface").symlink_to(tmp_path / "hf")
    os.utime(d / "actor", (T, T))
    assert cache.get(d) is None


def test_scan_root_lists_experiments_and_steps_by_name_whatever_order_the_disk_lists_them(tmp_path):
    from rlrecipes.verl.checkpoints import scan_root

    # Created in an order that is neither sorted nor reversed: a directory lists entries in creation order
    # (tmpfs: newest first; ext4: hash order once indexed), and none of those may leak into the scan.
    names = ["run-07", "run-02", "run-11", "run-00", "run-05", "run-09", "run-01", "run-10", "run-04", "run-08",
             "run-03", "run-06"]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / TRACKER_NAME).write_text("1")
    for n in (10, 3, 1, 20, 2):
        (tmp_path / "run-05" / f"global_step_{n}").mkdir()
    scan = scan_root(tmp_path)
    assert [e.path.name for e in scan.experiments] == sorted(names)
    assert [s.step for s in scan.experiments[5].steps] == [1, 2, 3, 10, 20]
