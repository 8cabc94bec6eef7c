"""docs/bench/gpu-overhead.md's second lever sitting and its 2-second-poll finding, held to their raw data: the
table of generation times is what benchmarks/gpu/generation_ticks.py prints from every recorded metrics file, the
sitting's table what benchmarks/gpu/levers_table.py prints from its folder, and every other figure of "Levers on a
second H100 host" is read from that sitting's console logs and metrics."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

from support.scripts import script_module

from rlrecipes.verl.run_metrics import read_jsonl
from rlrecipes.verl.startup import read_startup

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "docs" / "bench" / "gpu-data"
OVERHEAD = REPO / "docs" / "bench" / "gpu-overhead.md"
TICKS = REPO / "benchmarks" / "gpu" / "generation_ticks.py"


def flat(path: Path) -> str:
    return " ".join(path.read_text().split())


def _ticks():
    return script_module("benchmarks/gpu/generation_ticks.py")


def test_the_generation_table_is_what_the_script_prints_and_every_remainder_is_small():
    printed = subprocess.run([sys.executable, str(TICKS)], capture_output=True, text=True, check=True).stdout
    text = OVERHEAD.read_text()
    block = text.split("<!-- generation-ticks-table -->\n")[1].split("<!-- /generation-ticks-table -->")[0]
    assert block == printed
    *rows, total = printed.strip().splitlines()[2:]
    assert len(rows) >= 20 and total.startswith("| all | ")
    steps, remainder = int(total.split(" | ")[1]), total.split(" | ")[-1].rstrip(" |")
    quoted = f"Every one of the {steps} generations is a whole number of 2-second polls plus {remainder}"
    assert quoted in flat(OVERHEAD)
    # the claim itself, from the raw numbers: no remainder anywhere between 0.6 s and the next poll
    generation_ticks = _ticks()
    times = [t for ts in generation_ticks.records(RECORDS).values() for t in ts]
    assert len(times) == steps and all(generation_ticks.split(t)[1] < 0.6 for t in times)
    assert generation_ticks.split(4.13) == (2, 4.13 - 4.0) and generation_ticks.split(1.99) == (0, 1.99)


LEVERS_TABLE = REPO / "benchmarks" / "gpu" / "levers_table.py"


def _levers_table():
    return script_module("benchmarks/gpu/levers_table.py")


def _launch(lever: str):
    folder = RECORDS / "startup-levers-h100-2" / "levers" / lever
    startup = read_startup(next(folder.glob("console-*.log")))
    timing = _levers_table().timings(folder)
    assert startup is not None and startup.complete and startup.from_launch and sorted(timing) == [1, 2, 3, 4]
    return startup, timing


def _outside(step: dict) -> float:
    return _levers_table().outside_timers(step)


def test_the_second_lever_sitting_table_is_what_the_script_prints():
    sitting = RECORDS / "startup-levers-h100-2"
    printed = subprocess.run([sys.executable, str(LEVERS_TABLE), str(sitting)], capture_output=True, text=True,
                             check=True).stdout
    block = OVERHEAD.read_text().split("<!-- levers-table startup-levers-h100-2 -->\n")[1]
    assert block.split("<!-- /levers-table -->")[0] == printed
    lines = printed.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| `shipped-cold`, the host's first", "| `shipped-warm`, the same command again", "| `lean`", "| `agents2`"]
    # one row against the raw numbers, read here with verl's startup reader and the project's metrics reader
    startup, timing = _launch("shipped-warm")
    assert lines[3].split(" | ")[5:8] == [f"{startup.total_s:.0f} s", f"{timing[1]['step']:.1f} s",
                                          f"{_outside(timing[1]):.1f} s"]
    assert lines[3].endswith(f"| {min(timing[n]['gen'] for n in (2, 3, 4)):.1f}-"
                             f"{max(timing[n]['gen'] for n in (2, 3, 4)):.1f} s |")


def test_a_lever_cut_short_is_dashes_where_it_stopped():
    """The poll lever's one launch (no step logged; its console log kept under another name) and an empty
    folder: a row of dashes, not a traceback."""
    module = _levers_table()
    row, last = module.row(RECORDS / "poll-lever-h100-partial")
    assert last == 0 and row == "| `poll-lever-h100-partial` | " + " | ".join(["-"] * 9) + " |"


def test_the_second_lever_sitting_is_quoted_from_its_records():
    text = flat(OVERHEAD)
    launches = {lever: _launch(lever) for lever in ("shipped-cold", "shipped-warm", "lean", "agents2")}
    total = {lever: f"{s.total_s:.0f} s" for lever, (s, _) in launches.items()}
    rollout = {lever: f"{p.seconds:.0f}" for lever, (s, _) in launches.items() for p in s.phases if p.key == "rollout"}
    datasets = {lever: f"{p.seconds:.0f} s" for lever, (s, _) in launches.items() for p in s.phases
                if p.key == "datasets"}
    outside1 = {lever: f"{_outside(t[1]):.1f} s" for lever, (_, t) in launches.items()}
    agents_gen = {f"{launches['agents2'][1][n]['gen']:.1f}" for n in (2, 3, 4)}
    assert len(agents_gen) == 1 and datasets["lean"] == datasets["shipped-warm"]
    for quoted in (f"{total['shipped-cold']} cold and {total['shipped-warm']} warm",
                   f"({rollout['shipped-cold']} -> {rollout['shipped-warm']} s)",
                   f"{total['lean']} against `shipped-warm`'s {total['shipped-warm']}, the datasets phase "
                   f"{datasets['lean']} in both",
                   f"generation {agents_gen.pop()} s in each of steps 2-4 (three 2-second polls)",
                   f"step 1 spent {outside1['agents2']} outside the timers against {outside1['shipped-warm']}"):
        assert quoted in text, quoted
    # the polls the text counts: lean took one in each of steps 2-4, shipped-warm two in one of them
    polls = {lever: [int(t[n]["gen"] // 2) for n in (2, 3, 4)] for lever, (_, t) in launches.items()}
    assert polls["lean"] == [1, 1, 1] and sorted(polls["shipped-warm"]) == [1, 1, 2] and polls["agents2"] == [3, 3, 3]


def test_the_summary_quotes_the_same_records():
    summary = flat(REPO / "docs" / "benchmarks.md")
    launches = {lever: _launch(lever) for lever in ("shipped-cold", "shipped-warm", "lean", "agents2")}
    total = {lever: f"{s.total_s:.0f} s" for lever, (s, _) in launches.items()}
    outside1 = {lever: f"{_outside(t[1]):.1f} s" for lever, (_, t) in launches.items()}
    total_row = _ticks().table(RECORDS).strip().splitlines()[-1].split(" | ")
    for quoted in (f"{total['shipped-cold']} cold, {total['shipped-warm']} warm to \"ready to fit\"; `lean` "
                   f"{total['lean']}",
                   f"step 1 {outside1['agents2']} outside the timers against {outside1['shipped-warm']} with eight",
                   f"all {total_row[1]} generations are whole 2-second polls plus {total_row[-1].rstrip(' |')}"):
        assert quoted in summary, quoted


def test_the_poll_levers_launch_got_past_the_sampler_and_no_further_than_the_rollout_engine():
    """The one GPU launch with the poll lever, as gpu-overhead.md tells it: verl loaded the custom sampler and went
    on to the models and the rollout engine; no step was logged."""
    lines = (RECORDS / "poll-lever-h100-partial" / "poll.log").read_text(errors="replace").splitlines()
    loaded = next(i for i, line in enumerate(lines) if "sampler_cls = load_extern_type(custom_sampler.path" in line)
    assert any("'custom_sampler': {'name': 'PollReplayBuffer'" in line for line in lines[:loaded])
    after = "\n".join(lines[loaded:])
    assert "actor and ref model engine initialized" in after and "(vLLMHttpServer" in after
    assert "Traceback" not in after and not any("step:1 " in line for line in lines)
    assert "docs/bench/gpu-data/poll-lever-h100-partial/poll.log" in flat(OVERHEAD)


def test_the_warm_rollout_phase_split_is_read_from_its_console_log():
    """"Where the warm rollout phase's 64 s go": each boundary's time is a line of that console log."""
    log = (RECORDS / "startup-levers-h100-2" / "levers" / "shipped-warm" / "console-20261205T165644Z.log")
    lines = log.read_text(errors="replace").splitlines()

    def first(text: str) -> str:
        hit = next(line for line in lines if text in line)
        return hit.split("INFO:2026-12-05 ")[-1][:8] if "INFO:2026-12-05 " in hit else hit.split("INFO 12-05 ")[1][:8]

    assert first("actor and ref model engine initialized") == "16:58:00"
    assert first("Resolved architecture") == "16:58:21"
    assert first("Initializing a V1 LLM engine") == "16:58:34"
    assert first("vLLMColocateWorkerExtension'> into") == "16:58:50"
    assert first("init engine (profile, create kv cache, warmup model) took 9.21 s") == "16:59:01"
    assert first("checkpoint engine manager initialized") == "16:59:04"
    assert any("Model loading took 0.01 GiB memory and 0.202921 seconds" in line for line in lines)
    assert any("took 3.49 s in total" in line for line in lines)
    assert any("Graph capturing finished in 3 secs" in line for line in lines)
    assert any("'--distributed_executor_backend'," in line for line in lines)
    startup, _ = _launch("shipped-warm")
    assert round({p.key: p.seconds for p in startup.phases}["rollout"]) == 64
    text = flat(OVERHEAD)
    for cell in ("| 16:58:00 | 16:58:21 | 21 |", "| 16:58:21 | 16:58:34 | 13 |", "| 16:58:34 | 16:58:50 | 16 |",
                 "| 16:58:50 | 16:59:01 | 11 |"):
        assert cell in text


