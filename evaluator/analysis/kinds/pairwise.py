"""The pairwise kind (two candidates compared), analysis side: its summary
(:func:`evaluator.analysis.summary.summary.pairwise_summary`), and the refusal of the commands that
read scores (its figures are ``evaluator compare``'s)."""

from __future__ import annotations

from collections.abc import Iterable

from evaluator.analysis.summary.records import PairwiseSummary
from evaluator.analysis.summary.summary import pairwise_summary
from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import Rubric

SHEET = "pairwise"  # a labelling sheet of A/B/tie per criterion


def summarize(rubric: Rubric, judge: str, records: Iterable[ResultRecord], *,
              score_mode: str = "argmax", source: str = "the results") -> PairwiseSummary:
    """:func:`evaluator.analysis.summary.summary.pairwise_summary` (a choice has no expected score:
    ``score_mode`` and ``source`` do not apply)."""
    return pairwise_summary(rubric, judge, records)


def elsewhere(source: object, rubric_name: str, command: str) -> str:
    """The one-line refusal of a command that reads scores, given a pairwise results file."""
    return (f"{source} holds pairwise verdicts (rubric {rubric_name!r}): `evaluator {command}` "
            "reads scores; compare two systems with `evaluator compare`")
