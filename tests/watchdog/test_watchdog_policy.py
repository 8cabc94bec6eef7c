"""Pure watchdog logic with literal cases: step classification, retention, budget, tracker, sizes, health."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from rlrecipes.verl.checkpoints import Experiment, StepDir, Tracker, ZipCache, inspect_step, read_tracker
from rlrecipes.verl.resume import TrackerFix, classify
from rlrecipes.watchdog.policy import Deletion, ExperimentDecision, Retention, parse_size, plan
from rlrecipes.watchdog.status import STATUS_VERSION, health, render_metrics

NOW = 1_000_000.0
GRACE = 60.0
EXP = Path("/ckpt/run")


def step(n: int, complete: bool = True, age: float = 3600, size: int = 100) -> StepDir:
    return StepDir(EXP / f"global_step_{n}", n, size, 10, NOW - age, complete, "" if complete else "data.pt missing")


def exp(tracker: Tracker, *steps: StepDir, path: Path = EXP) -> Experiment:
    return Experiment(path, tracker, sorted(steps, key=lambda s: s.step))


OK = lambda n, age=3600: Tracker("ok", n, str(n), NOW - age)  # noqa: E731
# A tracker the watchdog itself wrote, not rewritten by verl since (same inode, mtime and size).
OURS = lambda n, age=3600: Tracker("ok", n, str(n), NOW - age, ours=True)  # noqa: E731


@pytest.mark.parametrize(("case", "experiment", "states", "resume", "fix"), [
    ("steady", exp(OK(3), step(1), step(2), step(3)),
     {1: "complete", 2: "complete", 3: "complete"}, 3, None),
    ("crash mid-save above tracker", exp(OK(2), step(1), step(2), step(3, complete=False)),
     {1: "complete", 2: "complete", 3: "interrupted"}, 2, None),
    ("whole dir above tracker", exp(OK(2), step(1), step(2), step(3)),
     {1: "complete", 2: "complete", 3: "interrupted"}, 2, None),
    ("save in progress", exp(OK(2), step(1), step(2), step(3, complete=False, age=5)),
     {1: "complete", 2: "complete", 3: "writing"}, 2, None),
    ("verl pruned actor/ only", exp(OK(3), step(1, complete=False), step(2), step(3)),
     {1: "incomplete", 2: "complete", 3: "complete"}, 3, None),
    ("tracker missing", exp(Tracker("missing"), step(1), step(2), step(3, complete=False)),
     {1: "complete", 2: "complete", 3: "interrupted"}, 2, ("missing", 2)),
    ("tracker empty", exp(Tracker("empty", None, "", NOW - 3600), step(4), step(8)),
     {4: "complete", 8: "complete"}, 8, ("empty", 8)),
    ("tracker empty while verl rewrites it", exp(Tracker("empty", None, "", NOW - 1), step(4), step(8)),
     {4: "complete", 8: "complete"}, None, None),
    ("tracker names a deleted step", exp(OK(9), step(4), step(8)),
     {4: "complete", 8: "complete"}, 8, ("9", 8)),
    ("tracker names an incomplete step", exp(OK(8), step(4), step(8, complete=False)),
     {4: "complete", 8: "interrupted"}, 4, ("8", 4)),
    ("tracker names a step being written", exp(OK(8), step(4), step(8, complete=False, age=1)),
     {4: "complete", 8: "writing"}, 8, None),
    ("tracker names a damaged step, nothing whole", exp(OK(8), step(7, complete=False), step(8, complete=False),
                                                         step(9, complete=False)),
     {7: "damaged", 8: "damaged", 9: "interrupted"}, None, None),
    ("first save crashed, no tracker", exp(Tracker("missing"), step(1, complete=False)), {1: "interrupted"}, None, None),
    ("broken tracker, newest whole dir still being written",
     exp(Tracker("missing"), step(4), step(8, age=1)), {4: "complete", 8: "writing"}, 4, ("missing", 4)),
    ("broken tracker, an incomplete step below the newest whole one",
     exp(Tracker("missing"), step(1, complete=False), step(2)), {1: "incomplete", 2: "complete"}, 2, ("missing", 2)),
    # verl 0.8.0's async_save writes no tracker: the one the watchdog wrote must move on to newer whole saves.
    ("watchdog's tracker, nothing newer saved", exp(OURS(3), step(2), step(3)),
     {2: "complete", 3: "complete"}, 3, None),
    ("watchdog's tracker, a newer whole save", exp(OURS(2), step(1), step(2), step(3)),
     {1: "complete", 2: "complete", 3: "complete"}, 3, ("2", 3)),
    ("watchdog's tracker, the newer whole save still within the grace", exp(OURS(2), step(1), step(2), step(3, age=5)),
     {1: "complete", 2: "complete", 3: "writing"}, 2, None),
    # The grace period is "written to less than GRACE seconds ago": at exactly GRACE a step is quiet.
    ("save quiet for exactly the grace period", exp(OK(2), step(2), step(3, complete=False, age=GRACE)),
     {2: "complete", 3: "interrupted"}, 2, None),
    ("tracker empty for exactly the grace period", exp(Tracker("empty", None, "", NOW - GRACE), step(4), step(8)),
     {4: "complete", 8: "complete"}, 8, ("empty", 8)),
])
def test_classify(case, experiment, states, resume, fix):
    got_states, got_resume, got_fix, _ = classify(experiment, NOW, GRACE)
    assert got_states == states, case
    assert got_resume == resume, case
    assert (None if got_fix is None else (got_fix.old, got_fix.new_step)) == fix, case


@pytest.mark.parametrize(("case", "experiment", "code"), [
    ("nothing whole", exp(Tracker("missing"), step(1, complete=False)), "no-complete-checkpoint"),
    ("dangling, only a save in flight", exp(OK(5), step(6, complete=False, age=1)), "no-complete-checkpoint"),
    ("unparsable", exp(Tracker("unparsable", None, "abc", NOW - 3600), step(3)), "tracker-unparsable"),
    ("dangling", exp(OK(5), step(3)), "tracker-dangling"),
    ("incomplete", exp(OK(5), step(3), step(5, complete=False)), "tracker-incomplete"),
])
def test_tracker_findings(case, experiment, code):
    _, _, _, findings = classify(experiment, NOW, GRACE)
    assert [f.code for f in findings] == [code], case


def _deleted(p) -> dict[int, str]:
    return {d.step: d.reason for d in p.deletions}


@pytest.mark.parametrize(("keep_last", "keep_every", "expected"), [
    (1, None, {1: "keep-last", 2: "keep-last", 3: "keep-last", 4: "keep-last"}),
    (2, None, {1: "keep-last", 2: "keep-last", 3: "keep-last"}),
    (5, None, {}),
    (1, 2, {1: "keep-last", 3: "keep-last"}),
    (2, 3, {1: "keep-last", 2: "keep-last"}),
])
def test_retention(keep_last, keep_every, expected):
    e = exp(OK(5), *(step(n) for n in range(1, 6)))
    p = plan([e], NOW, Retention(keep_last, keep_every, GRACE), None)
    assert _deleted(p) == expected
    assert p.room_after_bytes is None and p.healthy


def test_retention_never_deletes_what_is_being_written_or_the_newest_complete():
    # 1 is below the tracker but incomplete and still written to (e.g. a copy in progress): hands off too.
    e = exp(OK(2), step(1, complete=False, age=10), step(2, age=10), step(3, complete=False, age=10))
    p = plan([e], NOW, Retention(1, None, GRACE), room_bytes=-10_000)
    assert _deleted(p) == {}
    assert not p.healthy


def test_damaged_steps_are_kept_for_salvage():
    e = exp(OK(8), step(7, complete=False), step(8, complete=False), step(9, complete=False))
    p = plan([e], NOW, Retention(1, None, GRACE), room_bytes=-1000)
    assert _deleted(p) == {9: "interrupted"}
    assert [f.code for f in p.findings] == ["no-complete-checkpoint", "budget-exceeded"]


def test_a_finished_save_below_the_tracker_is_not_protected_by_its_age():
    # verl writes the tracker last: whole and at or below it means finished, however recent.
    e = exp(OK(3), step(1, age=10), step(2, age=10), step(3, age=10))
    assert _deleted(plan([e], NOW, Retention(1, None, GRACE), None)) == {1: "keep-last", 2: "keep-last"}


@pytest.mark.parametrize(("room", "expected", "healthy"), [
    (1000, {}, True),
    (100, {}, True),  # exactly the next checkpoint's size
    (99, {1: "budget"}, True),
    (0, {1: "budget"}, True),
    (-1, {1: "budget", 2: "budget"}, True),
    (-100, {1: "budget", 2: "budget"}, True),
    (-101, {1: "budget", 2: "budget"}, False),  # only the newest left and still short: alarm
])
def test_budget_deletes_oldest_first_and_alarms(room, expected, healthy):
    e = exp(OK(3), step(1, age=300), step(2, age=200), step(3, age=100))
    p = plan([e], NOW, Retention(3, None, GRACE), room)
    assert _deleted(p) == expected
    assert p.healthy is healthy
    assert p.need_bytes == 100
    if not healthy:
        assert [f.code for f in p.findings] == ["budget-exceeded"]


def test_budget_counts_what_a_save_in_flight_already_wrote():
    e = exp(OK(2), step(1, size=1000), step(2, size=1000), step(3, complete=False, age=1, size=700))
    p = plan([e], NOW, Retention(2, None, GRACE), room_bytes=300)
    assert p.need_bytes == 300 and _deleted(p) == {}


def test_budget_across_experiments_takes_the_oldest_first():
    a = exp(OK(2), step(1, age=900), step(2, age=100), path=Path("/ckpt/a"))
    b_steps = [StepDir(Path(f"/ckpt/b/global_step_{n}"), n, 100, 10, NOW - age, True) for n, age in ((10, 500), (20, 50))]
    b = Experiment(Path("/ckpt/b"), OK(20), b_steps)
    p = plan([a, b], NOW, Retention(5, None, GRACE), room_bytes=50)
    assert [(d.experiment.name, d.step) for d in p.deletions] == [("a", 1)]
    p = plan([a, b], NOW, Retention(5, None, GRACE), room_bytes=-60)
    assert [(d.experiment.name, d.step) for d in p.deletions] == [("a", 1), ("b", 10)]


def test_keep_last_below_one_is_refused():
    with pytest.raises(ValueError, match=r"^keep_last must be >= 1: the newest complete checkpoint is never deleted$"):
        plan([], NOW, Retention(0, None, GRACE), None)


@pytest.mark.parametrize(("text", "expected"), [
    ("0", 0), ("1024", 1024), ("10B", 10), ("1K", 1024), ("1KiB", 1024), ("1KB", 1000), ("20G", 20 * 1024**3),
    ("1.5GiB", int(1.5 * 1024**3)), ("2TB", 2 * 1000**4), ("500m", 500 * 1024**2), (" 3 M ", 3 * 1024**2),
])
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "G", "-1G", "1.2.3G", "10 gigs", "1e9", "10PB"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError, match="not a size"):
        parse_size(text)


@pytest.mark.parametrize(("content", "status", "step"), [
    (None, "missing", None), ("", "empty", None), ("  \n", "empty", None), ("12", "ok", 12), ("12\n", "ok", 12),
    (" 7 ", "ok", 7), ("global_step_12", "unparsable", None), ("1.5", "unparsable", None),
    ("-3", "unparsable", None), ("0x10", "unparsable", None),
])
def test_read_tracker(tmp_path, content, status, step):
    if content is not None:
        (tmp_path / "latest_checkpointed_iteration.txt").write_text(content)
    t = read_tracker(tmp_path)
    assert (t.status, t.step) == (status, step)


def _pt(path: Path, whole: bool = True) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", b"x" * 200)
    if not whole:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])


def _make_role(d: Path, files: list[str]) -> None:
    d.mkdir(parents=True)
    for name in files:
        if name.endswith(".pt"):
            _pt(d / name)
        else:
            (d / name).write_text(json.dumps({}))


W2 = [f"{k}_world_size_2_rank_{r}.pt" for k in ("model", "optim", "extra_state") for r in (0, 1)] + ["fsdp_config.json"]
W4 = [f"{k}_world_size_4_rank_{r}.pt" for k in ("model", "optim", "extra_state") for r in range(4)]


@pytest.mark.parametrize(("case", "actor", "critic", "data", "problem"), [
    ("whole", W2, None, True, ""),
    ("whole with critic", W2, W2, True, ""),
    ("model only (save_contents=[model])", ["model_world_size_1_rank_0.pt", "fsdp_config.json"], None, True, ""),
    ("no data.pt", W2, None, False, "data.pt missing"),
    ("no actor", None, None, True, "actor/ missing"),
    ("missing rank", [f for f in W2 if f != "optim_world_size_2_rank_1.pt"], None, True,
     "actor/: optim shards missing for ranks [1] of world size 2"),
    # A step re-saved with another GPU count: verl loads the set of its own world size; one whole set is enough.
    ("re-saved with 4 GPUs, both sets whole", W2 + W4, None, True, ""),
    ("re-saved, the old set is partial", W2 + ["model_world_size_4_rank_0.pt"], None, True, ""),
    ("two partial sets", [f for f in W2 if f != "model_world_size_2_rank_1.pt"] + ["model_world_size_4_rank_0.pt"],
     None, True, "actor/: no whole shard set among world sizes [2, 4]: model shards missing for ranks [1] of world "
                 "size 2; model shards missing for ranks [1, 2, 3] of world size 4"),
    ("no fsdp_config.json", [f for f in W2 if f != "fsdp_config.json"], None, True, "actor/: fsdp_config.json missing"),
    ("no model shards", [f for f in W2 if not f.startswith("model")], None, True,
     "actor/: no model_world_size_*_rank_*.pt shards"),
    ("critic incomplete", W2, W2[:1] + ["fsdp_config.json"], True,
     "critic/: model shards missing for ranks [1] of world size 2"),
])
def test_inspect_step_completeness(tmp_path, case, actor, critic, data, problem):
    d = tmp_path / "global_step_3"
    d.mkdir()
    if actor is not None:
        _make_role(d / "actor", actor)
    if critic is not None:
        _make_role(d / "critic", critic)
    if data:
        _pt(d / "data.pt")
    info = inspect_step(d, 3, ZipCache())
    assert info.problem == problem, case
    assert info.complete is (problem == "")


def test_truncated_archives_are_incomplete_unless_the_zip_check_is_off(tmp_path):
    d = tmp_path / "global_step_1"
    d.mkdir()
    _make_role(d / "actor", W2)
    _pt(d / "data.pt", whole=False)
    assert inspect_step(d, 1, ZipCache()).problem == "data.pt is truncated (not a whole torch.save archive)"
    assert inspect_step(d, 1, ZipCache(enabled=False)).complete
    _pt(d / "data.pt")
    _pt(d / "actor" / "model_world_size_2_rank_1.pt", whole=False)
    assert "model_world_size_2_rank_1.pt is truncated" in inspect_step(d, 1, ZipCache()).problem


def _status(**kw) -> dict:
    base = {"version": STATUS_VERSION, "time": NOW, "interval_s": 30, "healthy": True, "findings": []}
    base.update(kw)
    return base


@pytest.mark.parametrize(("status", "now", "max_age", "healthy", "reason"), [
    (_status(), NOW + 10, None, True, "healthy"),
    (_status(), NOW + 119, None, True, "healthy"),  # 3 x 30 s + 30 s
    (_status(), NOW + 121, None, False, "not running"),
    (_status(), NOW + 5, 1.0, False, "not running"),
    # A --once status: nothing keeps it fresh; healthy only with an explicit --max-age (it used to be forever).
    (_status(interval_s=None), NOW + 10_000, None, False, "one-shot pass"),
    (_status(interval_s=None), NOW + 10, 60.0, True, "healthy"),
    (_status(interval_s=None), NOW + 61, 60.0, False, "not running"),
    (_status(), NOW - 3600, None, False, "in the future"),
    (_status(time="yesterday"), NOW, None, False, "malformed status: time"),
    (_status(time=float("nan")), NOW, None, False, "malformed status: time"),
    (_status(time=True), NOW, None, False, "malformed status: time"),
    (_status(interval_s="30"), NOW, None, False, "one-shot"),
    (_status(findings="none"), NOW, None, False, "malformed status: findings"),
    (_status(findings=[1]), NOW, None, False, "malformed status: findings"),
    (_status(healthy="yes"), NOW, None, False, "status says unhealthy"),
    ([], NOW, None, False, "malformed status: a JSON list"),
    (_status(healthy=False, findings=[{"severity": "error", "experiment": "", "message": "budget cannot hold"}]),
     NOW, None, False, "root: budget cannot hold"),
    (_status(version=99), NOW, None, False, "unknown status version"),
])
def test_health(status, now, max_age, healthy, reason):
    ok, why = health(status, now=now, max_age_s=max_age)
    assert ok is healthy and reason in why


def test_metrics_text_format():
    status = _status(experiments=[{"name": 'we"ird', "newest_complete": 4, "steps": [
        {"state": "complete", "bytes": 10}, {"state": "complete", "bytes": 10}, {"state": "writing", "bytes": 3}]}],
        hogs=[{"name": "ray", "path": "/tmp/ray", "bytes": 77}], counters={"deleted": 5})
    text = render_metrics(status)
    lines = text.splitlines()
    assert 'rlrecipes_watchdog_checkpoints{experiment="we\\"ird",state="complete"} 2' in lines
    assert 'rlrecipes_watchdog_checkpoints{experiment="we\\"ird",state="writing"} 1' in lines
    assert 'rlrecipes_watchdog_checkpoint_bytes{experiment="we\\"ird"} 23' in lines
    assert 'rlrecipes_watchdog_hog_bytes{name="ray",path="/tmp/ray"} 77' in lines
    assert "rlrecipes_watchdog_deleted_total 5" in lines
    assert "rlrecipes_watchdog_healthy 1" in lines
    # Every sample has a HELP and TYPE line for its family, as the exposition format requires.
    families = {line.split()[2] for line in lines if line.startswith("# TYPE")}
    for line in lines:
        if not line.startswith("#"):
            assert line.split("{")[0].split(" ")[0] in families


def test_metrics_parse_back_exactly_with_prometheus_client():
    from prometheus_client.parser import text_string_to_metric_families

    # {:g} exported 1.76455e+09 (47 minutes off) and 1.23457e+11 for these
    status = _status(time=1764547200.5, scan_seconds=0.123456789, root_bytes=123456789012,
                     budget={"fs_free_bytes": 2**53 + 2, "need_bytes": 7, "room_after_bytes": float("inf")},
                     counters={"scans": 1234567, "deleted_bytes": 98765432109876},
                     experiments=[{"name": "run", "newest_complete": 1234567, "steps": [
                         {"state": "complete", "bytes": 10**12 + 1}]}])
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(render_metrics(status)) for s in family.samples}
    p = "rlrecipes_watchdog_"
    assert samples[(p + "last_scan_timestamp_seconds", ())] == 1764547200.5
    assert samples[(p + "scan_duration_seconds", ())] == 0.123456789
    assert samples[(p + "root_bytes", ())] == 123456789012
    assert samples[(p + "scans_total", ())] == 1234567
    assert samples[(p + "deleted_bytes_total", ())] == 98765432109876
    assert samples[(p + "budget_room_bytes", ())] == float("inf")
    assert samples[(p + "newest_complete_step", (("experiment", "run"),))] == 1234567
    assert samples[(p + "checkpoint_bytes", (("experiment", "run"),))] == 10**12 + 1
    assert samples[(p + "fs_free_bytes", ())] == float(2**53 + 2)


@pytest.mark.parametrize(("argv", "message"), [
    (["--quota", "12X"], "--quota: not a size: '12X'"),
    (["--min-free=-1G"], "--min-free: not a size"),
    (["--keep-last", "0"], "--keep-last: must be at least 1"),
    (["--keep-every", "0"], "--keep-every: must be a positive step count"),
    (["--interval", "0"], "--interval: must be positive"),
    (["--grace", "-1"], "--grace: must be >= 0"),
    # NaN compares false with everything: `--grace nan` made a save being written look quiet and deleted it.
    (["--grace", "nan"], "--grace: must be >= 0"),
    (["--grace", "inf"], "--grace: must be >= 0"),
    (["--interval", "inf"], "--interval: must be positive"),
    (["--interval", "nan"], "--interval: must be positive"),
    (["--interval", "1e300"], "--interval: must be positive"),
    (["--metrics-port", "99999"], "--metrics-port: not a TCP port: 99999"),
    (["--metrics-port", "-1"], "--metrics-port: not a TCP port: -1"),
    (["--watch", "ray"], "--watch: expected NAME=PATH, got 'ray'"),
])
def test_watchdog_cli_rejects_bad_input(tmp_path, capsys, argv, message):
    from rlrecipes.cli import main

    assert main(["watchdog", "--root", str(tmp_path), "--once", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / ".watchdog").exists()


def test_watchdog_cli_rejects_a_missing_root_and_two_budgets(tmp_path, capsys):
    from rlrecipes.cli import main

    assert main(["watchdog", "--root", str(tmp_path / "nope"), "--once"]) == 2
    assert "checkpoint root does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["watchdog", "--root", str(tmp_path), "--quota", "1G", "--min-free", "1G"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_caches_forget_step_dirs_that_are_gone(tmp_path):
    import shutil

    from rlrecipes.verl.checkpoints import StepCache, scan_root
    from rlrecipes.watchdog.simulate import save_checkpoint

    exp_dir = tmp_path / "run"
    for n in (1, 2):
        save_checkpoint(exp_dir, n)
    zips, steps = ZipCache(), StepCache(settled_s=0)
    scan_root(tmp_path, zips, cache=steps)
    assert len(steps._seen) == 2 and len(zips) == 2 * 7  # 6 shards + data.pt per step
    shutil.rmtree(exp_dir / "global_step_1")  # e.g. verl's own retention
    scan = scan_root(tmp_path, zips, cache=steps)
    assert [s.step for s in scan.experiments[0].steps] == [2]
    assert list(steps._seen) == [str(exp_dir / "global_step_2")]
    assert len(zips) == 7 and list(zips._seen) == [str(exp_dir / "global_step_2")]


def test_whole_plan_by_hand():
    """Every field of a plan over two experiments, worked out by hand (keep_last 2, grace 60 s, no room
    left before the plan):
    a: tracker at 3; steps 1-3 whole (100 B each, written 3000/2000/1000 s ago), 4 partial (40 B, 900 s ago,
       above the tracker and quiet for longer than the grace: an interrupted save).
       -> 4 deleted as interrupted, 1 beyond the last two (keep-last), 2 kept but a budget candidate, 3 is
       the newest whole one and never a candidate. The next save will write about 100 B.
    b: no tracker; steps 5 and 6 whole (300 B, 2500 and 500 s ago) -> the tracker is rewritten to 6; 5 is a
       budget candidate. The next save needs 300 B: the plan needs max(100, 300) = 300 B.
    Budget: 0 + 100 + 40 freed = 140 < 300, so candidates go oldest first: b's step 5 (2500 s ago, older
    than a's step 2) frees 300 -> 440 >= 300, and a's step 2 stays."""
    a, b = Path("/ckpt/a"), Path("/ckpt/b")

    def at(root, n, size, age, complete=True):
        return StepDir(root / f"global_step_{n}", n, size, 10, NOW - age, complete, "" if complete else "data.pt missing")

    ea = exp(OK(3), at(a, 1, 100, 3000), at(a, 2, 100, 2000), at(a, 3, 100, 1000), at(a, 4, 40, 900, False), path=a)
    eb = exp(Tracker("missing"), at(b, 5, 300, 2500), at(b, 6, 300, 500), path=b)
    p = plan([ea, eb], NOW, Retention(2, None, GRACE), room_bytes=0)
    assert p.deletions == [
        Deletion(a, a / "global_step_1", 1, 100, "keep-last", NOW - 3000),
        Deletion(a, a / "global_step_4", 4, 40, "interrupted", NOW - 900, "data.pt missing"),
        Deletion(b, b / "global_step_5", 5, 300, "budget", NOW - 2500),
    ]
    assert p.fixes == [TrackerFix(b, "missing", 6)]
    assert p.experiments == [
        ExperimentDecision(a, {1: "complete", 2: "complete", 3: "complete", 4: "interrupted"}, 3, 3, 100),
        ExperimentDecision(b, {5: "complete", 6: "complete"}, 6, 6, 300),
    ]
    assert (p.need_bytes, p.room_bytes, p.room_after_bytes) == (300, 0, 440)
    assert [(f.experiment, f.severity, f.code, f.step) for f in p.findings] == [
        (str(b), "warn", "tracker-missing", 6)]  # the step the tracker now names
    assert p.healthy


R0 = "auto-resume would restart at step 0"


@pytest.mark.parametrize(("case", "experiment", "fix", "finding"), [
    ("nothing whole", exp(Tracker("missing"), step(1, complete=False)), None,
     ("error", "no-complete-checkpoint",
      "tracker is missing and no complete checkpoint exists: auto-resume will restart at step 0", None)),
    ("unparsable", exp(Tracker("unparsable", None, "abc", NOW - 3600), step(3)), ("unparsable", 3),
     ("warn", "tracker-unparsable", f"tracker is unparsable ('abc'); {R0} -> set to step 3", 3)),
    ("dangling", exp(OK(5), step(3)), ("5", 3),
     ("warn", "tracker-dangling", f"tracker names step 5, whose directory is gone; {R0} -> set to step 3", 3)),
    ("incomplete", exp(OK(5), step(3), step(5, complete=False)), ("5", 3),
     ("warn", "tracker-incomplete",
      f"tracker names step 5, which is incomplete (data.pt missing); {R0} -> set to step 3", 3)),
    ("missing", exp(Tracker("missing"), step(1), step(2)), ("missing", 2),
     ("warn", "tracker-missing", f"tracker is missing; {R0} -> set to step 2", 2)),
    ("empty", exp(Tracker("empty", None, "", NOW - 3600), step(4), step(8)), ("empty", 8),
     ("warn", "tracker-empty", f"tracker is empty; {R0} -> set to step 8", 8)),
    ("unparsable, its text cut at 40 characters", exp(Tracker("unparsable", None, "x" * 50 + "\n", NOW - 3600), step(3)),
     ("unparsable", 3), ("warn", "tracker-unparsable", f"tracker is unparsable ('{'x' * 40}'); {R0} -> set to step 3", 3)),
    # verl rewrites the tracker with open("w"): empty (or half written) for a moment on every save.
    ("empty, being rewritten", exp(Tracker("empty", None, "", NOW - 2), step(4), step(8)), None,
     ("info", "tracker-being-written", "tracker is empty; written 2s ago, waiting for the grace period", None)),
    ("unparsable, being rewritten", exp(Tracker("unparsable", None, "abc", NOW - 3), step(4)), None,
     ("info", "tracker-being-written", "tracker is unparsable ('abc'); written 3s ago, waiting for the grace period",
      None)),
    ("watchdog's tracker, a newer whole save", exp(OURS(2), step(1), step(2), step(3)), ("2", 3),
     ("info", "tracker-advanced", "tracker names step 2 as the watchdog wrote it and verl has written no tracker "
                                  "since (async_save writes none) -> advanced to the newest complete step 3", 3)),
])
def test_tracker_findings_in_full(case, experiment, fix, finding):
    _, _, got_fix, findings = classify(experiment, NOW, GRACE)
    assert (None if got_fix is None else (got_fix.experiment, got_fix.old, got_fix.new_step)) == \
        (None if fix is None else (EXP, *fix)), case
    assert [f.as_dict() for f in findings] == [dict(zip(
        ("experiment", "severity", "code", "message", "step", "repaired"), (str(EXP), *finding, False)))], case


MIB = 1024 ** 2


@pytest.mark.parametrize(("experiments", "room", "floor", "first", "findings"), [
    ([], -5 * MIB, MIB, 0, [("warn", "below-floor",
                             "5.0 MiB below the budget already, before any checkpoint: nothing to free yet; the first "
                             "save may fill the disk (pass --checkpoint-size from `rlrecipes plan` to check it fits)")]),
    ([], 0, MIB, 3 * MIB, [("error", "first-checkpoint-cannot-fit",
                            "one checkpoint needs 3.0 MiB but only 1.0 MiB is left: the first save would fail; free "
                            "space or move the checkpoint volume")]),
    # 15 MiB physically left (20 MiB floor, 5 MiB below it): a 10 MiB checkpoint fits, so only a warning
    ([], -5 * MIB, 20 * MIB, 10 * MIB, [("warn", "below-floor", "5.0 MiB below the budget already, before any "
                                                                "checkpoint: nothing to free yet; the first save may fill the disk")]),
    ([], 0, 3 * MIB, 3 * MIB, []),  # exactly at the floor, and the checkpoint fits exactly into the floor
    ([], 0, MIB, 0, []),  # exactly at the floor, checkpoint size unknown: not below it
    ([], -2 * MIB, MIB, 3 * MIB, [("error", "first-checkpoint-cannot-fit",  # 1 MiB past the physical end
                                   "one checkpoint needs 3.0 MiB but only 0 B is left: the first save would fail; "
                                   "free space or move the checkpoint volume")]),
    # room -101 + the 200 B of steps 1 and 2 = 99 B, one short of the next 100 B save
    ([exp(OK(3), step(1, age=300), step(2, age=200), step(3, age=100))], -101, 0, 0,
     [("error", "budget-exceeded", "the budget cannot hold the next checkpoint: it needs 100 B, only 99 B is left "
                                   "after deleting every checkpoint but the newest complete one; free space, raise "
                                   "the quota or lower --min-free before the next save fails")]),
    ([exp(OK(1), step(1))], 0, 0, 0,
     [("error", "budget-exceeded", "the budget cannot hold the next checkpoint: it needs 100 B, only 0 B is left "
                                   "after deleting every checkpoint but the newest complete one; free space, raise "
                                   "the quota or lower --min-free before the next save fails")]),
    ([exp(OK(1), step(1))], -50, 0, 0,
     [("error", "budget-exceeded", "the budget cannot hold the next checkpoint: it needs 100 B, only 0 B is left "
                                   "after deleting every checkpoint but the newest complete one (50 B over budget "
                                   "already); free space, raise the quota or lower --min-free before the next save "
                                   "fails")]),
])
def test_budget_findings_in_full(experiments, room, floor, first, findings):
    p = plan(experiments, NOW, Retention(3, None, GRACE), room, floor_bytes=floor, first_checkpoint_bytes=first)
    assert [f.as_dict() for f in p.findings] == [dict(zip(
        ("experiment", "severity", "code", "message", "step", "repaired"), ("", *finding, None, False)))
        for finding in findings]


def test_plan_defaults_are_no_floor_and_no_known_checkpoint_size():
    p = plan([], NOW, Retention(), room_bytes=-5 * MIB)
    assert [(f.severity, f.code) for f in p.findings] == [("warn", "below-floor")]
    assert p.findings[0].message.endswith("(pass --checkpoint-size from `rlrecipes plan` to check it fits)")
    # No floor: the room is all the space left, and a checkpoint one byte larger cannot fit.
    p = plan([], NOW, Retention(), room_bytes=MIB - 1, first_checkpoint_bytes=MIB)
    assert [(f.severity, f.code) for f in p.findings] == [("error", "first-checkpoint-cannot-fit")]


@pytest.mark.parametrize(("case", "experiment", "need"), [
    ("first save in flight, nothing whole yet", exp(Tracker("missing"), step(1, complete=False, age=1, size=70)), 0),
    ("a save in flight already wrote more than the last whole one",
     exp(OK(1), step(1, size=100), step(2, complete=False, age=1, size=150)), 0),
    # 1 is being written below the newest whole step (a copy, say): not part of the next save
    ("only writes above the newest whole step are the next save",
     exp(OK(2), step(1, complete=False, age=1, size=200), step(2, size=1000), step(3, complete=False, age=1, size=300)),
     700),
])
def test_next_save_needs_the_last_whole_size_less_what_is_written(case, experiment, need):
    p = plan([experiment], NOW, Retention(1, None, GRACE), None)
    assert p.need_bytes == need, case
    assert [e.next_checkpoint_bytes for e in p.experiments] == [need], case
