"""The rollout-phase split used for the H200 records: the agent-loop hooks in benchmarks/gpu/site write one mark
per call into verl's own classes (run here on stand-in modules of the same names), and
benchmarks/gpu/agent_marks.py turns marks + GPU samples into the segments of verl's `gen` phase."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))

from agent_marks import split_gen  # noqa: E402


def _mark(what, t0, t1):
    return {"what": what, "pid": 1, "t0": t0, "t1": t1}


def test_split_gen_finds_the_idle_gpu_while_responses_still_arrive():
    gen = {"phase": "gen", "pid": 9, "t0": 100.0, "t1": 160.0}
    agent = []
    for end in (120.0, 140.0, 150.0):  # three waves of responses, the last one 20 s after the GPU went idle
        for _ in range(2):
            agent += [_mark("server", 101.0, end), _mark("client", 100.9, end + 0.1),
                      _mark("score", end + 0.1, end + 0.15), _mark("session", 100.8, end + 0.3)]
    agent += [_mark("poll", 148.0, 150.0), _mark("poll", 150.0, 152.0)]
    agent.append(_mark("server", 50.0, 60.0))  # started before gen: another phase's
    samples = [{"t": 100.0 + i * 0.25, "util": 90 if 101.0 <= 100.0 + i * 0.25 < 130.0 else 0} for i in range(241)]
    (step,) = split_gen(agent, [gen], samples)
    assert step["responses"] == 6 and step["gen_seconds"] == 60.0
    assert step["segments"] == {"submit": 1.0, "engine": 49.0, "return": 0.1, "postprocess": 0.2, "poll": 1.7,
                                "sleep": 8.0}
    assert step["per_response"]["server_seconds"] == {"n": 6, "mean": 35.667, "max": 49.0}
    assert step["per_response"]["post_seconds"]["max"] == pytest.approx(0.2)
    busy = step["gpu_busy"]
    assert busy["first_from_gen_start"] == 1.0 and busy["busy_samples_seconds"] == pytest.approx(29.0)
    assert busy["idle_stretches"] == [[30.0, 30.0]]  # 130 -> 160: nothing on the GPU, gen still running


def test_split_gen_without_agent_marks_keeps_the_gpu_view():
    gen = {"phase": "gen", "pid": 9, "t0": 0.0, "t1": 10.0}
    samples = [{"t": i * 0.5, "util": 0 if i < 6 else 80} for i in range(21)]
    (step,) = split_gen([], [gen], samples)
    assert "segments" not in step and step["responses"] == 0
    assert step["gpu_busy"]["idle_stretches"] == [[0.0, 3.0]]


def test_agent_hooks_mark_verls_classes_in_a_fresh_process(tmp_path):
    # stand-ins with verl's module and class names; the hooks wrap them as the real ones on the GPU host
    pkg = tmp_path / "verl"
    for sub in ("experimental/agent_loop", "workers/rollout/vllm_rollout", "trainer/ppo/v1"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
    for folder in [pkg, *[p for p in pkg.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").write_text("")
    (pkg / "experimental/agent_loop/agent_loop.py").write_text(textwrap.dedent("""
        import asyncio
        class AgentLoopWorker:
            async def _run_agent_loop(self, x):
                await asyncio.sleep(0.01)
                return await self._compute_score(x)
            async def _compute_score(self, x):
                return x * 2
    """))
    (pkg / "workers/rollout/llm_server.py").write_text(textwrap.dedent("""
        class LLMServerClient:
            async def generate(self, request_id, **kw):
                return request_id
    """))
    (pkg / "workers/rollout/vllm_rollout/vllm_async_server.py").write_text(textwrap.dedent("""
        class vLLMHttpServer:
            async def generate(self, **kw):
                raise RuntimeError("engine died")
    """))
    (pkg / "trainer/ppo/v1/replay_buffer.py").write_text(textwrap.dedent("""
        class ReplayBuffer:
            def _wait_for_next_poll(self, partition_id, last):
                return last + 1
    """))
    marks = tmp_path / "agent.jsonl"
    code = textwrap.dedent("""
        import asyncio
        from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
        from verl.workers.rollout.llm_server import LLMServerClient
        from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer
        from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
        assert asyncio.run(AgentLoopWorker()._run_agent_loop(21)) == 42
        assert asyncio.run(LLMServerClient().generate("r1")) == "r1"
        try:
            asyncio.run(vLLMHttpServer().generate())
        except RuntimeError:
            pass
        assert ReplayBuffer()._wait_for_next_poll("train", 1) == 2
    """)
    env = dict(os.environ, RLRECIPES_AGENT_MARKS=str(marks),
               PYTHONPATH=os.pathsep.join([str(REPO / "benchmarks" / "gpu" / "site"), str(tmp_path)]))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path)
    records = [json.loads(line) for line in marks.read_text().splitlines()]
    assert sorted(r["what"] for r in records) == ["client", "poll", "score", "server", "session"]
    session = next(r for r in records if r["what"] == "session")
    score = next(r for r in records if r["what"] == "score")
    assert session["t1"] - session["t0"] >= 0.01 and session["t0"] <= score["t0"] <= score["t1"] <= session["t1"]
    # a call that raises is still marked (the server one above), and without the variable nothing is written
    marks.unlink()
    env.pop("RLRECIPES_AGENT_MARKS")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path)
    assert not marks.exists()


def test_phase_log_measures_verls_engine_workers_outermost_call_only(tmp_path):
    """verl >= 0.9's actor worker delegates to a TrainingWorker; one record per actor call, with the peak
    reset before it (a stand-in torch.cuda counts the resets and reports a peak per call)."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("from . import cuda\n")
    (tmp_path / "torch" / "cuda.py").write_text(textwrap.dedent("""
        resets = 0
        def synchronize(): pass
        def reset_peak_memory_stats():
            global resets
            resets += 1
        def max_memory_allocated(): return resets * 2**30
        def max_memory_reserved(): return resets * 2**31
    """))
    (tmp_path / "verl" / "workers").mkdir(parents=True)
    for folder in (tmp_path / "verl", tmp_path / "verl" / "workers"):
        (folder / "__init__.py").write_text("")
    (tmp_path / "verl" / "workers" / "engine_workers.py").write_text(textwrap.dedent("""
        def register(fn):
            fn.dispatch = "nd"
            return fn
        class TrainingWorker:
            @register
            def infer_batch(self, data): return data + 1
            @register
            def train_mini_batch(self, data): return data * 2
        class ActorRolloutRefWorker:
            def __init__(self): self.actor = TrainingWorker()
            @register
            def compute_log_prob(self, data): return self.actor.infer_batch(data)
            @register
            def update_actor(self, data): return self.actor.train_mini_batch(data)
    """))
    log = tmp_path / "phases.jsonl"
    code = textwrap.dedent("""
        from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker
        w = ActorRolloutRefWorker()
        assert w.compute_log_prob(1) == 2 and w.update_actor(3) == 6 and w.compute_log_prob(5) == 6
        assert TrainingWorker().infer_batch(0) == 1          # the critic calls its engine directly
        assert ActorRolloutRefWorker.update_actor.dispatch == "nd"  # verl's dispatch attributes survive
    """)
    env = dict(os.environ, RLRECIPES_PHASE_LOG=str(log),
               PYTHONPATH=os.pathsep.join([str(REPO / "benchmarks" / "gpu" / "site"), str(tmp_path)]))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["phase"], r["call"]) for r in records] == [
        ("old_log_prob", 1), ("update_actor", 1), ("old_log_prob", 2), ("infer_batch", 1)]
    assert [r["peak_allocated_gib"] for r in records] == [1.0, 2.0, 3.0, 4.0]  # one reset per measured call


