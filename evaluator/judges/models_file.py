"""``models.yaml``: the named judge models, parsed strictly.

Every judge is loaded from a local path (or an embedded/built-on-demand model); nothing is
ever fetched from a hub. Unknown keys are errors, so a typo like ``temprature`` fails loudly
instead of silently judging with the default.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from evaluator.common.errors import UserError
from evaluator.common.strict import format_validation_error
from evaluator.common.strict_yaml import YamlRefused, load_yaml_file
from evaluator.judges.backends.registry import BACKENDS, BackendRecord
from evaluator.judges.backends.torch_threads import Threads, parse_threads

DEFAULT_MODELS_FILE = Path(__file__).resolve().parents[2] / "models.yaml"
EMBEDDED_MODELS = ("smollm2-135m-instruct",)


class JudgeConfigError(UserError, ValueError):
    """models.yaml is missing, invalid, or names an unknown judge."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The largest seed every backend takes (numpy's and vLLM's limit: 32 bits unsigned).
MAX_SEED = 2**32 - 1


class SamplingConfig(_Strict):
    """Decoding settings. Temperature 0 means greedy decoding (deterministic verdicts)."""

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)


class JudgeSpec(_Strict):
    """One judge: which backend runs it, where its weights are, how to decode."""

    backend: Literal[tuple(BACKENDS)]  # type: ignore[valid-type]
    path: Path | None = None
    embedded: Literal[EMBEDDED_MODELS] | None = None  # type: ignore[valid-type]
    description: str = ""
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    device: str = "auto"
    # Upper bounds: a typo like 10**23 is refused here, not met as an overflow in a backend.
    max_model_len: int | None = Field(default=None, ge=64, le=10_000_000)
    # Cases per generate call; a streaming judge (vllm): requests kept in flight.
    batch_size: int = Field(default=8, ge=1, le=4096)
    # Stream cases through the engine (continuous batching): default on for vllm, which
    # can; false judges in batches. transformers cannot (see docs/running.md#streaming).
    stream: bool | None = None
    sampling: SamplingConfig = SamplingConfig()
    chat_template_kwargs: dict[str, Any] = {}
    # Some chat templates (e.g. Gemma's) have no system turn: then a rubric's system text
    # is put at the top of the user message instead.
    system_role: bool = True
    # vLLM engine settings (ignored by the other backends).
    engine: dict[str, Any] = {}
    # transformers: threads that fill the schema constraint's masks (default: the CPUs the
    # model leaves free; evaluator.judges.backends.fill_threads). Not a setting of the
    # verdicts (the masks are the same on any count), so not in the settings hash.
    fill_threads: int | None = Field(default=None, ge=1, le=256)
    # transformers on the CPU: torch's threads, a count or auto (the default: the free CPUs
    # the process may use; evaluator.judges.backends.torch_threads). OMP_NUM_THREADS and
    # --threads win over it. Not in the settings hash, as fill_threads.
    threads: Threads | None = None
    # Where ``threads`` came from: this file, or the run's --threads (:func:`with_threads`),
    # which also wins over OMP_NUM_THREADS. Not a field: models.yaml cannot set it.
    _threads_from_run: bool = PrivateAttr(False)

    @property
    def threads_from_run(self) -> bool:
        """``threads`` is the run's ``--threads`` (not models.yaml's)."""
        return self._threads_from_run

    @field_validator("threads", mode="before")
    @classmethod
    def _threads(cls, value: Any) -> Any:
        # one line for any wrong value (pydantic would list each member of the union)
        return None if value is None else parse_threads(value)

    @property
    def backend_info(self) -> BackendRecord:
        """The facts of this judge's backend (its record in the backend registry)."""
        return BACKENDS[self.backend]

    @model_validator(mode="after")
    def _backend_settings(self) -> JudgeSpec:
        # What the judge's backend takes (its record in evaluator.judges.backends.registry).
        info = self.backend_info
        if info.weights == "path or embedded" and (self.path is None) == (self.embedded is None):
            raise ValueError(f"a {self.backend} judge needs exactly one of 'path' (a local model "
                             "folder) or 'embedded'")
        if info.weights == "path" and self.path is None:
            raise ValueError(f"a {self.backend} judge needs 'path' (a local model folder)")
        if self.stream and not info.streams:
            raise ValueError(f"stream: true needs backend vllm; the {self.backend} backend "
                             "judges in batches (see docs/running.md, 'Streaming'): remove "
                             "'stream' from this judge")
        if self.fill_threads is not None and info.vllm_engine:
            raise ValueError("fill_threads sets the transformers backend's mask fill; vLLM "
                             "fills its own: remove 'fill_threads' from this judge")
        if self.threads is not None and info.vllm_engine:
            raise ValueError("threads sets torch's CPU threads in the transformers backend; "
                             "vLLM sets its own: remove 'threads' from this judge")
        # The engine keys are checked for every judge, so a typo fails before a backend
        # switch to vllm would reveal it; the check imports no vllm.
        validate_engine_settings(self.engine)
        if info.vllm_engine and self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"a {self.backend} judge takes device auto, cuda or cpu, not "
                             f"{self.device!r}: vLLM uses tensor_parallel_size GPUs; choose "
                             "which with CUDA_VISIBLE_DEVICES")
        return self


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