def test_the_recovery_records_poll_counts_are_quoted_from_the_generation_table():
    """docs/bench/gpu-reliability.md explains the resumed launches' slower steps with the generation table's
    three recovery-hopper rows: the counts it quotes are that table's."""
    ticks = _ticks()
    runs = {name: Counter(ticks.split(t)[0] for t in times)
            for name, times in ticks.records(RECORDS).items() if name.startswith("recovery-hopper/")}
    assert [dict(runs[name]) for name in sorted(runs)] == [{1: 24, 2: 8}, {1: 3, 2: 6}, {1: 4, 2: 16}]
    quoted = ("24 of the first launch's 32 timed generations waited one poll, 6 of 9 and 16 of 20 in the resumed "
              "launches waited two")
    assert quoted in flat(REPO / "docs" / "bench" / "gpu-reliability.md")


# ------------------------------------------------------------------------------------- the third lever sitting
THIRD = RECORDS / "startup-levers-h100-3"
THIRD_LEVERS = ("shipped-cold", "poll", "awake", "uni", "workers0")


def _between(text: str, marker: str) -> str:
    name = marker.split()[0]
    return text.split(f"<!-- {marker} -->\n")[1].split(f"<!-- /{name} -->")[0]


def test_the_third_sittings_tables_are_what_the_scripts_print():
    text = OVERHEAD.read_text()
    assert _between(text, "levers-table startup-levers-h100-3") == _levers_table().table(THIRD)
    assert _between(text, "levers-phases startup-levers-h100-3") == _levers_table().phases_table(THIRD)
    printed = subprocess.run([sys.executable, str(TICKS), "--faster"], capture_output=True, text=True,
                             check=True).stdout
    assert _between(text, "generation-faster-table") == printed
    # every launch on PollReplayBuffer, the PPO canary's too (its console log kept gzipped beside the metrics)
    assert [line.split(" | ")[0] for line in printed.splitlines()[2:]] == [
        "| `canary-controls-ppo-hopper-h100/control-frozen-actor/logs/seed-1/canary-ppo/metrics-20261207T143600Z.jsonl`",
        "| `canary-controls-ppo-hopper-h100/control-shuffled/logs/seed-1/canary-ppo/metrics-20261207T144010Z.jsonl`",
        "| `canary-ppo-hopper-h100/logs/canary-ppo/metrics-20261207T030712Z.jsonl`",
        "| `canary-seeds-hopper-h100/logs/seed-1/canary-grpo-lora/metrics-20261207T052713Z.jsonl`",
        "| `canary-seeds-hopper-h100-2/logs/seed-1/canary-grpo-lora/metrics-20261207T080839Z.jsonl`",
        "| `canary-seeds-hopper-h100-2/logs/seed-2/canary-grpo-lora/metrics-20261207T082020Z.jsonl`",
        "| `canary-seeds-ppo-hopper-h100/logs/seed-1/canary-ppo/metrics-20261207T112129Z.jsonl`",
        "| `canary-seeds-ppo-hopper-h100-2/logs/seed-2/canary-ppo/metrics-20261207T165542Z.jsonl`",
        "| `canary-seeds-ppo-hopper-h100-3/logs/seed-0/canary-ppo/metrics-20261207T193700Z.jsonl`",
        "| `recovery-faults-hopper-4/logs/metrics-20261206T052425Z.jsonl`",
        "| `recovery-faults-hopper-4/logs/metrics-20261206T053358Z.jsonl`",
        "| `recovery-faults-hopper-5/logs/metrics-20261206T080741Z.jsonl`",
        "| `recovery-faults-hopper-5/logs/metrics-20261206T081714Z.jsonl`",
        "| `recovery-faults-hopper-6/logs/metrics-20261206T105209Z.jsonl`",
        "| `recovery-faults-hopper-6/logs/metrics-20261206T105624Z.jsonl`",
        "| `startup-levers-h100-3/levers/poll/metrics-20261205T235037Z.jsonl`",
        "| `startup-levers-h100-4/levers/timeline/metrics-20261206T032923Z.jsonl`",
        "| `startup-levers-h100-5/levers/shipped-cold/metrics-20261206T141959Z.jsonl`",
        "| `startup-levers-h100-6/levers/profile/metrics-20261206T150647Z.jsonl`",
        "| `startup-levers-h100-7/levers/micro512/metrics-20261206T173338Z.jsonl`",
        "| `startup-levers-h100-7/levers/profile-stack/metrics-20261206T174312Z.jsonl`",
        "| `startup-levers-h100-7/levers/shipped-warm/metrics-20261206T173859Z.jsonl`",
        "| `startup-levers-h100-8/levers/nocompile/metrics-20261207T225058Z.jsonl`",
        "| `startup-levers-h200/levers/profile-stack/metrics-20261206T202117Z.jsonl`",
        "| `startup-levers-h200/levers/rows-on-host/metrics-20261206T203133Z.jsonl`",
        "| `startup-levers-h200/levers/shipped-warm/metrics-20261206T201413Z.jsonl`"]


