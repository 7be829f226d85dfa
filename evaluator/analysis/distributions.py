"""Score distributions: from per-value probabilities to the expected score, the confidence
and the entropy; several verdicts' distributions combined; a verdict's scores read as
expected values (``--score expected``).

A distribution is P(value | prompt, verdict so far) over the values the rubric allows at one
score (see :class:`evaluator.data.results.ScoreDistribution`). Several verdicts for a case
(self-consistency samples, a jury) are combined by the mean of their distributions, a
mixture, so a case the raters split on has a flat combined distribution, not a confident one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from evaluator.data.results import ResultRecord, ScoreDistribution
from evaluator.rubrics.rubric import Aggregate, IntegerCriterion, ItemsCriterion, Rubric
from evaluator.rubrics.score_paths import item_path

ScoreMode = Literal["argmax", "expected"]
SCORE_MODES: tuple[str, ...] = ("argmax", "expected")


def _key(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def summarize(probabilities: Mapping[int, float], chosen: float | None,
              coverage: float = 1.0) -> ScoreDistribution:
    """The record form of one score's distribution. ``probabilities`` need not be
    normalised (they are, here); ``chosen`` is the value in the verdict."""
    total = math.fsum(probabilities.values())
    if not total > 0:
        raise ValueError("a score distribution needs positive mass")
    probs = {int(v): p / total for v, p in sorted(probabilities.items())}
    expected = math.fsum(v * p for v, p in probs.items())
    entropy = -math.fsum(p * math.log2(p) for p in probs.values() if p > 0)
    confidence = None
    if chosen is not None and float(chosen).is_integer() and int(chosen) in probs:
        confidence = probs[int(chosen)]
    return ScoreDistribution(probabilities={_key(v): p for v, p in probs.items()},
                             expected=expected, confidence=confidence,
                             entropy=max(0.0, entropy), coverage=coverage)


def as_probabilities(distribution: ScoreDistribution) -> dict[int, float]:
    """A stored distribution's probabilities keyed by integer value."""
    return {int(v): p for v, p in distribution.probabilities.items()}


def mean_distributions(rubric: Rubric,
                       members: Sequence[Mapping[str, ScoreDistribution] | None],
                       scores: Mapping[str, Any]) -> dict[str, ScoreDistribution] | None:
    """Several verdicts' distributions as one, as their scores are reduced
    (:mod:`evaluator.analysis.panel`): an integer criterion's is the mean of the verdicts'
    (a mixture), with the confidence of the reduced score; items are the first verdict's, as
    written, so their distributions are the first verdict's too (item 0 of one sample need
    not be the same finding as item 0 of another). None when some verdict has none."""
    if not members or any(m is None for m in members):
        return None
    present = [m for m in members if m is not None]
    integer = {f.key for f in rubric.output if isinstance(f, IntegerCriterion)}
    out: dict[str, ScoreDistribution] = {}
    for path, first in present[0].items():
        if path not in integer:
            out[path] = first
            continue
        if not all(path in m for m in present):
            continue
        mixture: dict[int, float] = {}
        for member in present:
            for value, p in as_probabilities(member[path]).items():
                mixture[value] = mixture.get(value, 0.0) + p / len(present)
        coverage = min(m[path].coverage for m in present)
        out[path] = summarize(mixture, _value_at(rubric, scores, path), coverage)
    return out or None


def _value_at(rubric: Rubric, scores: Mapping[str, Any], path: str) -> float | None:
    if path in scores and not isinstance(scores[path], list):
        return scores[path]
    for field in rubric.output:
        if isinstance(field, ItemsCriterion) and path.startswith(f"{field.key}["):
            index = int(path[len(field.key) + 1:path.index("]")])
            items = scores.get(field.key) or []
            return items[index][field.score_key] if index < len(items) else None
    return None


