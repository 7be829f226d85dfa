"""A study's plan (issue 48): what a comparison of systems will decide, declared in one YAML
file before any label is given, so that the decision follows a rule stated in advance
instead of the figures read on the day.

``STUDY_DIR/study.yaml`` states the rubric; the systems, each with a name and its results
file; the **primary endpoint** (one criterion, its mean or its pass rate through a gate
such as ``accuracy>=4``); the **comparison** (superiority, or non-inferiority with a margin
in the criterion's units, against a reference system); the confidence level; secondary
endpoints (reported, never decisive); and the labels' design (random or active, cases,
labellers, overlap, seed). :func:`load_plan` reads it strictly (:mod:`evaluator.common.
strict_yaml`: no aliases that expand, no duplicate key, bounded size), checks it against
the rubric and the files, and gives the plan with the SHA-256 of the bytes read: the hash
the sheet drawn for the study records, so that a later edit is seen. Every problem is one
line naming the file and the key, never a value from a results file.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from evaluator.analysis.gates import Gate, GateError, parse_gate
from evaluator.common.errors import UserError
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.common.record import Record
from evaluator.common.strict import format_validation_error
from evaluator.common.strict_yaml import YamlRefused, load_yaml_file, parse_yaml
from evaluator.data.files import same_file, show_path
from evaluator.data.results import ResultsFileDamaged, read_results
from evaluator.rubrics.aggregate import RangeNotDerivable, aggregate_range
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import IntegerCriterion, Rubric, RubricError

PLAN_FILE = "study.yaml"
PLAN_FORMAT = 1
MAX_SYSTEMS = 2  # a comparison of two systems; more is a later step
MAX_LABELLERS = 50
MAX_CASES = 100_000
MAX_NAME = 40
MAX_SECONDARY = 10


class StudyPlanError(UserError, ValueError):
    """A study plan that cannot be used: one line naming the file and the key."""


class _Strict(Record):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _scripts(value: str) -> list[str]:
    """The scripts of the letters in ``value`` (LATIN, CYRILLIC, GREEK, ...), by their
    Unicode names, in order of first use."""
    found = [unicodedata.name(ch, "UNKNOWN").split(" ")[0] for ch in value if ch.isalpha()]
    return list(dict.fromkeys(found))


def _plain_name(value: str, what: str, limit: int = MAX_NAME) -> str:
    if (not value.strip() or len(value) > limit or not value.isprintable()
            or value != value.strip()):
        raise ValueError(f"{what} must be 1-{limit} printable characters, without leading "
                         "or trailing spaces")
    scripts = _scripts(value)
    if len(scripts) > 1:
        # A Cyrillic "а" in a Latin name looks like "a": two names would read alike.
        raise ValueError(f"{what} mixes letters of several scripts "
                         f"({' and '.join(s.title() for s in scripts[:2])}): write it in one")
    return value


class Endpoint(_Strict):
    """A criterion's ``mean``, or its ``pass_rate`` through ``gate`` (``accuracy>=4``);
    ``better``: which way is better (``higher``, as on the built-in rubrics' scales, 5
    best; ``lower`` for a gate whose pass is a bad answer, e.g. ``hallucination<=2``)."""

    criterion: str
    statistic: Literal["mean", "pass_rate"] = "mean"
    gate: str | None = None
    better: Literal["higher", "lower"] = "higher"

    @model_validator(mode="after")
    def _gate_with_a_pass_rate(self) -> Endpoint:
        if self.statistic == "pass_rate":
            if self.gate is None:
                raise ValueError("a pass_rate needs its gate, e.g. gate: accuracy>=4")
            try:
                gate = parse_gate(self.gate)
            except GateError as exc:
                raise ValueError(str(exc).replace("--pass ", "gate ")) from None
            if gate.key != self.criterion:
                raise ValueError(f"the gate {self.gate!r} is on {gate.key!r}, not on the "
                                 f"endpoint's criterion {self.criterion!r}")
        elif self.gate is not None:
            raise ValueError("a mean takes no gate (for a pass rate: statistic: pass_rate)")
        return self

    @property
    def parsed_gate(self) -> Gate | None:
        return parse_gate(self.gate) if self.gate is not None else None

    def describe(self) -> str:
        """``mean accuracy`` or ``pass rate of accuracy>=4``."""
        return (f"mean {self.criterion}" if self.statistic == "mean"
                else f"pass rate of {self.gate}")


class Comparison(_Strict):
    """``superiority`` of the other system over ``reference``, or its ``non-inferiority``:
    worse by less than ``margin`` (in the endpoint's units: points of the criterion's scale,
    or a share for a pass rate)."""

    type: Literal["superiority", "non-inferiority"]
    reference: str
    margin: float | None = None

    @field_validator("margin", mode="before")
    @classmethod
    def _a_number(cls, value: object) -> object:
        if isinstance(value, str):  # a ValueError: pydantic reports it (not a TypeError)
            raise ValueError(f"{value!r} is text, not a number: write it as 0.25 (YAML reads "  # noqa: TRY004
                             "a quoted value, and an exponent without a point such as 1e-1, "
                             "as text)")
        return value

    @model_validator(mode="after")
    def _margin(self) -> Comparison:
        if self.type == "non-inferiority":
            if self.margin is None:
                raise ValueError("non-inferiority needs its margin (how much worse still "
                                 "counts as not worse, in the endpoint's units)")
            if not (math.isfinite(self.margin) and self.margin > 0):
                raise ValueError("the margin must be a positive number (B may be worse than "
                                 "the reference by less than it)")
        elif self.margin is not None:
            raise ValueError("superiority takes no margin (for a margin: type: "
                             "non-inferiority)")
        return self


class System(_Strict):
    """A system compared: its ``name`` (how every page calls it) and its ``results`` file
    (relative to the plan's folder)."""

    name: str
    results: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        _plain_name(value, "a system's name")
        if any(mark in value for mark in ("(", ")", " - ", "#")):
            raise ValueError("a system's name may not hold '(', ')', '#' or ' - ' (pages "
                             "write 'B - A' and '(reference)' around it)")
        return value


class LabelsDesign(_Strict):
    """How the cases clinicians label are drawn and shared (``evaluator review``'s options)."""

    design: Literal["random", "active"] = "random"
    n: int = Field(ge=1, le=MAX_CASES)
    labellers: list[str] = Field(min_length=1, max_length=MAX_LABELLERS)
    overlap: float = Field(0.0, ge=0.0, le=1.0)
    seed: int = Field(ge=0, le=2 ** 32 - 1)

    @field_validator("labellers")
    @classmethod
    def _labellers(cls, value: list[str]) -> list[str]:
        for name in value:
            _plain_name(name, "a labeller's name")
        if len(set(value)) != len(value):
            raise ValueError("a labeller is named twice")
        return value


class StudyPlan(_Strict):
    """The plan as declared (see the module docstring)."""

    format: Literal[1] = PLAN_FORMAT
    title: str
    rubric: str
    systems: list[System] = Field(min_length=MAX_SYSTEMS, max_length=MAX_SYSTEMS)
    primary: Endpoint
    comparison: Comparison
    # 95% only for now: the figures the decision reads (estimate, report) are 95% intervals.
    confidence: Literal[0.95] = 0.95
    secondary: list[Endpoint] = Field(default=[], max_length=MAX_SECONDARY)
    labels: LabelsDesign

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        return _plain_name(value, "the title", 200)

    @model_validator(mode="after")
    def _names(self) -> StudyPlan:
        names = [s.name for s in self.systems]
        folded = {unicodedata.normalize("NFKC", n).casefold() for n in names}
        if len(folded) != len(names):
            raise ValueError("two systems have one name (ignoring case); give each its own")
        if len({s.results for s in self.systems}) != len(self.systems):
            raise ValueError("two systems name one results file")
        if self.labels.overlap > 0 and len(self.labels.labellers) < 2:
            raise ValueError("labels.overlap needs two or more labellers (the share of cases "
                             "every labeller labels)")
        if self.comparison.reference not in names:
            raise ValueError(f"comparison.reference must name one of the systems "
                             f"({', '.join(names)})")
        if self.primary in self.secondary:
            raise ValueError("the primary endpoint is also listed as secondary")
        return self

    @property
    def reference(self) -> System:
        """The system the other is compared with (A)."""
        return next(s for s in self.systems if s.name == self.comparison.reference)

    @property
    def candidate(self) -> System:
        """The system compared with the reference (B)."""
        return next(s for s in self.systems if s.name != self.comparison.reference)

    def hypothesis(self) -> str:
        """The question the study answers, in one line, with the rule that decides it."""
        b, a, what = self.candidate.name, self.reference.name, self.primary.describe()
        level = f"{100 * self.confidence:g}%"
        higher = self.primary.better == "higher"
        side, end = ("above", "lower") if higher else ("below", "upper")
        if self.comparison.type == "superiority":
            return (f"is {b} better than {a} on {what} ({self.primary.better} is better)? "
                    f"superiority: the {end} end of the {level} CI of {b} - {a} {side} 0 "
                    "(one-sided 2.5%)")
        margin = self.comparison.margin
        bound = f"-{margin:g}" if higher else f"+{margin:g}"
        worse = "below" if higher else "above"
        return (f"is {b} at worst {margin:g} {worse} {a} on {what} ({self.primary.better} is "
                f"better)? non-inferiority: the {end} end of the {level} CI of {b} - {a} "
                f"{side} {bound} (one-sided 2.5%)")


@dataclass(frozen=True)
class LoadedPlan:
    """A plan read and checked: ``plan``, its ``path``, the SHA-256 of its bytes, the
    ``rubric`` it names and each system's results file resolved (``results``, in the
    plan's order)."""

    plan: StudyPlan
    path: Path
    sha256: str
    rubric: Rubric
    results: tuple[Path, ...]


def plan_path(study: Path) -> Path:
    """``study`` itself when it is a file, else ``study/study.yaml``."""
    study = Path(study)
    return study / PLAN_FILE if study.is_dir() else study


def load_plan(study: Path, rubrics_dirs: tuple[Path, ...] = ()) -> LoadedPlan:
    """Read, validate and check the plan of ``study`` (a study folder or its plan file)."""
    path = plan_path(study)
    try:
        data, raw = load_yaml_file(path, "study plan")
    except YamlRefused as exc:
        raise StudyPlanError(str(exc)) from None
    return _checked(data, raw, path, rubrics_dirs)


def load_plan_bytes(raw: bytes, path: Path, rubrics_dirs: tuple[Path, ...] = ()) -> LoadedPlan:
    """A plan from its bytes (the copy frozen when the study's sheets were drawn), read and
    checked as :func:`load_plan` reads the file; ``path`` is where it stood (the results
    files are relative to its folder)."""
    try:
        data = parse_yaml(raw, path)
    except YamlRefused as exc:
        raise StudyPlanError(str(exc)) from None
    return _checked(data, raw, path, rubrics_dirs)


def _checked(data: object, raw: bytes, path: Path, rubrics_dirs: tuple[Path, ...],
             ) -> LoadedPlan:
    if not isinstance(data, dict):
        raise StudyPlanError(f"{path}: a study plan is a mapping of keys (title, rubric, "
                             "systems, primary, comparison, labels, ...)")
    try:
        plan = StudyPlan.model_validate(data)
    except ValidationError as exc:
        raise StudyPlanError(format_validation_error(path, "study plan", exc)) from None
    try:
        rubric = load_rubric(plan.rubric, rubrics_dirs)
    except RubricError as exc:
        raise StudyPlanError(f"{path}: rubric: {exc}") from None
    if rubric.candidates is not None:
        raise StudyPlanError(f"{path}: rubric: {rubric.name!r} is pairwise (two answers "
                             "compared side by side); a study compares each system's answers "
                             "scored on their own: give a pointwise rubric")
    for where, endpoint in [("primary", plan.primary)] + [
            (f"secondary.{i}", e) for i, e in enumerate(plan.secondary)]:
        _check_endpoint(path, where, endpoint, rubric)
    _check_margin(path, plan, rubric)
    results = tuple(_results_file(path, i, system) for i, system in enumerate(plan.systems))
    _check_results(path, plan, rubric, results, rubrics_dirs)
    return LoadedPlan(plan, path, hashlib.sha256(raw).hexdigest(), rubric, results)


def _check_margin(path: Path, plan: StudyPlan, rubric: Rubric) -> None:
    """A non-inferiority margin below the endpoint's span (a pass rate's: 1; a mean on an
    integer criterion's scale: highest - lowest; on an aggregate: the same of the range its
    parts' scales and its operation give, :func:`aggregate_range`): one as wide declares B
    non-inferior whatever it does."""
    margin = plan.comparison.margin
    if margin is None:
        return
    if plan.primary.statistic == "pass_rate":
        span, what = 1.0, "a pass rate's span (1)"
    else:
        key = rubric.aliases.get(plan.primary.criterion, plan.primary.criterion)
        scored = {f.key: f for f in rubric.output if isinstance(f, IntegerCriterion)}
        if key in scored:
            values = [float(v) for v in scored[key].allowed]
            span = max(values) - min(values)
            what = f"{key!r}'s span ({span:g})"
        else:
            low, high = _aggregate_range(path, "comparison.margin", key, rubric)
            span = high - low
            what = f"aggregate {key!r}'s span ({span:g}: from {low:g} to {high:g})"
    if margin >= span:
        raise StudyPlanError(f"{path}: comparison.margin: {margin:g} is not below {what}: "
                             "any result would be non-inferior")


def _check_results(path: Path, plan: StudyPlan, rubric: Rubric, results: tuple[Path, ...],
                   rubrics_dirs: tuple[Path, ...]) -> None:
    """Each results file is a results file of the plan's rubric, the two are not one file,
    they judged the same cases ok (each case is drawn once for both) and at least
    ``labels.n`` of them."""
    if same_file(results[0], results[1]):
        raise StudyPlanError(f"{path}: systems: both systems' results are one file")
    judged = []
    for index, target in enumerate(results):
        try:
            records = read_results(target, rubrics_dirs)
        except (ResultsFileDamaged, UserError) as exc:
            raise StudyPlanError(f"{path}: systems.{index}.results: {exc}") from None
        names = {r.rubric for r in records}
        if names != {rubric.name}:
            shown = ", ".join(sorted(names)) or "no record"
            raise StudyPlanError(f"{path}: systems.{index}.results: {target} holds results of "
                                 f"{shown}, not of the plan's rubric {rubric.name!r}")
        judged.append({r.case_id for r in records if r.status == "ok"})
    if judged[0] != judged[1]:
        first, second = (s.name for s in plan.systems)
        a, b = judged
        raise StudyPlanError(
            f"{path}: systems: the systems judged different cases ok ({first} has "
            f"{len(a - b)} that {second} has not, {second} {len(b - a)} that {first} has "
            "not): a study compares both on the same cases; judge them again (evaluator run "
            "into the same --output judges again the cases missing or with a backend_error; "
            "other failures need --force-new)")
    common = len(judged[0] & judged[1])
    if plan.labels.n > common:
        raise StudyPlanError(f"{path}: labels.n: {plan.labels.n} case(s) to label, but the "
                             f"two systems share {common} case(s) judged ok")


def _check_endpoint(path: Path, where: str, endpoint: Endpoint, rubric: Rubric) -> None:
    """The endpoint's criterion is one the rubric scores (an integer criterion or an
    aggregate; an alias names its criterion), its gate's threshold inside the scale (an
    integer criterion's allowed values; an aggregate's range, :func:`aggregate_range`): a
    gate every value passes, or none, cannot tell answers apart."""
    scored = {f.key: f for f in rubric.output if isinstance(f, IntegerCriterion)}
    aggregates = {a.name for a in rubric.aggregates}
    key = rubric.aliases.get(endpoint.criterion, endpoint.criterion)
    if key not in scored and key not in aggregates:
        raise StudyPlanError(f"{path}: {where}.criterion: {endpoint.criterion!r} is not a "
                             f"scored criterion of rubric {rubric.name!r} (it scores: "
                             f"{', '.join([*scored, *aggregates])})")
    gate = endpoint.parsed_gate
    if gate is None:
        return
    if key in scored:
        allowed = [float(v) for v in scored[key].allowed]
        scale = f"{key!r}'s scale ({', '.join(f'{v:g}' for v in allowed)})"
    else:
        # A gate is a half-line (>=, >, <=, <): it passes every value of the range when it
        # passes both ends, none when it passes neither (both ends are reached).
        low, high = _aggregate_range(path, f"{where}.gate", key, rubric)
        allowed = [low, high]
        scale = (f"aggregate {key!r} (from {low:g} to {high:g}, as its parts' scales and "
                 "its operation give)")
    passing = [v for v in allowed if gate.passes(v)]
    if not passing or len(passing) == len(allowed):
        raise StudyPlanError(f"{path}: {where}.gate: {endpoint.gate!r} is passed by "
                             f"{'no' if not passing else 'every'} value of {scale}: it "
                             "cannot tell answers apart")


def _aggregate_range(path: Path, where: str, key: str, rubric: Rubric) -> tuple[float, float]:
    """The lowest and highest value of the rubric's aggregate ``key``
    (:func:`aggregate_range`); where they cannot be derived, the plan is refused saying so
    (``where``: the plan's key checked against them), never checked against a guess."""
    aggregate = next(a for a in rubric.aggregates if a.name == key)
    try:
        return aggregate_range(rubric, aggregate)
    except RangeNotDerivable as exc:
        raise StudyPlanError(f"{path}: {where}: cannot be checked against the range of "
                             f"aggregate {key!r}, which cannot be derived ({exc}); fix the "
                             "aggregate in the rubric, or choose another endpoint") from None


def _results_file(path: Path, index: int, system: System) -> Path:
    """A system's results file, relative to the plan's folder: a regular file."""
    target = Path(system.results)
    target = target if target.is_absolute() else path.parent / target
    try:
        check_regular_file(target, "results file")
    except NotARegularFile as exc:
        raise StudyPlanError(f"{path}: systems.{index}.results: {exc}") from None
    except (OSError, ValueError):  # missing, a loop, a NUL byte: said below
        pass
    try:
        found = target.is_file()
    except (OSError, ValueError):
        found = False
    if not found:
        raise StudyPlanError(f"{path}: systems.{index}.results: no file {show_path(target)} (a path "
                             "relative to the plan's folder)")
    return target