def test_vllm_sampling_switch_reaches_every_request_and_is_off_by_default(tmp_path):
    server = tmp_path / "verl" / "workers" / "rollout" / "vllm_rollout"
    server.mkdir(parents=True)
    for folder in (tmp_path / "verl", tmp_path / "verl" / "workers", server.parent, server):
        (folder / "__init__.py").write_text("")
    (server / "vllm_async_server.py").write_text(textwrap.dedent("""
        class vLLMHttpServer:
            async def generate(self, *, request_id, prompt_ids, sampling_params):
                return dict(sampling_params)   # verl builds vllm.SamplingParams(**sampling_params) here
    """))
    code = textwrap.dedent("""
        import asyncio, json
        from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer
        asked = {"temperature": 1.0, "logprobs": True}
        print(json.dumps(asyncio.run(vLLMHttpServer().generate(request_id="r", prompt_ids=[1], sampling_params=asked))))
        assert asked == {"temperature": 1.0, "logprobs": True}   # the caller's dict is not changed
    """)
    marks = tmp_path / "agent.jsonl"
    base = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "benchmarks" / "gpu" / "site"), str(tmp_path)]))
    run = lambda env: json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path,  # noqa: E731
                                                capture_output=True, text=True).stdout.strip().splitlines()[-1])
    assert run(base) == {"temperature": 1.0, "logprobs": True}
    switched = run(dict(base, RLRECIPES_VLLM_SAMPLING='{"detokenize": false}', RLRECIPES_AGENT_MARKS=str(marks)))
    assert switched == {"temperature": 1.0, "logprobs": True, "detokenize": False}
    assert [json.loads(line)["what"] for line in marks.read_text().splitlines()] == ["server"]
