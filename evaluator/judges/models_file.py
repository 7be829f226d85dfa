"""``models.yaml``: the named judge models, parsed strictly.

Every judge is loaded from a local path (or an embedded/built-on-demand model); nothing is
ever fetched from a hub. Unknown keys are errors, so a typo like ``temprature`` fails loudly
instead of silently judging with the default.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from evaluator.common.errors import UserError
from evaluator.common.strict import format_validation_error
from evaluator.common.strict_yaml import YamlRefused, load_yaml_file
from evaluator.judges.backends.registry import BACKENDS, BackendRecord
from evaluator.judges.backends.torch_threads import parse_threads

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
    """One judge: which backend runs it, where its weights are, how to decode.

    The settings every backend takes; each backend's record names its own model, a subclass
    that adds the settings only it takes (``BackendRecord.settings``). Building a
    ``JudgeSpec`` (``JudgeSpec(backend=...)``, or a judge of models.yaml) builds the model
    of the named backend, so a judge is checked by its own backend's rules alone.
    """

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

    #: Settings of other backends this backend's judges refuse, each with why (the error
    #: ends "remove '<key>' from this judge"); any other unknown key is refused as such.
    NOT_TAKEN: ClassVar[dict[str, str]] = {}
    #: What runs this backend's model, as messages name it.
    RUNS_ON: ClassVar[str] = "its backend"
    #: The settings that decide a verdict (the manifest's ``judge_config``, in the
    #: settings hash); a backend's model adds its own in :meth:`identity`.
    IDENTIFYING: ClassVar[tuple[str, ...]] = ("backend", "dtype", "max_model_len",
                                              "system_role", "embedded")

    def __new__(cls, *args: Any, **data: Any) -> JudgeSpec:  # noqa: PYI034 (a subclass's)
        # JudgeSpec(backend=...) builds the backend's own model (then its __init__ runs).
        record = BACKENDS.get(data.get("backend")) if cls is JudgeSpec else None
        return super().__new__(record.settings_model() if record is not None else cls)

    @model_validator(mode="wrap")
    @classmethod
    def _backends_own_model(cls, data: Any, handler: Any) -> Any:
        # models.yaml's judges (and JudgeSpec.model_validate) are parsed by the model their
        # backend's record names; an unknown backend is refused by the field above.
        if cls is JudgeSpec and isinstance(data, dict):
            record = BACKENDS.get(data.get("backend"))  # type: ignore[arg-type]
            if record is not None:
                return record.settings_model().model_validate(data)
        return handler(data)

    @model_validator(mode="before")
    @classmethod
    def _not_taken(cls, data: Any) -> Any:
        for key in cls.NOT_TAKEN:
            if isinstance(data, dict) and key in data:
                raise ValueError(f"{cls.NOT_TAKEN[key]}: remove {key!r} from this judge")
        return data

    @property
    def backend_info(self) -> BackendRecord:
        """The facts of this judge's backend (its record in the backend registry)."""
        return BACKENDS[self.backend]

    @model_validator(mode="after")
    def _backend_settings(self) -> JudgeSpec:
        # What the judge's backend takes (its record in evaluator.judges.backends.registry).
        info = self.backend_info
        if type(self) is not info.settings_model():
            raise ValueError(f"a {self.backend} judge's settings are "
                             f"{info.settings_model().__name__}, not {type(self).__name__}")
        if info.weights == "path or embedded" and (self.path is None) == (self.embedded is None):
            raise ValueError(f"a {self.backend} judge needs exactly one of 'path' (a local model "
                             "folder) or 'embedded'")
        if info.weights == "path" and self.path is None:
            raise ValueError(f"a {self.backend} judge needs 'path' (a local model folder)")
        if self.stream and not info.streams:
            raise ValueError(f"stream: true needs backend vllm; the {self.backend} backend "
                             "judges in batches (see docs/running.md, 'Streaming'): remove "
                             "'stream' from this judge")
        return self

    def identity(self) -> dict[str, Any]:
        """The settings of this judge that decide its verdicts (JSON values): the run
        manifest's ``judge_config``, part of the settings hash."""
        return self.model_dump(mode="json", include=set(self.IDENTIFYING))


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
    own; :class:`JudgeConfigError` for a bad value, or a judge whose backend takes no
    ``threads`` (vLLM sets its own)."""
    try:
        value = parse_threads(threads)
    except ValueError as exc:
        raise JudgeConfigError(f"--threads: {exc}") from None
    if "threads" not in type(spec).model_fields:
        raise JudgeConfigError(f"--threads sets torch's CPU threads of a transformers judge; "
                               f"judge {name!r} runs on {spec.RUNS_ON}, which sets its own: "
                               "leave --threads out")
    return spec.with_run_threads(value)  # type: ignore[attr-defined]


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
