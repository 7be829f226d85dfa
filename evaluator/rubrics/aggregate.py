"""Rubric aggregates: numbers computed from a validated verdict, as the rubric declares."""

from __future__ import annotations

from collections.abc import Mapping
from statistics import fmean
from typing import Any

from evaluator.rubrics.rubric import Aggregate, ItemsCriterion, Rubric


def _scores_of(rubric: Rubric, key: str, verdict: Mapping[str, Any]) -> list[float]:
    field = next(f for f in rubric.output if f.key == key)
    value = verdict[key]
    if isinstance(field, ItemsCriterion):
        return [float(item[field.score_key]) for item in value]
    return [float(value)]


def _reduce(agg: Aggregate, scores: list[float]) -> float | None:
    if agg.reduce == "count":
        return float(len(scores))
    if not scores:
        return 0.0 if agg.reduce == "sum" else None
    if agg.reduce == "sum":
        return float(sum(scores))
    if agg.reduce == "mean":
        return fmean(scores)
    if agg.reduce == "min":
        return min(scores)
    if agg.reduce == "max":
        return max(scores)
    # share_above
    assert agg.threshold is not None
    return sum(1 for s in scores if s > agg.threshold) / len(scores)


def compute_aggregates(rubric: Rubric, verdict: Mapping[str, Any]) -> dict[str, float | None]:
    """Every declared aggregate for one verdict (a dict that passed the output model)."""
    out: dict[str, float | None] = {}
    for agg in rubric.aggregates:
        value = _reduce(agg, _scores_of(rubric, agg.of, verdict))
        if value is not None:
            if agg.cap is not None:
                value = min(value, agg.cap)
            value = value / agg.divide_by * agg.scale
        out[agg.name] = value
    return out