def test_the_shipped_polls_generations_are_quoted_from_their_rows():
    """The launches with the Hopper profile as shipped (poll included) beside the `poll` lever's own: the range of
    their generations after step 1 (the --faster table's last column) and the median steps of the fifth to seventh
    reliability sittings' launches."""
    import statistics

    # the GRPO canary's launches: the PPO canary's (canary-ppo-hopper-h100) generates 256 responses a step, not 512;
    # seed 1's of canary-seeds-hopper-h100 stepped beside the second seed's start-up on the same host, and so did
    # seed 1's of canary-seeds-hopper-h100-2 for its first steps; the seed sittings' costs are read in their own
    # section of docs/bench/gpu-canary.md; the eighth sitting's `nocompile` generates without torch.compile
    shipped = {name: times for name, times in _ticks().records(RECORDS, faster=True).items()
               if "/poll/" not in name and "/canary-ppo/" not in name and not name.startswith("canary-seeds-")
               and "/nocompile/" not in name}
    after = [t for times in shipped.values() for t in times[1:]]
    medians = []
    for log in sorted(RECORDS.glob("recovery-faults-hopper-[456]/logs/metrics-*.jsonl")):
        times = [step.get("timing_s/step") for step in read_jsonl(log).steps.values()]
        medians.append(statistics.median([t for t in times if t is not None][1:]))  # the launch's first step out
    text = flat(OVERHEAD)
    assert len(shipped) == 15 and len(medians) == 6
    assert f"took {min(after):.2f}-{max(after):.2f} s against the `poll` launch's 1.41-1.52 s" in text
    assert (f"(median {min(medians):.2f}-{max(medians):.2f} s in the fifth to seventh reliability sittings' six "
            "launches") in text
    # the seventh sitting's host alone: both launches' generations after step 1 and their median steps
    seventh = [t for name, times in shipped.items() if name.startswith("recovery-faults-hopper-6/") for t in times[1:]]
    steps7 = f"{min(medians[4:]):.2f}-{max(medians[4:]):.2f} s"
    assert f"{min(seventh):.2f}-{max(seventh):.2f} s a generation and {steps7} a step" in text


def _third(lever: str):
    folder = THIRD / "levers" / lever
    console = next(folder.glob("console-*.log"))
    metrics = read_jsonl(next(folder.glob("metrics-*.jsonl")))
    return read_startup(console), _levers_table().timings(folder), console.read_text(errors="replace"), metrics.steps


def test_the_third_sitting_is_quoted_from_its_records():
    """Every figure "The third lever sitting" gives for `poll`, `uni`, `workers0` and `awake`, read from the
    launches' console logs and metrics."""
    launches = {lever: _third(lever) for lever in THIRD_LEVERS}
    text = flat(OVERHEAD)

    def span(values, digits=2):
        return f"{min(values):.{digits}f}-{max(values):.{digits}f}"

    gen = {lever: [t[n]["gen"] for n in (2, 3, 4)] for lever, (_, t, _, _) in launches.items()}
    steps34 = {lever: [f"{t[n]['step']:.2f}" for n in (3, 4)] for lever, (_, t, _, _) in launches.items()}
    on_2s = [g for lever, gs in gen.items() if lever != "poll" for g in gs]
    rollout = {lever: next(p.seconds for p in s.phases if p.key == "rollout") for lever, (s, _, _, _) in
               launches.items()}
    warm = [f"{rollout[lever]:.0f}" for lever in ("poll", "awake", "workers0")]
    uni, uni_t = launches["uni"][0], launches["uni"][1]
    corr = {lever: [m["training/rollout_actor_probs_pearson_corr"] for m in steps.values()]
            for lever, (_, _, _, steps) in launches.items()}
    others = [c for lever, cs in corr.items() if lever != "poll" for c in cs]
    sync = [launches["awake"][1][n]["update_weights"] for n in (2, 3, 4)]
    for quoted in (f"generation {span(gen['poll'])} s against {span(on_2s)} s for every launch on verl's 2-s poll",
                   f"steps 3-4 {' and '.join(steps34['poll'])} s against {' and '.join(steps34['shipped-cold'])} s",
                   f"correlation {span(corr['poll'], 5)} over its 4 steps, {span(others, 5)} over the other launches' "
                   f"{len(others)}",
                   f"the rollout phase {rollout['uni']:.0f} s against {min(warm)}-{max(warm)} s for the other warm",
                   f"{uni.total_s:.0f} s to \"ready to fit\", step 1 {uni_t[1]['step']:.1f} s** "
                   f"({_outside(uni_t[1]):.1f} s of it outside",
                   f"the weight sync {span(sync)} s against 0.16"):
        assert quoted in text, quoted
    # the worker's own process: EngineCore's first line to the worker's "Injected" line, uni against mp (poll)
    for lever, start, injected in (("uni", "23:59:21", "23:59:23"), ("poll", "23:52:17", "23:52:32")):
        lines = launches[lever][2].splitlines()
        assert any(start in line and "Initializing a V1 LLM engine" in line for line in lines), lever
        assert any(injected in line and "Injected" in line and "vLLMColocateWorkerExtension" in line
                   for line in lines), lever
        assert f"{start} -> {injected}" in text
    # the end-of-run traceback: in every launch but workers0's
    killed = {lever: "is killed by signal: Killed" in console for lever, (_, _, console, _) in launches.items()}
    assert killed == {lever: lever != "workers0" for lever in THIRD_LEVERS}



def test_the_hopper_profiles_ship_the_three_levers_as_they_were_measured():
    """`poll`, `uni` and `workers0` are on every Hopper profile with the very overrides the sitting's script gave
    its launches (`startup_levers.sh --print`), and on no other profile."""
    import yaml

    script = REPO / "benchmarks" / "gpu" / "startup_levers.sh"
    printed = subprocess.run(["bash", str(script), "--print", "shipped-warm", "poll", "uni", "workers0"],
                             capture_output=True, text=True, check=True).stdout
    baseline, *levers = [set(line.split()[1:]) for line in printed.splitlines()]
    shipped = set().union(*levers) - baseline  # each lever's own overrides, without the sitting's short-run ones
    assert len(shipped) == 5
    for path in sorted((REPO / "recipes" / "profiles").glob("*.yaml")):
        profile = yaml.safe_load(path.read_text())
        verl = {f"{key}={value}" for key, value in (profile.get("verl") or {}).items()}
        if profile["image"] == "hopper":
            assert shipped <= verl, path.name
        else:
            assert not {o.split("=")[0] for o in shipped} & {o.split("=")[0] for o in verl}, path.name


