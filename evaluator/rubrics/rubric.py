"""The rubric file format: the pydantic models a rubric file parses into.

A rubric is one YAML file (see ``prompts/``) that declares its input fields, its output
keys in order (integer criteria, lists of ``{Score, Explanation}`` items, bounded strings),
the aggregates to compute, optional paper-name aliases, and a Jinja2 template for the user
message (plus an optional system message). The four built-in rubrics use exactly the format
a user writes for their own; the output pydantic model is generated from the file
(:mod:`evaluator.rubrics.schema`). Parsing is strict: an unknown key is an error. Reading
a file and finding a rubric by name is :mod:`evaluator.rubrics.load`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from evaluator.common.errors import UserError
from evaluator.common.limits import (
    MAX_ITEMS,
    MAX_RUBRIC_KEYS,
    MAX_SCALE_VALUES,
    MAX_SCORE_MAGNITUDE,
)

KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Output keys become fields of a generated pydantic model: a leading underscore would make
# a private attribute (the key vanishes from the schema), and BaseModel's own names
# (model_config, json, copy...) cannot be fields.
_RESERVED_KEYS = frozenset(name for name in dir(BaseModel) if not name.startswith("_"))


def _output_key(key: str) -> str:
    if not key.isidentifier() or not key.isascii():
        raise ValueError(f"output key {key!r} must be letters, digits and '_', starting "
                         "with a letter")
    if key.startswith("_"):
        raise ValueError(f"output key {key!r} must not start with '_' (it would vanish "
                         "from the output schema)")
    if key in _RESERVED_KEYS or key.startswith("model_"):
        raise ValueError(f"output key {key!r} is reserved (a pydantic model attribute); "
                         "rename it")
    return key


OutputKey = Annotated[str, AfterValidator(_output_key)]
Score = Annotated[int, Field(ge=-MAX_SCORE_MAGNITUDE, le=MAX_SCORE_MAGNITUDE)]


class RubricError(UserError, ValueError):
    """A rubric file is missing, unreadable or invalid; the message names the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputField(_Strict):
    """One case field the template consumes."""

    description: str
    required: bool = True


class _Scored(_Strict):
    values: list[Score] | None = Field(default=None, max_length=MAX_SCALE_VALUES)
    range: tuple[Score, Score] | None = None

    @model_validator(mode="after")
    def _one_scale(self) -> _Scored:
        if (self.values is None) == (self.range is None):
            raise ValueError("give exactly one of 'values' (a list) or 'range' ([min, max])")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError(f"range {list(self.range)}: min is greater than max")
        if self.range is not None and self.range[1] - self.range[0] + 1 > MAX_SCALE_VALUES:
            raise ValueError(f"range {list(self.range)} has {self.range[1] - self.range[0] + 1} "
                             f"values; a scale may have at most {MAX_SCALE_VALUES}")
        if self.values is not None and (not self.values or len(set(self.values)) != len(self.values)):
            raise ValueError("values must be a non-empty list without repeats")
        return self

    @property
    def allowed(self) -> list[int]:
        """The allowed scores, in the order the rubric gives them."""
        if self.values is not None:
            return list(self.values)
        low, high = self.range  # type: ignore[misc]
        return list(range(low, high + 1))


class IntegerCriterion(_Scored):
    """A single integer score drawn from an enumerated set or an inclusive range.
    ``levels`` (optional): what each score means, for the people who label (the labelling
    page shows it beside each choice); the judge's prompt is the template alone."""

    key: OutputKey
    type: Literal["integer"]
    description: str = ""
    levels: dict[Score, Annotated[str, Field(min_length=1, max_length=2000)]] | None = None

    @model_validator(mode="after")
    def _levels_on_scale(self) -> IntegerCriterion:
        off = [v for v in self.levels or {} if v not in self.allowed]
        if off:
            raise ValueError(f"levels: {off[0]} is not on the criterion's scale "
                             f"({self.allowed[0]}..{self.allowed[-1]})")
        return self


