"""Where each score (or a pairwise verdict's choice) sits in a verdict: its path, the values
the rubric allows there, and the byte offset of its value in the verdict's JSON text (pure
functions). A choice's value is a JSON string: its offset is that of the opening quote.

Paths: a top-level integer criterion is its key (``"accuracy"``); the score of item ``i`` of
an items criterion is ``"<key>[<i>].<score_key>"`` (``"Rhythm[0].Score"``). Records key
their ``distributions`` by these paths.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evaluator.rubrics.rubric import ChoiceCriterion, IntegerCriterion, ItemsCriterion, Rubric


@dataclass(frozen=True)
class ScoreSlot:
    """One score of a verdict: its path, the value given and the values allowed."""

    path: str
    value: int | str
    allowed: tuple[int, ...] | tuple[str, ...]


def item_path(key: str, index: int, score_key: str) -> str:
    """The path of item ``index``'s score in items criterion ``key``."""
    return f"{key}[{index}].{score_key}"


def score_slots(rubric: Rubric, scores: Mapping[str, Any]) -> list[ScoreSlot]:
    """Every score in a validated verdict, in the order the verdict's text has them."""
    slots: list[ScoreSlot] = []
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            slots.append(ScoreSlot(field.key, int(scores[field.key]), tuple(field.allowed)))
        elif isinstance(field, ItemsCriterion):
            slots.extend(ScoreSlot(item_path(field.key, i, field.score_key),
                                   int(item[field.score_key]), tuple(field.allowed))
                         for i, item in enumerate(scores[field.key]))
    return slots


def choice_slots(rubric: Rubric, scores: Mapping[str, Any]) -> list[ScoreSlot]:
    """Every choice of a validated pairwise verdict, in the order the verdict has them
    (the ``value`` is the choice written: ``"A"``, ``"B"`` or ``"tie"``)."""
    return [ScoreSlot(field.key, scores[field.key], tuple(field.allowed))
            for field in rubric.output if isinstance(field, ChoiceCriterion)]


def _compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def value_offsets(rubric: Rubric, scores: Mapping[str, Any], text: str) -> dict[str, int] | None:
    """Byte offset in ``text`` of every score's value, by path; None when ``text`` is not
    the compact JSON of ``scores`` in the rubric's key order (the grammar's output always
    is: compact separators, only ``\\"`` and ``\\\\`` escaped)."""
    out = bytearray(b"{")
    offsets: dict[str, int] = {}
    for n, field in enumerate(rubric.output):
        if n:
            out += b","
        out += _compact(field.key) + b":"
        value = scores[field.key]
        if isinstance(field, (IntegerCriterion, ChoiceCriterion)):
            offsets[field.key] = len(out)
            out += _compact(value)
        elif isinstance(field, ItemsCriterion):
            out += b"["
            for i, item in enumerate(value):
                if i:
                    out += b","
                out += b"{" + _compact(field.score_key) + b":"
                offsets[item_path(field.key, i, field.score_key)] = len(out)
                out += (_compact(item[field.score_key]) + b"," + _compact(field.explanation_key)
                        + b":" + _compact(item[field.explanation_key]) + b"}")
            out += b"]"
        else:
            out += _compact(value)
    out += b"}"
    return offsets if bytes(out) == text.encode() else None