# ------------------------------------------------------------------------------------ the fourth sitting (timeline)
FOURTH = RECORDS / "startup-levers-h100-4"
TIMELINE = FOURTH / "levers" / "timeline"


def _ray_timeline():
    return script_module("benchmarks/gpu/ray_timeline.py")


def _printed(*args: str) -> str:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu" / "ray_timeline.py"), *map(str, args)],
                          capture_output=True, text=True, check=True).stdout


def test_the_fourth_sittings_tables_are_what_the_scripts_print():
    text = OVERHEAD.read_text()
    trace, metrics = TIMELINE / "ray-timeline.json.gz", next(TIMELINE.glob("metrics-*.jsonl"))
    assert _between(text, "levers-table startup-levers-h100-4") == _levers_table().table(FOURTH)
    assert _between(text, "levers-phases startup-levers-h100-4") == _levers_table().phases_table(FOURTH)
    assert _between(text, "ray-timeline-steps startup-levers-h100-4") == _printed(trace, "--steps", metrics)
    assert _between(text, "ray-timeline-startup startup-levers-h100-4") == _printed(trace, "--startup")
    assert _printed(trace, "--top", "12") in text


def test_the_fourth_sitting_is_quoted_from_its_records():
    """The shares of each phase that its worker call ran, the driver's remainder, the request waves and the
    start-up gaps that "The fourth sitting" quotes, computed from the timeline and metrics; eager's engine init from
    its `make train` output."""
    module = _ray_timeline()
    grouped = module.calls(module.load(TIMELINE / "ray-timeline.json.gz"))
    rows = module.steps_table(grouped, next(TIMELINE.glob("metrics-*.jsonl")))
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
    text = flat(OVERHEAD)

    def shares(key):
        share = [r["worker"][key] / r["driver"][key] * 100 for r in rows]
        rest = [r["driver"][key] - r["worker"][key] for r in rows]
        return f"{min(share):.0f}-{max(share):.0f} %", f"{min(rest):.2f}-{max(rest):.2f} s"

    update, old, ref, sync = (shares(k) for k in ("update_actor", "old_log_prob", "ref", "update_weights"))
    worker = [r["worker"][k] for r in rows for k in ("old_log_prob", "ref", "update_actor")]
    calls = [sum(r["worker"][k] for k in ("old_log_prob", "ref", "update_actor", "update_weights")) for r in rows]
    waves, arrivals = [r["worker"]["wave_s"] for r in rows], [r["worker"]["arrival_s"] for r in rows]
    gen = [r["driver"]["gen"] for r in rows]
    for quoted in (f"The update's method ran {update[0]} of the update phase (the driver's side: "
                   f"{update[1].removesuffix(' s')} s)",
                   f"old log-probs' {old[0]} ({old[1]}), the reference's {ref[0]} ({ref[1]}), the weight sync's "
                   f"{sync[0].replace(' %', '')} %",
                   f"in those {min(worker):.2f}-{max(worker):.2f} s for a 3.9M-parameter",
                   f"worker calls {calls[0]:.2f} s in step 1, {calls[-1]:.2f} s in step 6",
                   f"over {min(arrivals):.2f}-{max(arrivals):.2f} s a step, and the last ended "
                   f"{min(waves):.2f}-{max(waves):.2f} s after the first began; the driver's generation timer read "
                   f"{min(gen):.2f}-{max(gen):.2f} s",
                   f"{len(grouped['vLLMHttpServer.generate'])} calls for 6 steps"):
        assert quoted in text, quoted
    assert {r["worker"]["requests"] for r in rows} == {512}
    summary = flat(REPO / "docs" / "benchmarks.md")  # its row quotes the same figures
    for quoted in (f"ran {update[0]} of the update phase, {old[0]} of old log-probs, {ref[0]} of the reference "
                   f"({min(worker):.2f}-{max(worker):.2f} s each",
                   f"reach vLLM over {min(arrivals):.2f}-{max(arrivals):.2f} s"):
        assert quoted in summary, quoted
    # the start-up: vLLM's server and the actor groups' gaps, as quoted
    first = {r["name"]: r for r in module.startup(grouped)}
    server = first["vLLMHttpServer.launch_server"]
    assert f"**vLLM's server: {server['first_s']:.0f} s** (`launch_server`, {server['at_s']:.1f} -> " \
           f"{server['at_s'] + server['first_s']:.1f} s)" in text
    gaps = [("TransferQueueController.get_zmq_server_info", "TransferQueueStorageUnit#0:SimpleStorageUnit.__init__"),
            ("get_master_addr_port", "Oc73URWorkerDict_0:0:WorkerDict.__init__"),
            ("WorkerDict.__ray_call__", "reward_loop_worker_2:RewardLoopWorker.__init__"),
            ("reward_loop_worker_6:RewardLoopWorker.__init__", "vllm_server_0_0:vLLMHttpServer.__init__")]
    for before, after in gaps:
        a, b = first[before]["at_s"], first[after]["at_s"]
        assert f"{b - a:.0f} s ({a:.1f} -> {b:.1f})" in text, (before, after)
    assert f"waited {first['GlobalRequestLoadBalancer.__init__']['waited_for_arguments_s']:.1f} s more" in text
    assert f"`actor_rollout_init_model` {first['WorkerDict.actor_rollout_init_model']['first_s']:.1f} s" in text
    # eager: the engine's init, from its make output, against the timeline launch's console
    eager = (FOURTH / "eager.log").read_text(errors="replace")
    cold = next(TIMELINE.glob("console-*.log")).read_text(errors="replace")
    assert "init engine (profile, create kv cache, warmup model) took 2.28 s" in eager
    assert "init engine (profile, create kv cache, warmup model) took 38.94 s (compilation: 14.73 s)" in cold
    assert "enforce_eager': True" in eager and "step:1 " not in eager
    startup = read_startup(FOURTH / "eager.log")
    assert not startup.from_launch and startup.start == "ray"  # no launch stamp in its name: timed from Ray on
    phases = {p.key: p.seconds for p in startup.phases}
    assert f"its rollout phase {phases['rollout']:.1f} s from Ray (datasets {phases['datasets']:.1f}, models " \
           f"{phases['models']:.1f}" in text


# --------------------------------------------------------------------------- the fifth sitting (a profiled step)
FIFTH = (RECORDS / "startup-levers-h100-5", RECORDS / "startup-levers-h100-6")
PROFILED = FIFTH[1] / "levers" / "profile"


def _torch_trace():
    return script_module("benchmarks/gpu/torch_trace.py")


