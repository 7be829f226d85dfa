"""The rubric file format: parsing, validation and lookup by name.

A rubric is one YAML file (see ``prompts/``) that declares its input fields, its output
keys in order (integer criteria, lists of ``{Score, Explanation}`` items, bounded strings),
the aggregates to compute, optional paper-name aliases, and a Jinja2 template for the user
message (plus an optional system message). The four built-in rubrics use exactly the format
a user writes for their own; the output pydantic model is generated from the file
(:mod:`evaluator.rubrics.schema`). Parsing is strict: an unknown key is an error.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

FORMAT_VERSION = 1
BUILTIN_RUBRICS_DIR = Path(__file__).resolve().parents[2] / "prompts"
KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


class RubricError(ValueError):
    """A rubric file is missing, unreadable or invalid; the message names the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputField(_Strict):
    """One case field the template consumes."""

    description: str
    required: bool = True


class _Scored(_Strict):
    values: list[int] | None = None
    range: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _one_scale(self) -> _Scored:
        if (self.values is None) == (self.range is None):
            raise ValueError("give exactly one of 'values' (a list) or 'range' ([min, max])")
        if self.range is not None and self.range[0] > self.range[1]:
            raise ValueError(f"range {list(self.range)}: min is greater than max")
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
    """A single integer score drawn from an enumerated set or an inclusive range."""

    key: str = Field(pattern=KEY_PATTERN)
    type: Literal["integer"]
    description: str = ""


class ItemsCriterion(_Scored):
    """A list of ``{Score, Explanation}`` items (one per diagnosis, feature, lead...)."""

    key: str = Field(pattern=KEY_PATTERN)
    type: Literal["items"]
    description: str = ""
    min_items: int = Field(default=1, ge=0)
    max_items: int = Field(ge=1)
    explanation_max_length: int = Field(ge=1, le=4000)
    score_key: str = Field(default="Score", pattern=KEY_PATTERN)
    explanation_key: str = Field(default="Explanation", pattern=KEY_PATTERN)

    @model_validator(mode="after")
    def _items_bounds(self) -> ItemsCriterion:
        if self.min_items > self.max_items:
            raise ValueError("min_items is greater than max_items")
        return self


class StringField(_Strict):
    """A free-text output (reasoning, rationale) bounded in length.

    ``charset: ascii`` (the default) allows printable ASCII without ``"`` or ``\\``: one
    byte per character, so the token budget is tight and a generation can never be cut
    mid-JSON. ``unicode`` allows any character but needs four times the budget.
    """

    key: str = Field(pattern=KEY_PATTERN)
    type: Literal["string"]
    description: str = ""
    min_length: int = Field(default=1, ge=0)
    max_length: int = Field(ge=1, le=8000)
    charset: Literal["ascii", "unicode"] = "ascii"


OutputField = Annotated[
    IntegerCriterion | ItemsCriterion | StringField, Field(discriminator="type")
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
    inputs: dict[str, InputField]
    output: list[OutputField] = Field(min_length=1)
    aggregates: list[Aggregate] = []
    aliases: dict[str, str] = {}
    # Summary pass rates: share of judged cases whose score is >= the threshold.
    pass_thresholds: dict[str, float] = {}
    chat_template_kwargs: dict[str, Any] = {}
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
        scored = {f.key for f in self.output if isinstance(f, IntegerCriterion)} | names
        for key in self.pass_thresholds:
            if key not in scored:
                raise ValueError(f"pass_thresholds: {key!r} is neither an integer criterion "
                                 "nor an aggregate")
        return self

    def alias_of(self, name: str) -> str | None:
        """The paper name declared for an output key or aggregate, if any."""
        for alias, target in self.aliases.items():
            if target == name:
                return alias
        return None


def format_validation_error(path: Path, what: str, error: ValidationError) -> str:
    """``path: invalid <what>`` and one line per problem (location: message), without the
    offending values."""
    lines = [f"{path}: invalid {what} ({error.error_count()} problem(s)):"]
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(top level)"
        lines.append(f"  - {where}: {item['msg']}")
    return "\n".join(lines)


def load_rubric_file(path: Path) -> Rubric:
    """Parse and validate one rubric file; raise :class:`RubricError` naming the file."""
    path = Path(path)
    try:
        raw_bytes = path.read_bytes()
    except OSError as exc:
        raise RubricError(f"{path}: cannot read rubric file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(raw_bytes.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RubricError(f"{path}: not valid UTF-8 YAML: {exc}") from None
    if not isinstance(data, dict):
        raise RubricError(f"{path}: a rubric file must be a YAML mapping")
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as exc:
        raise RubricError(format_validation_error(path, "rubric", exc)) from None
    if rubric.name != path.stem:
        raise RubricError(f"{path}: 'name: {rubric.name}' must match the file name "
                          f"({path.stem}.yaml)")
    # Template problems (syntax, undeclared variables, unfenced case text) are checked here
    # so that a bad rubric fails before any case is read.
    from evaluator.rubrics.render import check_templates

    check_templates(rubric, path)
    return rubric.model_copy(update={
        "source_path": path.resolve(),
        "source_sha256": hashlib.sha256(raw_bytes).hexdigest(),
    })


def rubric_dirs(extra_dirs: list[Path] | tuple[Path, ...] = ()) -> list[Path]:
    """Directories searched for rubrics: user-given ones first, then the built-ins."""
    return [Path(d) for d in extra_dirs] + [BUILTIN_RUBRICS_DIR]


def available_rubrics(extra_dirs: list[Path] | tuple[Path, ...] = ()) -> dict[str, Path]:
    """Map rubric name -> file. A user directory may override a built-in of the same name."""
    found: dict[str, Path] = {}
    for directory in rubric_dirs(extra_dirs):
        if not directory.is_dir():
            raise RubricError(f"{directory}: rubrics directory does not exist")
        for path in sorted(directory.glob("*.yaml")):
            found.setdefault(path.stem, path)
    return found


def load_rubric(name_or_path: str | Path, extra_dirs: list[Path] | tuple[Path, ...] = ()) -> Rubric:
    """Load a rubric by name (searching ``extra_dirs`` then the built-ins) or by file path."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"} and candidate.exists():
        return load_rubric_file(candidate)
    known = available_rubrics(extra_dirs)
    path = known.get(str(name_or_path))
    if path is None:
        raise RubricError(f"unknown rubric {str(name_or_path)!r}; available: "
                          f"{', '.join(sorted(known)) or '(none)'} (add a directory with "
                          "--rubrics-dir, or pass a .yaml path)")
    return load_rubric_file(path)
