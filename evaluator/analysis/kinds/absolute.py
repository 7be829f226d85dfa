"""The absolute kind (one text scored against the rubric), analysis side: the scored summary
(:func:`evaluator.analysis.summary.summary.summarize`); every command that reads scores reads it."""

from __future__ import annotations

from evaluator.analysis.summary.summary import summarize

SHEET = "single"  # a labelling sheet of a score per criterion


def elsewhere(source: object, rubric_name: str, command: str) -> None:
    """None: agree, review, estimate and report all read an absolute rubric's scores."""


__all__ = ["SHEET", "elsewhere", "summarize"]