def test_the_fifth_sittings_tables_are_what_the_scripts_print():
    text = OVERHEAD.read_text()
    for sitting in FIFTH:
        assert _between(text, f"levers-table {sitting.name}") == _levers_table().table(sitting)
        assert _between(text, f"levers-phases {sitting.name}") == _levers_table().phases_table(sitting)


def test_the_profiled_step_is_quoted_from_its_trace_and_metrics():
    """"The fifth sitting" quotes each stage of step 4 on the worker (wall, GPU kernels, operators, the time between
    them, each micro batch) from the trace's slim copy, the driver's phases from the launch's metrics, and what
    lies outside the worker's stages as their difference -- none typed by hand."""
    module = _torch_trace()
    events = module.load(next(PROFILED.glob("*.slim.json.gz")))
    rows = module.stages(events)
    window = module.window(events)
    timings = _levers_table().timings(PROFILED)  # each step's verl timers, as the sitting's tables read them
    step4 = timings[4]
    text = flat(OVERHEAD)
    stages = [r for r in rows if r["stage"] in ("actor_compute_log_prob", "actor_update")]
    assert [r["stage"] for r in stages] == ["actor_compute_log_prob", "actor_compute_log_prob", "actor_update"]
    micro = [r for r in rows if r["stage"].startswith("micro_batch")]
    assert len(micro) == 8  # 2 + 2 + 4 passes
    for stage, phase, batches in zip(stages, ("old_log_prob", "ref", "update_actor"), ((0, 2), (2, 4), (4, 8))):
        mine = micro[slice(*batches)]
        row = (f"| {step4[phase]:.2f} | {stage['wall_s']:.3f} | {stage['gpu_s']:.3f} | {stage['cpu_ops_s']:.3f} | "
               f"{stage['outside_ops_s']:.3f} |")
        assert row in text, row
        label = {"old_log_prob": "old log-probs'", "ref": "reference's", "update_actor": "update's"}[phase]
        outside_stage = f"{step4[phase] - stage['wall_s']:.2f} s of the {label} {step4[phase]:.2f} s"
        assert outside_stage in text, outside_stage
        if phase != "update_actor":
            assert ", ".join(f"{m['wall_s']:.3f} ({m['gpu_s']:.3f})" for m in mine) in text
        else:
            assert ", ".join(f"{m['wall_s']:.3f}" for m in mine) + f" ({mine[0]['gpu_s']:.3f} each)" in text
            assert len({round(m["gpu_s"], 3) for m in mine}) == 1
    gpu = sum(s["gpu_s"] for s in stages)
    driver = step4["old_log_prob"] + step4["ref"] + step4["update_actor"]
    assert f"is {gpu:.3f} s" in text and f"of the {driver:.1f} s the driver" in text
    walls, kernels = [m["wall_s"] for m in micro], [m["gpu_s"] for m in micro]
    assert f"{min(walls):.2f}-{max(walls):.2f} s of CPU for {min(kernels) * 1e3:.0f}-{max(kernels) * 1e3:.0f} ms" \
        in text
    ops, between = [m["cpu_ops_s"] for m in micro], [m["outside_ops_s"] for m in micro]
    assert f"{min(ops):.3f}-{max(ops):.3f} s are torch operators" in text
    assert f"{min(between):.2f}-{max(between):.2f} s lie between them" in text
    assert f"spans {window['span_s']:.2f} s" in text and f"operator in {window['stages_s']:.2f} s of it" in text
    assert [w["stage"] for w in window["stages"]] == [s["stage"] for s in stages]
    summary = flat(REPO / "docs" / "benchmarks.md")  # its row quotes the same figures
    assert f"GPU kernels {gpu:.3f} s of the {driver:.1f} s" in summary
    assert f"ran torch {window['stages_s']:.2f} of the {window['span_s']:.2f} s" in summary
    assert f"{min(walls):.2f}-{max(walls):.2f} s of CPU for" in summary
    # the neighbouring steps' phases, and step 4's seconds outside verl's timers (the profiler writing its trace)
    others = [timings[n] for n in (2, 3, 5)]
    for phase in ("old_log_prob", "ref", "update_actor"):
        values = [o[phase] for o in others]
        assert f"{min(values):.2f}-{max(values):.2f}" in text, phase
    outside = step4["step"] - sum(v for k, v in step4.items() if k != "step")
    assert f"Step 4 took {step4['step']:.2f} s with the profiler** against {others[1]['step']:.2f} and " \
           f"{others[2]['step']:.2f} s for steps 3 and 5: about {outside:.1f} s outside" in text


def test_the_slim_trace_keeps_the_full_traces_figures_for_the_main_threads_stages():
    """The full trace's reading, made on the GPU host (torch-trace.txt), gives the same figures for the worker's
    stages and micro batches as the slim copy kept in the repository."""
    module = _torch_trace()
    host = (FIFTH[1] / "torch-trace.txt").read_text()
    for row in module.stages(module.load(next(PROFILED.glob("*.slim.json.gz")))):
        if row["stage"] in ("actor_compute_log_prob", "actor_update", "mini_batch0") or \
                row["stage"].startswith("micro_batch"):
            line = (f"{row['stage']}: {row['wall_s']:.3f} s wall, GPU kernels {row['gpu_s']:.3f} s, "
                    f"outermost CPU operators {row['cpu_ops_s']:.3f} s, outside any operator {row['outside_ops_s']:.3f} s")
            assert line in host, line


