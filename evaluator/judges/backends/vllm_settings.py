"""The settings of a vllm judge in models.yaml: the common ones of :class:`JudgeSpec` and
vLLM's ``engine:`` block (:class:`VLLMEngineConfig`), which alone decides which of its keys
are in the settings hash. Imports no vLLM."""

from __future__ import annotations

import difflib
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evaluator.judges.models_file import JudgeSpec

# vLLM engine settings that place the model in memory without changing what it computes:
# left out of the settings hash so that e.g. a resume may use another memory share.
PLACEMENT_ONLY_ENGINE_KEYS = ("gpu_memory_utilization", "kv_cache_memory_bytes",
                              "cpu_offload_gb", "distributed_executor_backend")


class VLLMEngineConfig(BaseModel):
    """The ``engine:`` settings of a vllm judge in models.yaml (unknown keys are errors).

    Each maps to the ``vllm.LLM`` argument of the same name; unset ones keep vLLM's default,
    except ``enable_prefix_caching``, on by default because every case shares the rubric's
    long prefix.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tensor_parallel_size: int = Field(default=1, ge=1)
    pipeline_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float | None = Field(default=None, gt=0.0, le=1.0)
    kv_cache_memory_bytes: int | None = Field(default=None, ge=1)
    enable_prefix_caching: bool = True
    quantization: str | None = None
    kv_cache_dtype: str | None = None
    max_num_seqs: int | None = Field(default=None, ge=1)
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    enable_chunked_prefill: bool | None = None
    enforce_eager: bool | None = None
    cpu_offload_gb: float | None = Field(default=None, ge=0.0)
    distributed_executor_backend: Literal["mp", "ray", "uni"] | None = None


def validate_engine_settings(engine: dict[str, Any]) -> VLLMEngineConfig:
    """Parse a judge's ``engine`` mapping; raise :class:`ValueError` naming the bad key (with
    a close match for a typo) and listing the known ones."""
    known = list(VLLMEngineConfig.model_fields)
    unknown = [key for key in engine if key not in known]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        if key == "max_model_len":
            hint = " (set max_model_len on the judge itself, not under engine)"
        raise ValueError(f"engine: unknown vLLM setting {key!r}{hint}; known settings: "
                         f"{', '.join(known)}")
    try:
        return VLLMEngineConfig.model_validate(engine)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors(include_input=False, include_url=False))
        raise ValueError(f"engine: {problems}") from None


class VLLMSettings(JudgeSpec):
    """A judge run by vLLM's engine (evaluator.judges.backends.vllm_backend)."""

    NOT_TAKEN: ClassVar[dict[str, str]] = {
        "fill_threads": "fill_threads sets the transformers backend's mask fill; vLLM fills "
                        "its own",
        "threads": "threads sets torch's CPU threads in the transformers backend; vLLM sets "
                   "its own",
    }
    RUNS_ON: ClassVar[str] = "vLLM"

    # The vLLM engine's settings, as written (checked by :func:`validate_engine_settings`;
    # kept as given, so that the settings hash holds only the keys set).
    engine: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _vllm_settings(self) -> VLLMSettings:
        validate_engine_settings(self.engine)
        if self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"a {self.backend} judge takes device auto, cuda or cpu, not "
                             f"{self.device!r}: vLLM uses tensor_parallel_size GPUs; choose "
                             "which with CUDA_VISIBLE_DEVICES")
        return self

    def identity(self) -> dict[str, Any]:
        """The common settings and the engine's, less those that only place the model."""
        return {**super().identity(), "engine": {
            key: value for key, value in self.engine.items()
            if key not in PLACEMENT_ONLY_ENGINE_KEYS}}