class ItemsCriterion(_Scored):
    """A list of ``{Score, Explanation}`` items (one per diagnosis, feature, lead...)."""

    key: OutputKey
    type: Literal["items"]
    description: str = ""
    min_items: int = Field(default=1, ge=0)
    max_items: int = Field(ge=1, le=MAX_ITEMS)
    explanation_max_length: int = Field(ge=1, le=4000)
    explanation_charset: Literal["ascii", "unicode"] = "ascii"
    score_key: OutputKey = "Score"
    explanation_key: OutputKey = "Explanation"

    @model_validator(mode="after")
    def _items_bounds(self) -> ItemsCriterion:
        if self.min_items > self.max_items:
            raise ValueError("min_items is greater than max_items")
        if self.score_key == self.explanation_key:
            raise ValueError("score_key and explanation_key must differ")
        return self


class StringField(_Strict):
    """A free-text output (reasoning, rationale) bounded in length.

    ``charset: ascii`` (the default) allows printable ASCII without ``"`` or ``\\``: one
    byte per character, so the token budget is tight and a generation can never be cut
    mid-JSON. ``unicode`` allows any printable character in any language (``"`` and ``\\``
    escaped; no control characters) and budgets four bytes per character.
    """

    key: OutputKey
    type: Literal["string"]
    description: str = ""
    min_length: int = Field(default=1, ge=0)
    max_length: int = Field(ge=1, le=8000)
    charset: Literal["ascii", "unicode"] = "ascii"

    @model_validator(mode="after")
    def _length_bounds(self) -> StringField:
        if self.min_length > self.max_length:
            raise ValueError("min_length is greater than max_length")
        return self


CHOICES = ("A", "B")
TIE = "tie"


class ChoiceCriterion(_Strict):
    """A pairwise rubric's verdict on one criterion: which of the two candidates shown is
    better, ``"A"`` (the first shown) or ``"B"`` (the second), or ``"tie"`` where the
    rubric allows ties (``ties: true``, the default)."""

    key: OutputKey
    type: Literal["choice"]
    description: str = ""
    ties: bool = True

    @property
    def allowed(self) -> list[str]:
        """The values the judge may write, in order."""
        return [*CHOICES, TIE] if self.ties else list(CHOICES)


OutputField = Annotated[
    IntegerCriterion | ItemsCriterion | StringField | ChoiceCriterion,
    Field(discriminator="type"),
]


class Aggregate(_Strict):
    """A number computed from one output key: ``reduce``, then ``cap``, ``/ divide_by``,
    ``* scale``. ``share_above`` is the share of items whose score exceeds ``threshold``."""

    name: str = Field(pattern=KEY_PATTERN)
    of: str
    reduce: Literal["sum", "mean", "count", "min", "max", "share_above"]
    threshold: float | None = None
    cap: float | None = None
    divide_by: float = 1.0
    scale: float = 1.0

    @model_validator(mode="after")
    def _threshold_iff_share(self) -> Aggregate:
        if (self.reduce == "share_above") != (self.threshold is not None):
            raise ValueError("'threshold' is required with reduce: share_above, and only there")
        if self.divide_by == 0:
            raise ValueError("divide_by must not be 0")
        return self


