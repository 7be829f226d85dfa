"""Judge backends, loaded lazily by name so ``import evaluator`` never imports torch/vllm."""

from __future__ import annotations

import importlib
import operator
from typing import TYPE_CHECKING

from evaluator.judges.backends.base import (
    Backend,
    BackendUnavailable,
    Chat,
    CpuThreadsBackend,
    DescribedBackend,
    Generation,
    Request,
    Sampling,
    ScoreAnchor,
    ScoringBackend,
    StreamingBackend,
    TokenLogprob,
    ValueDistribution,
)
from evaluator.judges.backends.registry import BACKENDS

if TYPE_CHECKING:
    from evaluator.judges.models_file import JudgeSpec


def load_backend(judge_name: str, spec: JudgeSpec) -> Backend:
    """Import the judge's backend module on demand and build it.

    A missing optional dependency becomes :class:`BackendUnavailable` naming the install.
    """
    record = BACKENDS.get(spec.backend)
    if record is None:
        raise BackendUnavailable(f"backend {spec.backend!r} is not available in this version; "
                                 f"known backends: {', '.join(sorted(BACKENDS))}")
    module_name, _, attr = record.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailable(f"backend {spec.backend!r} needs a package that is not "
                                 f"installed ({exc.name or exc}); install it with: "
                                 f"{record.install}") from None
    return operator.attrgetter(attr)(module)(judge_name, spec)


__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "Chat", "CpuThreadsBackend",
           "DescribedBackend", "Generation", "Request", "Sampling", "ScoreAnchor",
           "ScoringBackend", "StreamingBackend", "TokenLogprob", "ValueDistribution",
           "load_backend"]
