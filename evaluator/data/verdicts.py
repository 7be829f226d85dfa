"""Whether a stored verdict is one its rubric can produce (pure functions of the rubric and
plain values): what the results reader checks on every ``ok`` line once it has the rubric.

A judge's verdict always validates against the rubric's output model (constrained
decoding; :func:`evaluator.rubrics.schema.build_output_model`), so one that does not - a
score of 99 on a 1-5 scale, ``true``, ``"3"`` - was edited, or the rubric changed since the
run. Several verdicts reduced to one (samples, a jury: :mod:`evaluator.analysis.panel`)
give an integer criterion a median or mean, which lies within the scale, and every other
output the first verdict's. A score distribution is over the allowed values of a score the
verdict has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, Rubric
from evaluator.rubrics.schema import build_output_model

# An items criterion's score path: "<key>[<i>].<score_key>" (evaluator.rubrics.score_paths).
_ITEM_PATH = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[(\d+)\]\.([A-Za-z_][A-Za-z0-9_]*)")


class VerdictCheck:
    """The checks of one rubric's verdicts (its output model built once)."""

    def __init__(self, rubric: Rubric):
        self.rubric = rubric
        self._model: type[BaseModel] = build_output_model(rubric)
        # The allowed values as a distribution's keys (JSON text), per output key.
        self._values = {field.key: frozenset(str(v) for v in field.allowed)
                        for field in rubric.output
                        if isinstance(field, (IntegerCriterion, ItemsCriterion))}
        self._items = {field.key: field for field in rubric.output
                       if isinstance(field, ItemsCriterion)}

    def verdict(self, scores: Mapping[str, Any]) -> str | None:
        """Why ``scores`` is not a verdict of the rubric (``"where: what"``, no value
        quoted: a verdict's text may quote the case), or None. Strict: ``true`` is not 1,
        ``"3"`` not 3, ``3.0`` not 3."""
        try:
            self._model.model_validate(dict(scores), strict=True)
        except ValidationError as exc:
            errors = exc.errors(include_input=False, include_url=False)
            # An output the rubric does not declare says most (another rubric of that name,
            # or one changed since the run): named before the outputs it then lacks.
            first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
            where = ".".join(map(str, first["loc"]))
            message = ("an output the rubric does not declare"
                       if first["type"] == "extra_forbidden" else first["msg"])
            return f"scores.{where}: {message}" if where else f"scores: {message}"
        return None

    def reduced(self, scores: Mapping[str, Any], first: Mapping[str, Any]) -> str | None:
        """Why ``scores``, reduced from several verdicts whose first is ``first``, is not
        what a reduction gives, or None: each integer criterion a number within the scale,
        every other output the first verdict's."""
        for field in self.rubric.output:
            value = scores.get(field.key)
            if isinstance(field, IntegerCriterion):
                low, high = min(field.allowed), max(field.allowed)
                if (isinstance(value, bool) or not isinstance(value, (int, float))
                        or not low <= value <= high):
                    return (f"scores.{field.key}: not a reduction of verdicts on the scale "
                            f"{low} to {high}")
            elif value != first.get(field.key):
                return f"scores.{field.key}: not the first verdict's, as a reduction keeps it"
        extra = sorted(set(scores) - {field.key for field in self.rubric.output})
        return f"scores.{extra[0]}: not an output of the rubric" if extra else None

    def distributions(self, scores: Mapping[str, Any],
                      distributions: Mapping[str, Iterable[str]]) -> str | None:
        """Why ``distributions`` (score path -> the values given a probability) are not
        over the allowed values of scores the verdict ``scores`` has, or None. Paths as
        :mod:`evaluator.rubrics.score_paths` makes them."""
        for path, values in distributions.items():
            allowed = self._allowed_at(path, scores)
            if allowed is None:
                return f"distributions.{path}: the verdict has no such score"
            if not allowed.issuperset(values):
                return f"distributions.{path}: a value the rubric does not allow there"
        return None

    def _allowed_at(self, path: str, scores: Mapping[str, Any]) -> frozenset[str] | None:
        if path in scores and path not in self._items:
            return self._values.get(path)
        match = _ITEM_PATH.fullmatch(path)
        field = self._items.get(match.group(1)) if match else None
        if match is None or field is None or match.group(3) != field.score_key:
            return None
        items = scores.get(field.key)
        if not isinstance(items, list) or int(match.group(2)) >= len(items):
            return None
        return self._values[field.key]
