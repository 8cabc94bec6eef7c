"""Measurement hooks for GPU runs, loaded by every Python process (Ray workers too) when this folder
is on PYTHONPATH. Nothing happens unless one of these variables is set:

RLRECIPES_GPU_MEMORY_CAP_GIB=24
    Right after CUDA initialises in a process, cap PyTorch's caching allocator at that many GiB with
    torch.cuda.set_per_process_memory_fraction: a 24 GB card simulated on a bigger one. The CUDA
    context and NCCL buffers sit outside the allocator and are not capped.
RLRECIPES_PHASE_LOG=/path/phases.jsonl
    Wrap verl's worker methods -- 0.5.0's FSDP workers (rollout, log-prob, ref, values, critic and actor
    updates) and the engine workers of verl >= 0.9 (old and reference log-probs, actor update; the
    critic's infer/train calls): for each call append {"phase", "call", "seconds",
    "peak_allocated_gib", "peak_reserved_gib"} with the allocator's peak during that call (peak stats
    are reset before each call). A call made inside another measured one is not measured on its own.
    The resets reach verl's own `actor/perf/max_memory_allocated_gb` too: with this probe on, that
    figure is the peak since the last measured call began, not the run's (the Hopper canary read 0.79
    GiB with it, 2.08 without; docs/bench/gpu-canary.md). Take a memory contract from a run without it.
RLRECIPES_PHASE_MARKS=/path/marks.jsonl
    verl >= 0.6 (the V1 trainer times its phases with `verl.utils.debug.marked_timer`): for each timed
    phase append {"phase", "pid", "t0", "t1"} (wall clock, time.time()), so samples of the whole GPU's
    memory (benchmarks/gpu/gpu_sampler.py) can be assigned to the phase that was running.
RLRECIPES_AGENT_MARKS=/path/agent.jsonl
    verl >= 0.9 agent loop, one record per call (wall clock): {"what", "pid", "t0", "t1"} for the
    vLLM server's `generate` of one response ("server"), the agent-loop worker's request to it
    ("client"), the reward request of one response ("score") and one response's whole agent loop,
    generation to its transfer-queue put ("session"); and the replay buffer's polls for a finished
    batch ("poll"). benchmarks/gpu/agent_marks.py splits the rollout phase with them.
RLRECIPES_VLLM_SAMPLING='{"detokenize": false}'
    verl >= 0.9: merge these keys into the sampling parameters of every request verl's vLLM server
    builds (vLLMHttpServer.generate turns the dict into vllm.SamplingParams). An experiment switch: it
    measured the rollout without vLLM's per-token detokenization (verl reads only token ids; verl
    PR #7679), which the image now ships as an anchored edit (scripts/patch_verl.py --image hopper, applied by
    flagship_3b_hopper.sh too); `{"detokenize": true}` measures the rollout as verl releases it.
RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1
    A negative control, never a fix: verl >= 0.9 with LoRA and a vLLM rollout keeps sending the adapter
    at every weight sync, but vLLM is handed the adapter of the FIRST sync again each time (a fresh LoRA
    adapter, B = 0: the base model). The rollout samples from the initial policy while the actor trains --
    the stale-adapter failure of verl #6782 / #7495, made on purpose so that the canary's contract can be
    shown to catch it. Base-weight syncs pass unchanged.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time

_CAP = os.environ.get("RLRECIPES_GPU_MEMORY_CAP_GIB")
_PHASE_LOG = os.environ.get("RLRECIPES_PHASE_LOG")
_PHASE_MARKS = os.environ.get("RLRECIPES_PHASE_MARKS")
_AGENT_MARKS = os.environ.get("RLRECIPES_AGENT_MARKS")
_VLLM_SAMPLING = os.environ.get("RLRECIPES_VLLM_SAMPLING")
_FREEZE_ADAPTER = os.environ.get("RLRECIPES_FREEZE_ROLLOUT_ADAPTER") == "1"

PHASES = {
    "ActorRolloutRefWorker": {
        "generate_sequences": "rollout",
        "compute_log_prob": "old_log_prob",
        "compute_ref_log_prob": "ref_log_prob",
        "update_actor": "update_actor",
    },
    "CriticWorker": {"compute_values": "values", "update_critic": "update_critic"},
}
# verl >= 0.9 (verl/workers/engine_workers.py): the actor/reference worker delegates to TrainingWorker
# engines, which the critic uses directly; the nesting rule below keeps the actor's calls whole.
ENGINE_PHASES = {
    "ActorRolloutRefWorker": {
        "compute_log_prob": "old_log_prob",
        "compute_ref_log_prob": "ref_log_prob",
        "update_actor": "update_actor",
    },
    "TrainingWorker": {"infer_batch": "infer_batch", "train_batch": "train_batch",
                       "train_mini_batch": "train_mini_batch"},
}


class _PostImportHooks(importlib.abc.MetaPathFinder):
    """Run hook(module) right after the named module's code has executed."""

    def __init__(self, hooks):
        self.hooks = dict(hooks)

    def find_spec(self, name, path=None, target=None):
        hook = self.hooks.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        del self.hooks[name]
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            try:
                hook(module)
            except Exception as exc:  # a measurement hook must never break the run it measures
                print(f"[rlrecipes-gpu] hook for {name} failed: {exc!r}", file=sys.stderr)

        spec.loader.exec_module = exec_module
        return spec


