"""A stand-in for vLLM, for timing verl 0.9.1's start-up on a host without a GPU or vLLM (benchmarks/startup_cpu.sh;
never part of an image). Installed as the package `vllm` with version 0.24.0 metadata, so verl's version check
passes: every `vllm.*` module exists and every name in one is a placeholder class. What it leaves out is vLLM's
own import and engine, which only a GPU host measures (benchmarks/gpu/startup_levers.sh)."""

import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.24.0"


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") or name == "MaxLoRARanks":  # verl falls back to its own list of LoRA ranks
            raise AttributeError(name)
        value = type(name, (), {"__init__": lambda self, *a, **k: None, "__call__": lambda self, *a, **k: self})
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        # a capitalised last part is a name (`from vllm.config.lora import MaxLoRARanks`), not a module
        if fullname.startswith("vllm.") and not fullname.rsplit(".", 1)[1][:1].isupper():
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
sys.modules[__name__].__class__ = _Module