def _start_ups(sitting: Path, levers: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """Each launch's seconds to "ready to fit" and its rollout engine's, as the records' tables print them."""
    startups = {lever: read_startup(next((sitting / "levers" / lever).glob("console-*.log"))) for lever in levers}
    assert all(s.complete and s.from_launch for s in startups.values())
    total = {lever: f"{s.total_s:.0f}" for lever, s in startups.items()}
    rollout = {lever: f"{p.seconds:.0f}" for lever, s in startups.items() for p in s.phases if p.key == "rollout"}
    return total, rollout


def _sitting_tables(sitting: Path, launches: list[str]) -> None:
    """The sitting's two tables in the record are what levers_table.py prints, its launches labelled in order."""
    text, module = OVERHEAD.read_text(), _levers_table()
    table = module.table(sitting)
    assert _between(text, f"levers-table {sitting.name}") == table
    assert _between(text, f"levers-phases {sitting.name}") == module.phases_table(sitting)
    assert [line.split(" | ")[0] for line in table.splitlines()[2:]] == [f"| {label}" for label in launches]


# --------------------------------------------------------------------------- the sixth sitting (one micro batch a pass)
SIXTH = RECORDS / "startup-levers-h100-7"


def test_the_sixth_sittings_tables_are_what_the_script_prints_and_name_each_launchs_place():
    """The tables are the script's; the host's first launch is named so whatever its lever, and `shipped-warm` is
    "the same command again" only right after `shipped-cold` (here it followed `micro512`)."""
    _sitting_tables(SIXTH, ["`micro512`, the host's first", "`shipped-warm`, as shipped, on the warm host",
                            "`profile-stack`"])
    module = _levers_table()
    assert module.label("shipped-warm", ["shipped-cold"]) == ", the same command again"
    assert module.label("timeline", []) == ", the host's first" and module.label("poll", ["shipped-cold"]) == ""


def test_the_micro_batch_lever_is_quoted_from_its_metrics():
    """"The sixth sitting": the three training phases, the steps, the agreement and the trainer peak of `micro512`
    against the profile as shipped on the same host, each range read from the two launches' metrics."""
    module = _levers_table()
    steps, metrics = {}, {}
    for lever in ("micro512", "shipped-warm"):
        timing = module.timings(SIXTH / "levers" / lever)
        assert sorted(timing) == [1, 2, 3, 4, 5], lever
        steps[lever] = [timing[n] for n in (2, 3, 4, 5)]
        metrics[lever] = list(read_jsonl(next((SIXTH / "levers" / lever).glob("metrics-*.jsonl"))).steps.values())

    def span(values, digits=2) -> str:  # min-max as the sitting's phase table prints them
        return module._span(values, digits, unit="")

    three = {lever: span([t["old_log_prob"] + t["ref"] + t["update_actor"] for t in rows])
             for lever, rows in steps.items()}
    step = {lever: span([t["step"] for t in rows]) for lever, rows in steps.items()}
    corr = {lever: span([m["training/rollout_actor_probs_pearson_corr"] for m in rows], 4)
            for lever, rows in metrics.items()}
    diff = {lever: span([m["training/rollout_probs_diff_mean"] for m in rows], 4) for lever, rows in metrics.items()}
    peak = {lever: f"{max(m['actor/perf/max_memory_allocated_gb'] for m in rows):.2f}"
            for lever, rows in metrics.items()}
    old = {lever: [t["old_log_prob"] for t in rows] for lever, rows in steps.items()}
    text = flat(OVERHEAD)
    for quoted in (f"took {three['micro512']} s a step with `micro512` against {three['shipped-warm']} s as shipped",
                   f"the whole step {step['micro512']} s against {step['shipped-warm']} s",
                   f"(Pearson {corr['micro512']}, mean |dp| {diff['micro512']}) is that of the launch as shipped "
                   f"({corr['shipped-warm']}, {diff['shipped-warm'].split('-')[0]})",
                   f"Its trainer peak is {peak['micro512']} GiB against {peak['shipped-warm']} GiB",
                   f"by {max(old['shipped-warm']) - min(old['shipped-warm']):.1f} s as shipped (old log-probs "
                   f"{span(old['shipped-warm'])} s) and {max(old['micro512']) - min(old['micro512']):.1f} s with "
                   f"`micro512` ({span(old['micro512'])} s)"):
        assert quoted in text, quoted
    assert len(set(diff["shipped-warm"].split("-"))) == 1  # quoted once: the same at every step
    # the shipped launch's steps against the fifth sitting's two hosts (the profiled step 4 left out)
    fifth = [t["step"] for folder in (RECORDS / "startup-levers-h100-5" / "levers" / "shipped-cold",
                                      RECORDS / "startup-levers-h100-6" / "levers" / "profile")
             for n, t in module.timings(folder).items() if n > 1 and not (folder.name == "profile" and n == 4)]
    assert f"2-5 as shipped {step['shipped-warm']} s against {span(fifth)} s, the profiled step left out" in text
    summary = flat(REPO / "docs" / "benchmarks.md")  # its row quotes the same figures
    assert f"the three training phases {three['micro512']} s a step with `micro512` against " \
           f"{three['shipped-warm']} s as shipped, steps {step['micro512']} s against {step['shipped-warm']} s" \
           in summary
    assert f"(Pearson {corr['micro512']}); trainer peak {peak['micro512']} against {peak['shipped-warm']} GiB" \
           in summary


def test_the_sixth_sittings_start_ups_are_quoted_from_its_console_logs():
    total, rollout = _start_ups(SIXTH, ("micro512", "shipped-warm", "profile-stack"))
    text = flat(OVERHEAD)
    for quoted in (f"**The start-up, as shipped: {total['shipped-warm']} s to \"ready to fit\" on the warm host** "
                   f"(rollout engine {rollout['shipped-warm']} s), and `micro512`'s {total['micro512']} s (rollout "
                   f"engine {rollout['micro512']} s) as the host's first launch; `profile-stack`, the third launch, "
                   f"{total['profile-stack']} s",
                   f"`-7`'s `shipped-warm` and `profile-stack` ({total['shipped-warm']} and "
                   f"{total['profile-stack']} s"):
        assert quoted in text, quoted
    assert f"start-up {total['shipped-warm']} s warm as shipped" in flat(REPO / "docs" / "benchmarks.md")
    # profile-stack was cut short by the end of the GPU time: step 2 logged, the profiled step 4 not reached
    assert sorted(_levers_table().timings(SIXTH / "levers" / "profile-stack")) == [1, 2]
    assert not list((SIXTH / "levers" / "profile-stack").glob("*.json.gz"))


def test_the_stretch_without_an_operator_is_quoted_from_the_slim_trace():
    """The sixth sitting's reading of the fifth's trace: in every pass the longest stretch without an operator on
    the worker's main thread sits between the copy to the GPU (`aten::to`) and `aten::empty`; its seconds a row,
    and the update passes' backward stretch with autograd's thread busy in it -- read from the slim copy."""
    module = _torch_trace()
    events = module.load(next(PROFILED.glob("*.slim.json.gz")))
    micro = [r for r in module.stages(events) if r["stage"].startswith("micro_batch")]
    marks = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("micro_batch")),
                   key=lambda e: e["ts"])
    forward, update = micro[:4], micro[4:]
    copy = [r["gaps"][0] for r in forward] + [r["gaps"][1] for r in update]
    assert all((g["after"], g["before"]) == ("aten::to", "aten::empty") and g["at_s"] < 0.011 for g in copy), copy
    rows = [256] * 4 + [128] * 4  # the log-prob passes' micro batches, then the update's
    per_row = [g["s"] / n * 1e3 for g, n in zip(copy, rows)]
    backward = [r["gaps"][0] for r in update]
    assert all((g["after"], g["before"]) == ("aten::ones_like", "(end)") for g in backward)
    busy = []
    for gap, mark in zip(backward, marks[4:]):
        start = mark["ts"] + gap["at_s"] * 1e6
        end = start + gap["s"] * 1e6
        others = [o for o in events if o.get("cat") == "cpu_op" and o["tid"] != mark["tid"] and o["ts"] < end
                  and o["ts"] + o["dur"] > start]
        busy.append(sum(min(o["ts"] + o["dur"], end) - max(o["ts"], start) for o in others) / 1e6)

    def span(values, digits=3) -> str:  # min-max, as levers_table.py writes a range
        return _levers_table()._span(values, digits, unit="")

    text = flat(OVERHEAD)
    for quoted in (f"It lasts {span([g['s'] for g in copy[:4]])} s in each log-prob pass of 256 rows and "
                   f"{span([g['s'] for g in copy[4:]])} s in each update pass of 128 rows: {span(per_row, 2)} ms a "
                   f"row, {sum(g['s'] for g in copy):.2f} s of the profiled step",
                   f"the pass's end, is the backward: autograd's own thread runs operators for {span(busy)} s of it",
                   f"The update passes' other long stretch, {span([g['s'] for g in backward])} s"):
        assert quoted in text, quoted
    assert f"grows with its rows ({span(per_row, 2)} ms a row" in flat(REPO / "docs" / "benchmarks.md")


