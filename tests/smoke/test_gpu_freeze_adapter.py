"""The canary's adapter-sync-cut control (RLRECIPES_FREEZE_ROLLOUT_ADAPTER=1 in benchmarks/gpu/site): vLLM must
be handed the first adapter at every later LoRA sync, while base-weight syncs and runs without the switch
pass through untouched. Run on a stand-in of verl 0.9.1's worker extension (same module, class and call:
`_update_weights(list_of_pairs, peft_config=..., base_sync_done=...)`, as update_weights_from_ipc calls it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

STANDIN = textwrap.dedent("""
    class vLLMColocateWorkerExtension:
        received = []
        def _update_weights(self, weights, peft_config, base_sync_done):
            kind = "adapter" if (peft_config and base_sync_done) else "base"
            self.received.append([kind, {name: float(value[0]) for name, value in weights}])
""")

CALLS = textwrap.dedent("""
    import json, torch
    from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension as Ext
    worker = Ext()
    lora = {"r": 32}
    worker._update_weights([("w", torch.tensor([1.0]))], peft_config=None, base_sync_done=False)
    for step in (0.0, 0.5, 0.75):   # B = 0 at the first sync, then the trained adapter
        weights = [("lora_A", torch.tensor([step])), ("lora_B", torch.tensor([step * 2]))]
        worker._update_weights(weights, peft_config=lora, base_sync_done=True)
        weights[0][1].fill_(-1.0)   # verl's IPC bucket is reused after the call
    worker._update_weights([("w", torch.tensor([2.0]))], peft_config=None, base_sync_done=False)
    print(json.dumps(Ext.received))
""")


def _run(tmp_path: Path, **env) -> list:
    module = tmp_path / "verl" / "workers" / "rollout" / "vllm_rollout"
    module.mkdir(parents=True, exist_ok=True)
    for folder in [tmp_path / "verl", *[p for p in (tmp_path / "verl").rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").write_text("")
    (module / "utils.py").write_text(STANDIN)
    path = os.pathsep.join([str(REPO / "benchmarks" / "gpu" / "site"), str(tmp_path)])
    done = subprocess.run([sys.executable, "-c", CALLS], env={**os.environ, "PYTHONPATH": path, **env},
                          cwd=tmp_path, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_without_the_switch_every_adapter_reaches_vllm(tmp_path):
    received, _ = _run(tmp_path)
    assert received == [["base", {"w": 1.0}], ["adapter", {"lora_A": 0.0, "lora_B": 0.0}],
                        ["adapter", {"lora_A": 0.5, "lora_B": 1.0}], ["adapter", {"lora_A": 0.75, "lora_B": 1.5}],
                        ["base", {"w": 2.0}]]


def test_the_control_hands_vllm_the_first_adapter_at_every_sync(tmp_path):
    received, stderr = _run(tmp_path, RLRECIPES_FREEZE_ROLLOUT_ADAPTER="1")
    first = {"lora_A": 0.0, "lora_B": 0.0}
    # the first adapter is kept as sent (a copy: the -1.0 written into the reused buffer never reaches it)
    assert received == [["base", {"w": 1.0}], ["adapter", first], ["adapter", first], ["adapter", first],
                        ["base", {"w": 2.0}]]
    assert "vLLM keeps this first adapter (2 tensors)" in stderr