def _cap_cuda(cuda):
    cap_bytes = float(_CAP) * 2**30
    original = cuda._lazy_init
    state = {"done": False}

    def _lazy_init():
        original()
        if state["done"]:
            return
        state["done"] = True
        device = cuda.current_device()
        total = cuda.get_device_properties(device).total_memory
        fraction = min(1.0, cap_bytes / total)
        for index in range(cuda.device_count()):
            cuda.set_per_process_memory_fraction(fraction, index)
        print(f"[rlrecipes-gpu] pid {os.getpid()}: allocator capped at {float(_CAP):g} GiB "
              f"({fraction:.4f} of {total / 2**30:.1f} GiB)", file=sys.stderr, flush=True)

    cuda._lazy_init = _lazy_init  # torch's C++ lazy init calls torch.cuda._lazy_init by name


def _wrap_phases(module, phases=None):
    import functools

    import torch

    counts = {}
    depth = [0]  # calls in progress in this process: only the outermost one is measured

    def wrap(cls_name, method_name, phase):
        cls = getattr(module, cls_name, None)
        method = getattr(cls, method_name, None) if isinstance(cls, type) else None
        if method is None:
            return

        @functools.wraps(method)  # keeps verl's @register dispatch attributes
        def measured(self, *args, **kwargs):
            if depth[0]:
                return method(self, *args, **kwargs)
            depth[0] += 1
            try:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                start = time.perf_counter()
                result = method(self, *args, **kwargs)
                torch.cuda.synchronize()
            finally:
                depth[0] -= 1
            counts[phase] = counts.get(phase, 0) + 1
            record = {
                "phase": phase,
                "call": counts[phase],
                "pid": os.getpid(),
                "seconds": round(time.perf_counter() - start, 3),
                "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
                "peak_reserved_gib": round(torch.cuda.max_memory_reserved() / 2**30, 3),
            }
            with open(_PHASE_LOG, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
            return result

        setattr(cls, method_name, measured)

    for cls_name, methods in (phases or PHASES).items():
        for method_name, phase in methods.items():
            wrap(cls_name, method_name, phase)


def _mark_phases(module):
    import contextlib
    import functools

    original = module.marked_timer

    @contextlib.contextmanager
    @functools.wraps(original)
    def marked_timer(name, timing_raw, *args, **kwargs):
        t0 = time.time()
        try:
            with original(name, timing_raw, *args, **kwargs):
                yield
        finally:
            with open(_PHASE_MARKS, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"phase": name, "pid": os.getpid(), "t0": t0, "t1": time.time()}) + "\n")

    # verl.utils.debug re-exports verl.utils.profiler's names with `import *`: patch the source first
    module.marked_timer = marked_timer


def _agent_mark(what: str, t0: float) -> None:
    line = json.dumps({"what": what, "pid": os.getpid(), "t0": t0, "t1": time.time()}) + "\n"
    with open(_AGENT_MARKS, "a", encoding="utf-8") as fh:  # one short O_APPEND write per record
        fh.write(line)