def expected_verdict(rubric: Rubric, record: ResultRecord,
                     ) -> tuple[dict[str, Any], dict[str, float | None] | None] | None:
    """``(scores, aggregates)`` of an ``ok`` record with every score replaced by its
    expected value and each aggregate by its expected value (:func:`expected_aggregates`);
    None when the record has no distribution for some score (record_version 1, or a backend
    without probabilities)."""
    if record.status != "ok" or record.scores is None or not record.distributions:
        return None
    dists = record.distributions
    scores = dict(record.scores)
    per_field: dict[str, list[ScoreDistribution]] = {}
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            if field.key not in dists:
                return None
            scores[field.key] = dists[field.key].expected
            per_field[field.key] = [dists[field.key]]
        elif isinstance(field, ItemsCriterion):
            items, found = [], []
            for i, item in enumerate(scores[field.key]):
                path = item_path(field.key, i, field.score_key)
                if path not in dists:
                    return None
                items.append(dict(item, **{field.score_key: dists[path].expected}))
                found.append(dists[path])
            scores[field.key] = items
            per_field[field.key] = found
    return scores, expected_aggregates(rubric, per_field) or None


def _highest(rubric: Rubric, agg: Aggregate) -> float:
    """The largest value ``agg`` can take before its cap."""
    field = next(f for f in rubric.output if f.key == agg.of)
    top = float(max(abs(v) for v in field.allowed))  # type: ignore[union-attr]
    count = field.max_items if isinstance(field, ItemsCriterion) else 1
    return {"sum": top * count, "count": float(count), "share_above": 1.0}.get(agg.reduce, top)


def expected_aggregates(rubric: Rubric, per_field: Mapping[str, Sequence[ScoreDistribution]],
                        ) -> dict[str, float | None]:
    """Each aggregate's expected value from the scores' distributions, by linearity of
    expectation: ``sum``/``mean`` of the expected scores, ``count`` as is, ``share_above``
    the mean probability of a score above the threshold (not the share of expected scores
    above it). ``min``, ``max`` and a ``cap`` the aggregate can exceed need the scores'
    joint distribution, which the record does not have: None (not computed, never guessed)."""
    out: dict[str, float | None] = {}
    for agg in rubric.aggregates:
        dists = per_field.get(agg.of, [])
        value: float | None = None
        if agg.reduce == "count":
            value = float(len(dists))
        elif agg.reduce in ("sum", "mean"):
            total = math.fsum(d.expected for d in dists)
            value = total if agg.reduce == "sum" else (total / len(dists) if dists else None)
        elif agg.reduce == "share_above" and dists:
            assert agg.threshold is not None
            value = math.fsum(p for d in dists for v, p in as_probabilities(d).items()
                              if v > agg.threshold) / len(dists)
        if value is not None and agg.cap is not None and _highest(rubric, agg) > agg.cap:
            value = None  # E[min(X, cap)] is not min(E[X], cap)
        if value is not None:
            value = value / agg.divide_by * agg.scale
        out[agg.name] = value
    return out


def verdict_view(rubric: Rubric, record: ResultRecord, mode: ScoreMode,
                 ) -> tuple[dict[str, Any], dict[str, float | None] | None] | None:
    """A record's ``(scores, aggregates)`` as ``mode`` reads them: ``argmax`` the verdict
    as written (reduced, for several verdicts); ``expected`` see :func:`expected_verdict`.
    None when the record has no scores in that mode."""
    if mode == "argmax":
        if record.status != "ok" or record.scores is None:
            return None
        return dict(record.scores), record.aggregates
    return expected_verdict(rubric, record)


def _item_paths(field_: ItemsCriterion, scores: Mapping[str, Any] | None) -> list[str]:
    items = (scores or {}).get(field_.key) or []
    return [item_path(field_.key, i, field_.score_key) for i in range(len(items))]


def criterion_paths(field_: IntegerCriterion | ItemsCriterion,
                    record: ResultRecord) -> list[str]:
    """The score paths of a criterion in a record: its key, or one per item."""
    if isinstance(field_, IntegerCriterion):
        return [field_.key]
    return _item_paths(field_, record.scores)
