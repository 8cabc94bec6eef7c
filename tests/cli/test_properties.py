"""Property suite: any arguments and input files end with exit 0, 1, 2 or 3 and no traceback, and no
command deletes or changes a file it was not asked to write.

Hypothesis draws a command, then its arguments from the command's own parser (flags, choices) and from a
pool of hostile values: paths to files, directories, a verl checkpoint run, /proc, /; NaN, infinity,
negative, huge and non-numeric numbers; Hydra overrides with bad values; shell metacharacters and
newlines. Input files (metrics logs, status files, GPU inventories, generations to score) get random
content too. Every command runs in-process in a sandbox (its own RLRECIPES_HOME, CKPT_DIR, offline hub,
a verl interpreter that is not one), so nothing reaches the network, a GPU or the repository.

The stages that train or evaluate (smoke, eval with a real model) are left out: they are covered by their
own tests; their argument errors are not.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import math
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlrecipes.cli import COMMANDS, _command_parser, main
from rlrecipes.watchdog.simulate import save_checkpoint

# one xdist worker runs this module: its module fixtures are built once (tests/conftest.py)
pytestmark = pytest.mark.xdist_group("cli/test_properties")

REPO = Path(__file__).resolve().parents[2]
ALLOWED = {0, 1, 2, 3}
SKIPPED = {"smoke"}  # trains on a GPU for minutes; its argument errors are in the unit tests
EXAMPLES = int(os.environ.get("RLRECIPES_PROPERTY_EXAMPLES", "60"))


# -- the sandbox ------------------------------------------------------------------------------------

def _tree(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and ".watchdog" not in path.parts:
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    box = tmp_path_factory.mktemp("props")
    home = box / "home"
    shutil.copytree(REPO / "recipes", home / "recipes")
    shutil.copytree(REPO / "docker", home / "docker", ignore=shutil.ignore_patterns("*.whl"))
    shutil.copytree(REPO / "deploy", home / "deploy")
    (box / "afile").write_text("a file\n")
    shutil.copytree(REPO / "tests" / "fixtures" / "gsm8k", box / "gsm8k-src")
    (box / "adir").mkdir()
    (box / "logs").mkdir()
    (box / "logs" / "metrics-20260101T000000Z.jsonl").write_text(
        '{"step": 1, "data": {"critic/score/mean": 0.5}}\n{"step": 2, "data": {"critic/score/mean": 0.7}}\n')
    # The precious tree: a verl run with one complete checkpoint and a user's notes. No command may
    # delete or change any of it (the watchdog keeps the newest complete checkpoint; merge is fenced).
    precious = box / "precious"
    run = precious / "run"
    save_checkpoint(run, 2)
    (run / "global_step_2" / "actor" / "huggingface" / "config.json").write_text('{"model_type": "qwen2"}')
    (run / "notes.txt").write_text("do not delete\n")
    (precious / "thesis.tex").write_text("years of work\n")
    old = os.time_ns() if hasattr(os, "time_ns") else 0
    for path in [precious, *precious.rglob("*")]:
        os.utime(path, ns=(old - 10**13, old - 10**13), follow_symlinks=False)  # quiet for hours
    fake_python = box / "not-verl-python"
    fake_python.write_text("#!/bin/sh\nexit 1\n")
    fake_python.chmod(0o755)
    return {"box": box, "home": home, "precious": precious, "before": _tree(precious), "python": fake_python}


@pytest.fixture
def env(sandbox, monkeypatch):
    box = sandbox["box"]
    monkeypatch.chdir(box)
    monkeypatch.setenv("RLRECIPES_HOME", str(sandbox["home"]))
    for var in ("CKPT_DIR", "LOG_DIR", "DATA_DIR", "MODELS_DIR", "RAY_ADDRESS", "WANDB_API_KEY", "RLRECIPES_DEBUG"):
        monkeypatch.delenv(var, raising=False)
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(key, "1")
    monkeypatch.setenv("HF_HOME", str(box / "hf"))
    # Libraries imported by earlier tests read these variables at import: set their constants too.
    import sys as _sys

    if "huggingface_hub" in _sys.modules:
        monkeypatch.setattr(_sys.modules["huggingface_hub"].constants, "HF_HUB_OFFLINE", True)
    if "datasets" in _sys.modules:
        monkeypatch.setattr(_sys.modules["datasets"].config, "HF_DATASETS_OFFLINE", True, raising=False)
        monkeypatch.setattr(_sys.modules["datasets"].config, "HF_HUB_OFFLINE", True, raising=False)
    for version in ("0.5.0", "0.8.0", "0.9.1"):
        monkeypatch.setenv(f"RLRECIPES_VERL_{version.replace('.', '_')}_PYTHON", str(sandbox["python"]))
    return sandbox


# -- values -----------------------------------------------------------------------------------------

NUMBERS = ["0", "-1", "1", "2", "nan", "inf", "-inf", "1e309", "99999", "65536", "3.5", "0x10", "1_000", "-0",
           "1e3", "", " ", "abc", "9" * 40]
PATHS = ["afile", "adir", "adir/new", "afile/under", "missing/deep/path", "logs", "precious", "precious/run",
         "precious/run/global_step_2", "precious/run/global_step_2/actor", "precious/run/merged", "/", "/proc",
         "/proc/self/status", "/proc/x", "/dev/null", "", ".", "..", "status.json", "inventory.json", "gens.jsonl"]
OVERRIDES = ["trainer.total_epochs=abc", "trainer.total_epochs=0", "trainer.total_epochs=1000000000000",
             "trainer.save_freq=0", "trainer.totl_epochs=3", "data.train_batch_size=0", "+x.y=1", "~trainer.logger",
             "actor_rollout_ref.actor.optim.lr=nan", "trainer.total_epochs=${trainer.total_epochs}",
             "trainer.project_name='$(touch PWNED)'", "data.max_response_length=-5", "key", "=", "a=b=c",
             "trainer.total_epochs=[1,2]", "trainer.total_epochs={a:1}", "trainer.n_gpus_per_node=1e3"]
NAMES = ["smoke-ppo", "smoke-grpo-lora", "qwen2.5-0.5b-gsm8k-ppo", "qwen2.5-3b-gsm8k-grpo-lora", "../x", "/etc/passwd",
         "profiles/a100-80gb", "a100-80gb", "p40-24gb", "any-1gpu", "nope", "gsm8k", "tiny", "ray=/tmp", "x=/proc",
         "hf-cache=afile", "a\nb", "$(touch PWNED)", "ü", "--", "-", "latest", "bash"]
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
VALUE = st.one_of(st.sampled_from(NUMBERS + PATHS + OVERRIDES + NAMES), TEXT,
                  st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers().map(str))


RECIPE_NAMES = ["smoke-ppo", "smoke-grpo-lora", "qwen2.5-0.5b-gsm8k-ppo", "qwen2.5-3b-gsm8k-grpo-lora"]
# Values an option most likely wants, by its dest: drawn half of the time, so the commands get past
# argument parsing and the hostile values reach the code behind it.
LIKELY = {
    "recipe": RECIPE_NAMES, "profile": ["a100-80gb", "p40-24gb", "any-1gpu", "h200-141gb", "../x"],
    "out": ["out", "adir", "afile", "/proc/x", "precious", "precious/run", "precious/run/merged", "precious/new"],
    "root": ["precious", "adir", "afile", "/", "missing"], "status": ["status.json", "adir", "afile"],
    "run_dir": ["precious/run", "precious/run/global_step_2", "adir"], "source": ["gsm8k-src", "afile", "adir"],
    "gpu_inventory": ["inventory.json", "adir", "afile"], "env_file": ["envfile", "adir", "/proc/x"],
    "log_dir": ["logs", "adir"], "files": ["gens.jsonl", "afile", "adir"], "model": ["adir", "precious/run"],
    "assets": ["adir"], "interval": NUMBERS, "grace": NUMBERS, "max_age": NUMBERS, "metrics_port": NUMBERS,
    "keep_last": ["1", "2", "0", "-1", "nan"], "keep_every": ["2", "0", "abc"],
    "quota": ["1G", "0", "-1G", "12X", "1e9", "nan"], "min_free": ["1G", "nan", "0"],
    "watch": ["ray=/tmp/nope", "x=/proc", "hf-cache=adir", "bad"], "progress": ["logs", "afile", "/proc/x"],
    "stall_after": ["5", "nan", "0"], "stall_startup": ["60", "inf"], "log_level": ["info", "error"],
}


def _likely(draw, action) -> str:
    choices = LIKELY.get(action.dest)
    if choices and draw(st.integers(0, 3)):  # mostly a likely value: the rest of the run gets exercised
        return draw(st.sampled_from(choices))
    return draw(VALUE)


@st.composite
def argv_for(draw, name: str) -> list[str]:
    parser, _ = _command_parser(name)
    positionals = [a for a in parser._actions if not a.option_strings]
    optionals = [a for a in parser._actions if a.option_strings and a.dest not in ("help", "version")]
    argv = [name]
    for action in positionals:
        count = {None: 1, "?": draw(st.integers(0, 1)), "*": draw(st.integers(0, 3)), "+": draw(st.integers(1, 3))}.get(
            action.nargs, 1 if not isinstance(action.nargs, int) else action.nargs)
        for _ in range(count):
            if action.choices and draw(st.integers(0, 3)):
                argv.append(str(draw(st.sampled_from(list(action.choices)))))
            elif action.dest == "overrides":
                argv.append(draw(st.sampled_from(OVERRIDES)))
            else:
                argv.append(_likely(draw, action))
    chosen = [a for a in optionals if a.required and draw(st.integers(0, 4))]
    if optionals:
        chosen += draw(st.lists(st.sampled_from(optionals), max_size=3, unique_by=lambda a: a.dest))
    seen = set()
    for action in chosen:
        if action.dest in seen:
            continue
        seen.add(action.dest)
        flag = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:
            argv.append(flag)
        elif action.choices and draw(st.integers(0, 3)):
            argv += [flag, str(draw(st.sampled_from(list(action.choices))))]
        else:
            argv += [flag, _likely(draw, action)]
    if name == "watchdog":
        argv.append("--once")  # without it the watchdog runs until stopped
    return argv


@st.composite
def input_files(draw) -> dict[str, bytes]:
    """Random content for the files the pool names: a status file, a GPU inventory, generations, a log."""
    number = st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from([None, True, "x", [], {}]))
    status = draw(st.one_of(
        st.fixed_dictionaries({"version": st.sampled_from([1, 2, "1", None]), "time": number, "interval_s": number,
                               "healthy": st.sampled_from([True, False, "yes", None]),
                               "findings": st.sampled_from([[], [{"severity": "error"}], "x", [1], None])}),
        st.lists(number, max_size=3)))
    inventory = draw(st.one_of(st.lists(st.fixed_dictionaries({"name": TEXT, "memory_gib": number,
                                                               "compute_capability": st.sampled_from(["8.0", "6.1", "x", None])}),
                                        max_size=3),
                               st.dictionaries(TEXT, number, max_size=3)))
    record = st.fixed_dictionaries({"step": number, "data": st.one_of(st.dictionaries(TEXT, number, max_size=3),
                                                                      number)})
    lines = draw(st.lists(st.one_of(record.map(lambda r: json.dumps(r)), TEXT), max_size=5))
    gens = draw(st.lists(st.fixed_dictionaries({"response": TEXT, "ground_truth": st.one_of(TEXT, number)}).map(json.dumps),
                         max_size=4))
    return {"status.json": json.dumps(status).encode(), "inventory.json": json.dumps(inventory).encode(),
            "logs/metrics-20260101T000000Z.jsonl": "\n".join(lines).encode(),
            "gens.jsonl": "\n".join(gens).encode()}


def run_cli(argv: list[str]) -> tuple[int, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        # In-process runs share logging: a handler left on an earlier test's captured (now closed) stream
        # prints "--- Logging error --- Traceback"; a real command is its own process and has none.
        logging.basicConfig(stream=err, force=True)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


def check(sandbox, argv: list[str], files: dict[str, bytes]) -> None:
    box = sandbox["box"]
    for rel, data in files.items():
        (box / rel).write_bytes(data)
    code, err = run_cli(argv)
    assert code in ALLOWED, f"{argv!r} -> exit {code}: {err[-600:]}"
    assert "Traceback (most recent call last)" not in err, f"{argv!r}: {err[-2000:]}"
    after = _tree(sandbox["precious"])
    lost = {path for path, digest in sandbox["before"].items() if after.get(path) != digest}
    assert not lost, f"{argv!r} changed or deleted {sorted(lost)}"  # adding files is not losing data
    assert not list(box.rglob("PWNED")), f"{argv!r} ran text as a shell command"


COMMAND_NAMES = [name for name in COMMANDS if name not in SKIPPED]
HEAVY = {"smoke-assets": 2, "canary-assets": 4, "data": 2, "validate": 2, "render": 2, "launchers": 4, "recipes": 4}  # slower ones


def _stand_in_model(arch, tokenizer, out_dir, seed, dtype="float32"):
    """What the asset builders' build_model leaves behind, without building it: a model directory."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / "config.json").write_text("{}")


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_any_arguments_end_cleanly(env, monkeypatch, name):
    if name == "smoke-assets":
        # Building the random model takes seconds and is tested on its own (test_smoke_assets.py); here a
        # stand-in writes its directory, so the examples exercise arguments, paths and replacement.
        import rlrecipes.smoke.assets as assets

        monkeypatch.setattr(assets, "build_model", _stand_in_model)
        monkeypatch.setattr(assets, "build_tokenizer", lambda *a, **k: None)
    if name == "canary-assets":
        # The warm start trains a model for up to --sft-steps steps and the start accuracy generates 512
        # answers (tested on their own in test_canary.py); here stand-ins keep each example to its arguments,
        # paths, data writing and replacement.
        import rlrecipes.rewards.accuracy as accuracy
        import rlrecipes.smoke.canary as canary

        monkeypatch.setattr(canary, "build_model", _stand_in_model)
        monkeypatch.setattr(canary, "build_tokenizer", lambda *a, **k: None)
        monkeypatch.setattr(canary, "warm_start", lambda *a, **k: {"steps": 0, "seconds": 0.0, "history": []})
        monkeypatch.setattr(accuracy, "fast_eval", lambda *a, **k: {"n": 1, "accuracy": 0.0, "flexible_accuracy": 0.0})

    @settings(max_examples=max(5, EXAMPLES // HEAVY.get(name, 1)), deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(argv=argv_for(name), files=input_files())
    def inner(argv, files):
        check(env, argv, files)

    inner()


@settings(max_examples=EXAMPLES * 2, deadline=None, derandomize=True)
@given(value=st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), TEXT,
                                    st.floats(allow_nan=False)), lambda inner: st.lists(inner, max_size=3),
                          max_leaves=6))
def test_hydra_values_round_trip(value):
    """What render writes into train.sh reaches verl as the value the recipe holds."""
    from rlrecipes.recipe import overrides as ov

    if isinstance(value, str) and ("${" in value or not value.strip()):
        return  # rlrecipes variables are expanded by the shell; blank strings are not Hydra values
    text = ov.format_override("k", value)
    try:
        parsed = ov.parse_cli([text])["k"]
    except Exception as exc:  # noqa: BLE001 -- the property: no value is formatted into an unparsable override
        pytest.fail(f"{value!r} -> {text!r} does not parse: {exc}")
    if isinstance(value, float) and math.isnan(value):
        return
    assert parsed == value or (isinstance(value, list) and parsed == list(value)), (value, text, parsed)
