"""The absolute kind (one text scored against the rubric), analysis side: the scored summary
(:func:`evaluator.analysis.summary.summary.summarize`), and its review sheet (of its scored
criteria, drawn by any design); every command that reads scores reads it."""

from __future__ import annotations

from evaluator.analysis.summary.summary import summarize
from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, Rubric

SHEET = "single"  # a labelling sheet of a score per criterion
SHEET_CRITERIA, SHEET_VERB = (IntegerCriterion, ItemsCriterion), "scores"  # what --criterion picks
SHEET_COLUMNS: tuple[str, ...] = ()


def elsewhere(source: object, rubric_name: str, command: str) -> None:
    """None: agree, review, estimate and report all read an absolute rubric's scores."""


def sheet_refusal(source: str, rubric: Rubric, design: str) -> None:
    """None (:func:`elsewhere`'s): ``evaluator review`` draws its sheet by every design."""
    return elsewhere(source, rubric.name, "review")


def sheet_fields(record: ResultRecord) -> dict[str, str]:
    """No cells: the absolute kind adds no column of its own."""
    return {}


__all__ = ["SHEET", "SHEET_COLUMNS", "SHEET_CRITERIA", "SHEET_VERB", "elsewhere", "sheet_fields",
           "sheet_refusal", "summarize"]