# ------------------------------------------------------------ the seventh sitting (the per-row fields stay on the host)
SEVENTH = RECORDS / "startup-levers-h200"


def test_the_seventh_sittings_tables_are_what_the_script_prints():
    _sitting_tables(SEVENTH, ["`shipped-warm`, the host's first", "`profile-stack`", "`rows-on-host`"])
    # the lever's launch had the edit in (its status line), and its engine was built before it was taken out
    assert (SEVENTH / "levers" / "rows-on-host" / "verl-trial.txt").read_text().startswith("PATCHED ")
    console = next((SEVENTH / "levers" / "rows-on-host").glob("console-*.log")).read_text(errors="replace")
    assert "2026-12-06 20:33:03,954:actor and ref model engine initialized" in console


def test_the_rows_on_host_lever_is_quoted_from_its_metrics():
    """"The seventh sitting": the three training phases, each phase, the steps, the agreement and the trainer peak
    of `rows-on-host` against the profile as shipped on the same host (`shipped-warm`'s steps 2-8 and
    `profile-stack`'s unprofiled 2, 3 and 5), each range read from the launches' metrics."""
    module = _levers_table()
    keep = {"shipped-warm": range(2, 9), "profile-stack": (2, 3, 5), "rows-on-host": range(2, 7)}
    steps, metrics = {}, {}
    for lever, wanted in keep.items():
        timing = module.timings(SEVENTH / "levers" / lever)
        assert set(wanted) <= set(timing), lever
        steps[lever] = [timing[n] for n in wanted]
        recorded = read_jsonl(next((SEVENTH / "levers" / lever).glob("metrics-*.jsonl"))).steps
        metrics[lever] = [recorded[n] for n in wanted]

    def span(values, digits=2) -> str:
        return module._span(values, digits, unit="")

    three = {lever: [t["old_log_prob"] + t["ref"] + t["update_actor"] for t in rows] for lever, rows in steps.items()}
    phase = {(lever, key): span([t[key] for t in rows]) for lever, rows in steps.items()
             for key in ("old_log_prob", "ref", "update_actor", "step")}
    corr = {lever: span([m["training/rollout_actor_probs_pearson_corr"] for m in rows], 4)
            for lever, rows in metrics.items()}
    diff = {lever: span([m["training/rollout_probs_diff_mean"] for m in rows], 4) for lever, rows in metrics.items()}
    peak = {lever: {f"{m['actor/perf/max_memory_allocated_gb']:.2f}" for m in rows} for lever, rows in metrics.items()}
    lever, shipped, stack = "rows-on-host", "shipped-warm", "profile-stack"
    # no step with the edit as slow as any of the ten without it
    assert max(three[lever]) < min(three[shipped] + three[stack]) and len(three[shipped] + three[stack]) == 10
    text = flat(OVERHEAD)
    for quoted in (f"took {span(three[lever])} s a step together with `rows-on-host` (steps 2-6) against "
                   f"{span(three[shipped])} s as shipped (`shipped-warm`, steps 2-8) and {span(three[stack])} s in "
                   "`profile-stack`'s steps 2, 3 and 5",
                   f"old log-probs {phase[lever, 'old_log_prob']} s against {phase[shipped, 'old_log_prob']} s, "
                   f"reference {phase[lever, 'ref']} s against {phase[shipped, 'ref']} s, update "
                   f"{phase[lever, 'update_actor']} s against {phase[shipped, 'update_actor']} s",
                   f"Whole steps took {phase[lever, 'step']} s against {phase[shipped, 'step']} s",
                   f"Pearson {corr[lever]} and mean |dp| {diff[lever]} with the edit, {corr[shipped]} and "
                   f"{diff[shipped]} as shipped; trainer peak {peak[lever].pop()} GiB in both",
                   f"6.15-8.10 s a steady step on this host"):
        assert quoted in text, quoted
    assert peak[lever] == set() and peak[shipped] == {"2.08"}
    assert phase[lever, "step"] == "6.15-8.10"
    gain = statistics.mean(three[shipped]) - statistics.mean(three[lever])
    assert f"about {gain:.1f} s a step, the two launches' mean steady steps" in text
    summary = flat(REPO / "docs" / "benchmarks.md")
    assert (f"the three training phases {span(three[lever])} s a step with `rows-on-host` against "
            f"{span(three[shipped])} s as shipped ({span(three[stack])} s in `profile-stack`'s unprofiled steps), "
            f"steps {phase[lever, 'step']} s against {phase[shipped, 'step']} s") in summary
    assert f"(Pearson {corr[lever]}); trainer peak 2.08 GiB in both" in summary
    # the README and the edit's own docstring quote the lever against all ten steps without it
    ten = f"{span(three[lever])} s a step with it against {span(three[shipped] + three[stack])} s without"
    assert f"as any of the ten without it ({span(three[shipped] + three[stack])} s)" in text
    assert ten in flat(REPO / "README.md") and ten in flat(REPO / "scripts" / "patch_verl.py")


def test_the_seventh_sittings_start_ups_and_copy_times_are_quoted_from_their_records():
    total, rollout = _start_ups(SEVENTH, ("shipped-warm", "profile-stack", "rows-on-host"))
    text = flat(OVERHEAD)
    assert (f"{total['shipped-warm']} s as shipped as the host's first launch (rollout engine "
            f"{rollout['shipped-warm']} s), `profile-stack` {total['profile-stack']} s and `rows-on-host` "
            f"{total['rows-on-host']} s on the warm host") in text
    assert (f"`startup-levers-h200`'s `profile-stack` and `rows-on-host` ({total['profile-stack']} and "
            f"{total['rows-on-host']} s)") in text
    # rows_copy.py's lines: two processes with the edit, one without; the first of each size's five calls out
    runs = [json.loads(line) for line in (SEVENTH / "rows-copy.txt").read_text().splitlines() if line.startswith("{")]
    assert [r["edit"] for r in runs] == [True, True, False]

    def ms(edit: bool, rows: str, outlier: float | None = None) -> str:
        values = [v for r in runs if r["edit"] is edit for v in r[rows][1:] if v != outlier]
        digits = 1 if edit else 0  # as the record quotes them: tenths with the edit, whole ms without
        return f"{min(values):.{digits}f}-{max(values):.{digits}f}"

    released = [v for r in runs if not r["edit"] for v in r["128"][1:]]
    outlier = max(released)
    assert (f"{ms(False, '128', outlier)} ms for 128 rows (one outlier {outlier:.0f} ms), {ms(False, '256')} ms for "
            f"256 and {ms(False, '512')} ms for 512 as released, against {ms(True, '128')}, {ms(True, '256')} and "
            f"{ms(True, '512')} ms with the edit") in text
    first = max(v for r in runs for size in ("128", "256", "512") for v in r[size][:1])
    assert f"out: up to {first:.0f} ms" in text