class JurySpec(_Strict):
    """Several judges that each score every case (one model loaded at a time); their
    verdicts are reduced to one (see evaluator.analysis.panel)."""

    judges: list[str] = Field(min_length=2)
    reduce: Literal["median", "mean", "majority"] = "median"
    description: str = ""


class ModelsFile(_Strict):
    """The whole models.yaml."""

    default: str
    judges: dict[str, JudgeSpec]
    juries: dict[str, JurySpec] = {}

    @model_validator(mode="after")
    def _default_exists(self) -> ModelsFile:
        if self.default not in self.judges:
            raise ValueError(f"default judge {self.default!r} is not defined under 'judges'")
        return self

    @model_validator(mode="after")
    def _juries_refer_to_judges(self) -> ModelsFile:
        for name, jury in self.juries.items():
            if name in self.judges:
                raise ValueError(f"jury {name!r} has the name of a judge; rename one of them")
            unknown = [j for j in jury.judges if j not in self.judges]
            if unknown:
                raise ValueError(f"jury {name!r} names unknown judge(s) {', '.join(unknown)}; "
                                 f"defined: {', '.join(sorted(self.judges))}")
            if len(set(jury.judges)) != len(jury.judges):
                raise ValueError(f"jury {name!r} names a judge twice")
        return self


def load_models_file(path: Path | None = None) -> ModelsFile:
    """Parse models.yaml (the project's by default); relative paths resolve against it."""
    path = Path(path) if path is not None else DEFAULT_MODELS_FILE
    try:
        data, _ = load_yaml_file(path, "models file")
    except YamlRefused as exc:
        raise JudgeConfigError(str(exc)) from None
    try:
        models = ModelsFile.model_validate(data)
    except ValidationError as exc:
        raise JudgeConfigError(format_validation_error(path, "models file", exc)) from None
    judges = {
        name: spec.model_copy(update={"path": (path.parent / spec.path).resolve()})
        if spec.path is not None and not spec.path.is_absolute() else spec
        for name, spec in models.judges.items()
    }
    return models.model_copy(update={"judges": judges})


def with_threads(name: str, spec: JudgeSpec, threads: Any) -> JudgeSpec:
    """``spec`` with the run's ``threads`` (``--threads``: a count or ``auto``) in place of its
    own; :class:`JudgeConfigError` for a bad value, or a vLLM judge (which sets its own)."""
    try:
        value = parse_threads(threads)
    except ValueError as exc:
        raise JudgeConfigError(f"--threads: {exc}") from None
    if spec.backend_info.vllm_engine:
        raise JudgeConfigError(f"--threads sets torch's CPU threads of a transformers judge; "
                               f"judge {name!r} runs on vLLM, which sets its own: leave "
                               "--threads out")
    copy = spec.model_copy(update={"threads": value})
    copy._threads_from_run = True
    return copy


def resolve_judge(name: str | None, models_path: Path | None = None) -> tuple[str, JudgeSpec]:
    """Return ``(name, spec)`` for a named judge, or the file's default when name is None."""
    models = load_models_file(models_path)
    chosen = name or models.default
    spec = models.judges.get(chosen)
    if spec is None:
        hint = (f" ({chosen!r} is a jury: it judges with several models)"
                if chosen in models.juries else "")
        raise JudgeConfigError(f"unknown judge {chosen!r}{hint}; models.yaml defines: "
                               f"{', '.join(sorted(models.judges))}")
    return chosen, spec


def resolve_jury(names: Sequence[str], models_path: Path | None = None) -> tuple[str, JurySpec] | None:
    """The jury that ``--model`` names ask for: a jury entry of models.yaml (one name), or
    an ad-hoc jury of several judges (named ``jury(a,b,...)``); None for a single judge."""
    if not names:
        return None
    models = load_models_file(models_path)
    if len(names) == 1:
        jury = models.juries.get(names[0])
        return (names[0], jury) if jury is not None else None
    if len(set(names)) != len(names):
        raise JudgeConfigError(f"a judge is named twice in --model {' '.join(names)}")
    for name in names:
        if name in models.juries:
            raise JudgeConfigError(f"{name!r} is a jury; give either one jury or several judges")
        resolve_judge(name, models_path)  # unknown names fail here, listing the known ones
    return f"jury({','.join(names)})", JurySpec(judges=list(names))
