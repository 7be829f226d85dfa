"""What a labeller chooses for each criterion of a sheet, taken from the rubric file: the
criterion's description (its scale, e.g. ``4 = Perfect Match, 3 = Minor Discrepancy``), its
allowed values, each with the key that chooses it and, when the rubric defines them
(``levels``), what each value means.

A sheet's ``criteria`` are integer criteria (a choice among the rubric's values), the
names of aggregates or item lists (a number typed in), or, on a pairwise sheet, choice
criteria (left, right or tie on the screen, saved as the run's A, B or tie).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from evaluator.common.errors import UserError
from evaluator.data.sheet import PAIRWISE_VALUES
from evaluator.rubrics.rubric import ChoiceCriterion, IntegerCriterion, ItemsCriterion, Rubric

CANNOT_JUDGE = "x"
# "4 = Perfect Match, 3 = Minor Discrepancy": a value and its anchor, up to the next comma
# or semicolon.
_ANCHOR = re.compile(r"(-?\d+)\s*=\s*([^,;]+)")


class CriterionError(UserError, ValueError):
    """A sheet names a criterion its rubric does not have, or one a labeller cannot rate."""


@dataclass(frozen=True)
class Option:
    """One value a labeller may choose: what the form sends, what the page says, and the
    key that chooses it."""

    value: str
    label: str
    key: str
    level: str = ""  # what the value means, from the rubric's ``levels``


@dataclass(frozen=True)
class LabelCriterion:
    """One criterion as the page shows it. ``kind``: ``scale`` (choose one of ``options``),
    ``number`` (typed in) or ``choice`` (pairwise: left, right, tie)."""

    key: str
    description: str
    kind: Literal["scale", "number", "choice"]
    options: tuple[Option, ...] = ()

    def parse(self, raw: str) -> float | str:
        """The value a form field holds, as the journal stores it (pairwise: still in terms
        of the screen, ``left``/``right``/``tie``); ValueError when it is not allowed."""
        if self.kind == "number":
            number = float(raw)
            if not math.isfinite(number):
                raise ValueError("not a finite number")
            return int(number) if number.is_integer() else number
        if raw not in {o.value for o in self.options}:
            raise ValueError("not one of the choices")
        return raw if self.kind == "choice" else int(raw)


def _anchors(description: str) -> dict[int, str]:
    return {int(v): text.strip() for v, text in _ANCHOR.findall(description)}


def _scale(f: IntegerCriterion) -> LabelCriterion:
    allowed = f.allowed
    anchors = _anchors(f.description)
    # A digit key chooses the value it names when every value is a single digit; else the
    # n-th value (1-9).
    by_value = all(0 <= v <= 9 for v in allowed)
    levels = f.levels or {}
    # The rubric's own text for a value when it has one (``levels``), else the anchor its
    # one-line description gives.
    options = tuple(Option(str(v), f"{v}" + (f" = {anchors[v]}" if v in anchors and v not in
                                              levels else ""),
                           str(v) if by_value else (str(i) if i <= 9 else ""),
                           levels.get(v, ""))
                    for i, v in enumerate(allowed, start=1))
    return LabelCriterion(f.key, f.description, "scale", options)


def _choice(f: ChoiceCriterion) -> LabelCriterion:
    options = [Option("left", "Left is better", "1"), Option("right", "Right is better", "2")]
    if "tie" in f.allowed:
        options.append(Option("tie", "Tie", "3"))
    return LabelCriterion(f.key, f.description, "choice", tuple(options))


def label_criteria(rubric: Rubric, keys: list[str]) -> list[LabelCriterion]:
    """The sheet's criteria (``keys``) as the page shows them, in the sheet's order."""
    by_key = {f.key: f for f in rubric.output}
    aggregates = {a.name: a for a in rubric.aggregates}
    out = []
    for key in keys:
        field = by_key.get(key)
        if isinstance(field, IntegerCriterion):
            out.append(_scale(field))
        elif isinstance(field, ChoiceCriterion):
            out.append(_choice(field))
        elif key in aggregates or isinstance(field, ItemsCriterion):
            of = by_key.get(aggregates[key].of) if key in aggregates else field
            description = getattr(of, "description", "") or f"the {key} aggregate"
            out.append(LabelCriterion(key, description, "number"))
        else:
            raise CriterionError(f"sheet criterion {key!r} is not a criterion of rubric "
                                 f"{rubric.name!r} a labeller can rate; draw the sheet again")
    return out


def to_systems(screen: str, shown_left: str) -> str:
    """A pairwise choice made on the screen (``left``/``right``/``tie``) in terms of the
    run's systems (``A``/``B``/``tie``), given which system was on the left."""
    if screen == "tie":
        return "tie"
    other = "B" if shown_left == "A" else "A"
    value = shown_left if screen == "left" else other
    assert value in PAIRWISE_VALUES
    return value


def to_screen(value: object, shown_left: str) -> str | None:
    """The inverse of :func:`to_systems` (None for a value that is not A, B or tie)."""
    if value == "tie":
        return "tie"
    if value in ("A", "B"):
        return "left" if value == shown_left else "right"
    return None
