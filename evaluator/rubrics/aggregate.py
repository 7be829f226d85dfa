"""Rubric aggregates: numbers computed from a validated verdict, as the rubric declares, and
the range of values an aggregate can take (:func:`aggregate_range`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any

from evaluator.common.errors import UserError
from evaluator.rubrics.rubric import Aggregate, IntegerCriterion, ItemsCriterion, Rubric


class RangeNotDerivable(UserError, ValueError):
    """An aggregate of the user's rubric whose range of values cannot be derived from its
    declaration; the message says why."""


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


def aggregate_value(agg: Aggregate, scores: Sequence[float]) -> float | None:
    """``agg`` of one verdict's ``scores`` of its key (one score for an integer criterion,
    one per item for an items criterion): ``reduce``, then ``cap``, ``/ divide_by``,
    ``* scale``; None where the reduce has no value (the mean of no item)."""
    value = _reduce(agg, list(scores))
    if value is not None:
        if agg.cap is not None:
            value = min(value, agg.cap)
        value = value / agg.divide_by * agg.scale
    return value


def compute_aggregates(rubric: Rubric, verdict: Mapping[str, Any]) -> dict[str, float | None]:
    """Every declared aggregate for one verdict (a dict that passed the output model)."""
    return {agg.name: aggregate_value(agg, _scores_of(rubric, agg.of, verdict))
            for agg in rubric.aggregates}


def aggregate_range(rubric: Rubric, agg: Aggregate) -> tuple[float, float]:
    """The lowest and the highest value ``agg`` takes over every verdict ``rubric`` allows:
    each is reached by some verdict, and every value it takes lies between them.

    Computed by :func:`aggregate_value` itself on the verdicts whose scores are all one
    allowed value, with the fewest and the most items allowed (and one, where none is
    allowed: the mean of no item has no value). Those hold both ends: ``count`` depends
    only on the number of items; ``sum`` is lowest with every item at the lowest score and
    the fewest or the most items (k times the lowest score is linear in k), highest
    likewise; ``mean``, ``min`` and ``max`` lie between the lowest and the highest score;
    ``share_above`` is 0 only where every item is at or below the threshold, 1 only where
    every one is above it; ``cap`` and a positive factor keep the order, a negative one
    reverses it. :class:`RangeNotDerivable` where ``cap``, ``divide_by``, ``scale`` or
    ``threshold`` is not a finite number (``nan`` or ``inf``: the values would not be
    numbers one can bound)."""
    odd = [name for name in ("threshold", "cap", "divide_by", "scale")
           if (value := getattr(agg, name)) is not None and not math.isfinite(value)]
    if odd:
        raise RangeNotDerivable(f"aggregate {agg.name!r}: its {odd[0]} is not a finite "
                                "number")
    field = next(f for f in rubric.output if f.key == agg.of)
    if isinstance(field, IntegerCriterion):
        counts = {1}
    elif isinstance(field, ItemsCriterion):
        counts = {field.min_items, field.max_items, max(field.min_items, 1)}
    else:  # the rubric refuses an aggregate of a string; a choice is no score
        raise RangeNotDerivable(f"aggregate {agg.name!r}: {agg.of!r} is not a scored "
                                "criterion")
    values = [value for score in field.allowed for k in counts
              if (value := aggregate_value(agg, [float(score)] * k)) is not None]
    low, high = min(values), max(values)
    if not (math.isfinite(low) and math.isfinite(high)):
        # finite settings can still overflow (a scale of 1e308 on a sum): no range to check
        raise RangeNotDerivable(f"aggregate {agg.name!r}: its range overflows a number "
                                f"(from {low} to {high}); its scale and divide_by are too "
                                "extreme to check a gate or margin against")
    return low, high