def test_the_stack_traces_stretch_is_quoted_from_its_slim_copy():
    """`profile-stack`'s step 4: in every pass the longest stretch without an operator is the one after the copy to
    the GPU, before the first tensor of `prepare_model_inputs` -- the line the rows-on-host edit changes."""
    module = _torch_trace()
    folder = SEVENTH / "levers" / "profile-stack"
    micro = [r for r in module.stages(module.load(next(folder.glob("*.slim.json.gz"))))
             if r["stage"].startswith("micro_batch")]
    assert len(micro) == 8  # two old-log-prob passes, two reference passes, four update passes
    copy = [r["gaps"][0] for r in micro]
    assert all((g["after"], g["before"]) == ("aten::to", "aten::empty") for g in copy), copy

    def span(gaps) -> str:
        return _levers_table()._span([g["s"] for g in gaps], 2, unit="")

    assert (f"{span(copy[:2])} s after `aten::to` and before `aten::empty` in each old-log-prob pass of 256 rows, "
            f"{span(copy[2:4])} s in each reference pass, {span(copy[4:]).split('-')[0]} s in each update pass of "
            "128 rows") in flat(OVERHEAD)
    assert len({f"{g['s']:.2f}" for g in copy[4:]}) == 1  # quoted once: the same in all four


# ------------------------------------------------------------------- the eighth sitting (vLLM without torch.compile)
EIGHTH = RECORDS / "startup-levers-h100-8"
# every launch on record with vLLM's INFO lines that was its host's first (torch.compile on): the rest came after
# another launch on the same host, with its compile caches under CACHE_DIR
FIRST_LAUNCHES = [("startup-levers-h100-2", "shipped-cold"), ("startup-levers-h100-3", "shipped-cold"),
                  ("startup-levers-h100-4", "timeline"), ("startup-levers-h100-5", "shipped-cold"),
                  ("startup-levers-h100-6", "profile"), ("startup-levers-h100-7", "micro512"),
                  ("startup-levers-h200", "shipped-warm")]


def test_the_eighth_sitting_is_quoted_from_its_records():
    """"The eighth sitting": its tables, each first and later launch's engine init split as the record quotes it
    (every launch on record that logged vLLM at INFO, sorted into first and later launches on a host), and
    `nocompile`'s own figures, read from its console log and metrics."""
    _sitting_tables(EIGHTH, ["`nocompile`, the host's first"])
    launches = {(log.parts[-4], log.parts[-2]): read_startup(log).engines
                for log in sorted(RECORDS.glob("*/levers/*/console-*.log"))}
    # one engine a launch (one GPU), where vLLM logged at INFO
    engines = {key: found[0] for key, found in launches.items() if found}
    assert len(engines) == 20 and all(len(found) == 1 for found in launches.values() if found)
    nocompile = engines.pop(("startup-levers-h100-8", "nocompile"))
    first = [engines.pop(key) for key in FIRST_LAUNCHES]
    later = list(engines.values())

    def span(values, digits=2) -> str:
        return f"{min(values):.{digits}f}-{max(values):.{digits}f}"

    def rest(group):
        return [e.init_s - e.compile_s - e.graphs_s for e in group]

    text = flat(OVERHEAD)
    for quoted in (
            f"A host's first launch spends {span([e.init_s for e in first])} s in vLLM's engine init, a later launch "
            f"on the same host {span([e.init_s for e in later])} s.",
            f"compiling {span([e.compile_s for e in first])} s, capturing graphs {span([e.graphs_s for e in first], 0)} s",
            f"compiling {span([e.compile_s for e in later])} s, capturing {span([e.graphs_s for e in later], 0)} s",
            f"took {span(rest(first), 1)} s on a first launch and {span(rest(later), 1)} s on a later one",
            f"took {nocompile.init_s:.2f} s as the host's first launch",
            f"{nocompile.graphs_s:.0f} s capturing the decode graphs",
            f"about {nocompile.init_s - nocompile.graphs_s:.0f} s for the rest",
            f"that is {min(e.init_s for e in first) - nocompile.init_s:.0f}-"
            f"{max(e.init_s for e in first) - nocompile.init_s:.0f} s less",
            f"the engine at {span([e.init_s for e in later])} s",
            f"The engine's compile and graphs are {min(e.compile_s + e.graphs_s for e in later):.0f}-"
            f"{max(e.compile_s + e.graphs_s for e in later):.0f} s of a warm launch's"):
        assert quoted in text, quoted
    assert nocompile.compile_s is None
    console = next((EIGHTH / "levers" / "nocompile").glob("console-*.log")).read_text(errors="replace")
    assert "Profiling CUDA graph memory: FULL=70 (largest=256)" in console
    assert "'cudagraph_mode': 'FULL_DECODE_ONLY'" in console
    # its steps, agreement and peak; the shipped generations it is set against (other H100 hosts)
    timing = _levers_table().timings(EIGHTH / "levers" / "nocompile")
    steps = read_jsonl(next((EIGHTH / "levers" / "nocompile").glob("metrics-*.jsonl"))).steps
    gen = span([timing[n]["gen"] for n in (2, 3)])
    corr = {f"{steps[n]['training/rollout_actor_probs_pearson_corr']:.4f}" for n in (1, 2, 3)}
    diff = {f"{steps[n]['training/rollout_probs_diff_mean']:.4f}" for n in (1, 2, 3)}
    assert f"{gen} s in steps 2-3" in text and corr == {"0.9997"} and diff == {"0.0007"}
    assert f"steps {span([timing[n]['step'] for n in (2, 3)])} s (2.5 s)" in text
    assert f"{max(s['actor/perf/max_memory_allocated_gb'] for s in steps.values()):.2f} GiB" == "2.08 GiB"
    # each reliability sitting's first launch (its metrics file sorts first: the name is the launch's stamp)
    firsts = [min(folder.glob("metrics-*.jsonl")) for folder in sorted(RECORDS.glob("recovery-faults-hopper-[456]/logs"))]
    reliability = [step["timing_s/gen"] for log in firsts for n, step in read_jsonl(log).steps.items()
                   if 2 <= n <= 6 and "timing_s/gen" in step]
    sixth = [_levers_table().timings(SIXTH / "levers" / "shipped-warm")[n]["gen"] for n in (2, 3, 4, 5)]
    assert (f"against {span(reliability)} s for the profile as shipped on other H100 hosts (the fifth to seventh "
            f"reliability sittings' first launches, steps 2-6) and {span(sixth)} s on the sixth sitting's host") in text
    total, rollout = _start_ups(EIGHTH, ("nocompile",))
    assert f"`nocompile`'s rollout phase took {rollout['nocompile']} s" in text
    assert f"`nocompile`'s launch took {total['nocompile']} s to \"ready to fit\"" in text
