"""The columns of a flat export of a results file: one row per record, each score, aggregate,
expected score and confidence in a column of its own, typed as the rubric declares (pure
functions: no pyarrow here, :mod:`evaluator.report.export` maps the kinds to Arrow types).

Names are SQL-friendly (letters, digits, ``_``): ``score_<criterion>``,
``aggregate_<name>``, ``expected_<criterion>``, ``confidence_<criterion>``; a pairwise
rubric's ``outcome_<criterion>``. A criterion of items (``type: items``) is a list column,
one entry per item. The judge's written text (string fields, item explanations, the raw
output of a verdict that failed validation) can quote the case, so its columns exist only
``with_text``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from evaluator.data.results import ResultRecord, ScoreDistribution
from evaluator.rubrics.rubric import (
    ChoiceCriterion,
    IntegerCriterion,
    ItemsCriterion,
    Rubric,
    StringField,
)
from evaluator.rubrics.score_paths import item_path

Kind = Literal["string", "int64", "float64", "list<int64>", "list<float64>", "list<string>"]
# Reductions of several verdicts that can give a criterion a non-integer score (2.5).
FRACTIONAL_REDUCTIONS = ("mean", "median")


@dataclass(frozen=True)
class Column:
    """One column: its name, its kind, and how a record gives its value (None: null)."""

    name: str
    kind: Kind
    value: Callable[[ResultRecord], Any]


def fractional_scores(record: ResultRecord) -> bool:
    """Whether the record's integer criteria were reduced from several verdicts by a mean
    or a median (so a score can be 2.5): their columns are then float64."""
    return bool(record.reduction) and record.reduction.get("integer") in FRACTIONAL_REDUCTIONS


def _field(name: str) -> Callable[[ResultRecord], Any]:
    return lambda record: getattr(record, name)


def _score(key: str) -> Callable[[ResultRecord], Any]:
    return lambda record: None if record.scores is None else record.scores.get(key)


def _items(key: str, inner: str) -> Callable[[ResultRecord], Any]:
    def value(record: ResultRecord) -> list[Any] | None:
        items = None if record.scores is None else record.scores.get(key)
        return None if items is None else [item.get(inner) for item in items]
    return value


def _aggregate(name: str) -> Callable[[ResultRecord], Any]:
    return lambda record: None if record.aggregates is None else record.aggregates.get(name)


def _distribution(path: str, record: ResultRecord) -> ScoreDistribution | None:
    return None if record.distributions is None else record.distributions.get(path)


def _from_distribution(key: str, what: str) -> Callable[[ResultRecord], Any]:
    def value(record: ResultRecord) -> float | None:
        found = _distribution(key, record)
        return None if found is None else getattr(found, what)
    return value


def _items_from_distribution(field: ItemsCriterion, what: str) -> Callable[[ResultRecord], Any]:
    def value(record: ResultRecord) -> list[float | None] | None:
        items = None if record.scores is None else record.scores.get(field.key)
        if items is None or record.distributions is None:
            return None
        found = [_distribution(item_path(field.key, i, field.score_key), record)
                 for i in range(len(items))]
        return [None if d is None else getattr(d, what) for d in found]
    return value


def _pairwise(get: Callable[[Any], Any]) -> Callable[[ResultRecord], Any]:
    return lambda record: None if record.pairwise is None else get(record.pairwise)


def _order_text(key: str, first: str) -> Callable[[ResultRecord], Any]:
    def value(record: ResultRecord) -> str | None:
        if record.pairwise is None:
            return None
        order = next((o for o in record.pairwise.orders if o.first == first), None)
        return None if order is None or order.verdict is None else order.verdict.get(key)
    return value


def _score_columns(rubric: Rubric, fractional: bool) -> list[Column]:
    scores, expected, confidence = [], [], []
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            scores.append(Column(f"score_{field.key}", "float64" if fractional else "int64",
                                 _score(field.key)))
            expected.append(Column(f"expected_{field.key}", "float64",
                                   _from_distribution(field.key, "expected")))
            confidence.append(Column(f"confidence_{field.key}", "float64",
                                     _from_distribution(field.key, "confidence")))
        elif isinstance(field, ItemsCriterion):
            scores.append(Column(f"score_{field.key}", "list<int64>",
                                 _items(field.key, field.score_key)))
            expected.append(Column(f"expected_{field.key}", "list<float64>",
                                   _items_from_distribution(field, "expected")))
            confidence.append(Column(f"confidence_{field.key}", "list<float64>",
                                     _items_from_distribution(field, "confidence")))
    aggregates = [Column(f"aggregate_{agg.name}", "float64", _aggregate(agg.name))
                  for agg in rubric.aggregates]
    return scores + aggregates + expected + confidence


def _pairwise_columns(rubric: Rubric) -> list[Column]:
    columns = [Column(f"system_{side.lower()}", "string",
                      _pairwise(lambda p, s=side: p.systems.get(s))) for side in ("A", "B")]
    columns += [Column(f"length_{side.lower()}", "int64",
                       _pairwise(lambda p, s=side: p.lengths.get(s))) for side in ("A", "B")]
    columns += [Column(f"outcome_{field.key}", "string", _score(field.key))
                for field in rubric.output if isinstance(field, ChoiceCriterion)]
    return columns


def _text_columns(rubric: Rubric) -> list[Column]:
    columns = []
    for field in rubric.output:
        if isinstance(field, StringField) and rubric.pairwise:
            columns += [Column(f"text_{field.key}_{side.lower()}_first", "string",
                               _order_text(field.key, side)) for side in ("A", "B")]
        elif isinstance(field, StringField):
            columns.append(Column(f"text_{field.key}", "string", _score(field.key)))
        elif isinstance(field, ItemsCriterion):
            columns.append(Column(f"explanations_{field.key}", "list<string>",
                                  _items(field.key, field.explanation_key)))
    return columns + [Column("raw_output", "string", _field("raw_output"))]


_RUN_COLUMNS: tuple[tuple[str, Kind], ...] = (
    ("prompt_tokens", "int64"), ("completion_tokens", "int64"), ("cached_tokens", "int64"),
    ("max_new_tokens", "int64"), ("finish_reason", "string"), ("batch_size", "int64"),
    ("batch_seconds", "float64"), ("judge", "string"), ("rubric", "string"),
    ("record_version", "int64"), ("settings_hash", "string"), ("input_file", "string"),
    ("input_line", "int64"),
)


def export_columns(rubric: Rubric, *, fractional: bool = False,
                   with_text: bool = False) -> list[Column]:
    """The export's columns for records of ``rubric``, in order: the case id, status and
    reason; the verdict's columns (scores, aggregates, expected scores, confidences; or a
    pairwise rubric's systems, candidate lengths and outcomes); tokens, timings, judge,
    rubric, record version, settings hash and where the case came from; ``with_text``: the
    judge's written text last. ``fractional``: integer criteria as float64 (see
    :func:`fractional_scores`)."""
    columns = [Column("case_id", "string", _field("case_id")),
               Column("status", "string", _field("status")),
               Column("reason", "string", _field("reason"))]
    columns += _pairwise_columns(rubric) if rubric.pairwise else _score_columns(rubric,
                                                                                fractional)
    columns += [Column(name, kind, _field(name)) for name, kind in _RUN_COLUMNS]
    if with_text:
        columns += _text_columns(rubric)
    return columns


def undeclared_scores(rubric: Rubric, scores: Mapping[str, Any]) -> list[str]:
    """The keys of a verdict that ``rubric`` does not declare (the rubric changed since the
    run, or it is another rubric of the same name)."""
    declared = {field.key for field in rubric.output}
    return sorted(key for key in scores if key not in declared)