def _mark(cls, method_name: str, what: str) -> None:
    """Wrap cls.method_name (a coroutine function or a plain one) to write one agent mark per call."""
    import functools
    import inspect

    method = cls.__dict__.get(method_name)
    if method is None:
        return
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def marked(*args, **kwargs):
            t0 = time.time()
            try:
                return await method(*args, **kwargs)
            finally:
                _agent_mark(what, t0)
    else:
        @functools.wraps(method)
        def marked(*args, **kwargs):
            t0 = time.time()
            try:
                return method(*args, **kwargs)
            finally:
                _agent_mark(what, t0)

    setattr(cls, method_name, marked)


def _mark_agent_loop(module):
    _mark(module.AgentLoopWorker, "_run_agent_loop", "session")
    _mark(module.AgentLoopWorker, "_compute_score", "score")


def _mark_llm_client(module):
    for name in ("LLMServerClient", "FullyAsyncLLMServerClient"):
        if hasattr(module, name):
            _mark(getattr(module, name), "generate", "client")


def _mark_vllm_server(module):
    _mark(module.vLLMHttpServer, "generate", "server")


def _vllm_sampling(module):
    import functools

    extra = json.loads(_VLLM_SAMPLING)
    cls = module.vLLMHttpServer
    method = cls.generate

    @functools.wraps(method)
    async def generate(self, *args, **kwargs):
        if isinstance(kwargs.get("sampling_params"), dict):
            kwargs["sampling_params"] = {**kwargs["sampling_params"], **extra}
        return await method(self, *args, **kwargs)

    cls.generate = generate
    print(f"[rlrecipes-gpu] pid {os.getpid()}: vLLM requests get {extra}", file=sys.stderr, flush=True)


def _freeze_rollout_adapter(module):
    import functools

    cls = module.vLLMColocateWorkerExtension  # mixed into every vLLM worker (verl/workers/rollout/vllm_rollout/utils.py)
    method = cls._update_weights
    first: dict = {}

    @functools.wraps(method)
    def _update_weights(self, weights, peft_config, base_sync_done):
        if peft_config and base_sync_done:  # an adapter sync (the same test verl's method makes)
            weights = list(weights)
            if "weights" not in first:
                first["weights"] = [(name, tensor.clone()) for name, tensor in weights]
                print(f"[rlrecipes-gpu] pid {os.getpid()}: control: vLLM keeps this first adapter "
                      f"({len(weights)} tensors) for the whole run", file=sys.stderr, flush=True)
            else:
                weights = [(name, tensor.clone()) for name, tensor in first["weights"]]
        return method(self, weights, peft_config, base_sync_done)

    cls._update_weights = _update_weights


def _mark_replay_buffer(module):
    for cls in vars(module).values():
        if isinstance(cls, type) and cls.__module__ == module.__name__ and "_wait_for_next_poll" in cls.__dict__:
            _mark(cls, "_wait_for_next_poll", "poll")


_hooks = {}
if _CAP:
    _hooks["torch.cuda"] = _cap_cuda
if _PHASE_LOG:
    _hooks["verl.workers.fsdp_workers"] = _wrap_phases
    _hooks["verl.workers.engine_workers"] = lambda module: _wrap_phases(module, ENGINE_PHASES)
if _PHASE_MARKS:
    _hooks["verl.utils.profiler"] = _mark_phases
_server_hooks = []
if _VLLM_SAMPLING:
    _server_hooks.append(_vllm_sampling)
if _AGENT_MARKS:
    _hooks["verl.experimental.agent_loop.agent_loop"] = _mark_agent_loop
    _hooks["verl.workers.rollout.llm_server"] = _mark_llm_client
    _hooks["verl.trainer.ppo.v1.replay_buffer"] = _mark_replay_buffer
    _server_hooks.append(_mark_vllm_server)  # outermost: its span covers the sampling change too
if _FREEZE_ADAPTER:
    _hooks["verl.workers.rollout.vllm_rollout.utils"] = _freeze_rollout_adapter
if _server_hooks:
    _hooks["verl.workers.rollout.vllm_rollout.vllm_async_server"] = lambda module: [h(module) for h in _server_hooks]
if _hooks:
    sys.meta_path.insert(0, _PostImportHooks(_hooks))