class Rubric(_Strict):
    """A parsed rubric file."""

    format_version: Literal[1]
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-]*$")
    title: str
    description: str = ""
    inputs: dict[str, InputField] = Field(max_length=MAX_RUBRIC_KEYS)
    output: list[OutputField] = Field(min_length=1, max_length=MAX_RUBRIC_KEYS)
    aggregates: list[Aggregate] = Field(default=[], max_length=MAX_RUBRIC_KEYS)
    aliases: dict[str, str] = Field(default={}, max_length=MAX_RUBRIC_KEYS)
    # Summary pass rates: share of judged cases whose score is >= the threshold.
    pass_thresholds: dict[str, float] = Field(default={}, max_length=MAX_RUBRIC_KEYS)
    chat_template_kwargs: dict[str, Any] = {}
    # absolute: one text scored against its reference; pairwise: two candidates compared
    # (``candidates`` names the two inputs that hold them, shown first and second).
    kind: Literal["absolute", "pairwise"] = "absolute"
    candidates: tuple[str, str] | None = None
    system: str | None = None
    template: str
    # Not part of the file: where it was loaded from and the hash of its bytes.
    source_path: Path | None = Field(default=None, exclude=True)
    source_sha256: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _cross_checks(self) -> Rubric:
        keys = [field.key for field in self.output]
        duplicates = sorted({k for k in keys if keys.count(k) > 1})
        if duplicates:
            raise ValueError(f"output keys repeated: {duplicates}")
        for name in self.inputs:
            if not name.isidentifier():
                raise ValueError(f"input name {name!r} must be a Python identifier")
        by_key = {field.key: field for field in self.output}
        for agg in self.aggregates:
            target = by_key.get(agg.of)
            if target is None:
                raise ValueError(f"aggregate {agg.name!r}: 'of: {agg.of}' is not an output key")
            if isinstance(target, StringField):
                raise ValueError(f"aggregate {agg.name!r}: {agg.of!r} is a string, not a score")
        names = {agg.name for agg in self.aggregates}
        if len(names) != len(self.aggregates):
            raise ValueError("aggregate names repeat")
        for alias, target in self.aliases.items():
            if target not in names and target not in by_key:
                raise ValueError(f"alias {alias!r} points to {target!r}, which is neither an "
                                 "output key nor an aggregate")
        self._check_kind()
        scored = {f.key for f in self.output if isinstance(f, IntegerCriterion)} | names
        for key in self.pass_thresholds:
            if key not in scored:
                raise ValueError(f"pass_thresholds: {key!r} is neither an integer criterion "
                                 "nor an aggregate")
        return self

    def _check_kind(self) -> None:
        choices = [f.key for f in self.output if isinstance(f, ChoiceCriterion)]
        if self.kind == "absolute":
            if choices:
                raise ValueError(f"output {choices} are choices, which only a rubric with "
                                 "'kind: pairwise' may have")
            if self.candidates is not None:
                raise ValueError("'candidates' belongs to a rubric with 'kind: pairwise'")
            return
        if self.candidates is None:
            raise ValueError("a pairwise rubric names its two candidate inputs: "
                             "'candidates: [answer_a, answer_b]'")
        first, second = self.candidates
        if first == second:
            raise ValueError("'candidates' must name two different inputs")
        missing = [name for name in self.candidates if name not in self.inputs]
        if missing:
            raise ValueError(f"candidates {missing} are not declared under 'inputs'")
        if not all(self.inputs[name].required for name in self.candidates):
            raise ValueError("candidate inputs must be required (a pair needs both texts)")
        if not choices:
            raise ValueError("a pairwise rubric needs at least one output of 'type: choice'")
        scored = [f.key for f in self.output if isinstance(f, (IntegerCriterion, ItemsCriterion))]
        if scored:
            raise ValueError(f"outputs {scored}: a pairwise rubric's outputs are choices and "
                             "strings only (score each text with an absolute rubric)")
        if self.aggregates or self.pass_thresholds:
            raise ValueError("a pairwise rubric has no aggregates or pass_thresholds")

    @property
    def pairwise(self) -> bool:
        """Whether the rubric compares two candidates."""
        return self.kind == "pairwise"

    def choices(self) -> list[ChoiceCriterion]:
        """The choice criteria, in output order (none for an absolute rubric)."""
        return [f for f in self.output if isinstance(f, ChoiceCriterion)]

    def alias_of(self, name: str) -> str | None:
        """The paper name declared for an output key or aggregate, if any."""
        for alias, target in self.aliases.items():
            if target == name:
                return alias
        return None
