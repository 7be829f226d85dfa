"""The pairwise kind (two candidates compared), analysis side: its summary
(:func:`evaluator.analysis.summary.summary.pairwise_summary`), the refusal of the commands that
read scores (its figures are ``evaluator compare``'s), and its review sheet (drawn at
random, blind, each choice criterion labelled A, B or tie in terms of the run's two systems)."""

from __future__ import annotations

from collections.abc import Iterable

from evaluator.analysis.summary.records import PairwiseSummary
from evaluator.analysis.summary.summary import pairwise_summary
from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import ChoiceCriterion, Rubric

SHEET = "pairwise"  # a labelling sheet of A/B/tie per criterion
SHEET_CRITERIA, SHEET_VERB = (ChoiceCriterion,), "compares"  # what --criterion picks
SHEET_COLUMNS = ("system_a", "system_b")  # which system is A and which is B


def summarize(rubric: Rubric, judge: str, records: Iterable[ResultRecord], *,
              score_mode: str = "argmax", source: str = "the results") -> PairwiseSummary:
    """:func:`evaluator.analysis.summary.summary.pairwise_summary` (a choice has no expected score:
    ``score_mode`` and ``source`` do not apply)."""
    return pairwise_summary(rubric, judge, records)


def elsewhere(source: object, rubric_name: str, command: str) -> str:
    """The one-line refusal of a command that reads scores, given a pairwise results file."""
    return (f"{source} holds pairwise verdicts (rubric {rubric_name!r}): `evaluator {command}` "
            "reads scores; compare two systems with `evaluator compare`")


def sheet_refusal(source: str, rubric: Rubric, design: str) -> str | None:
    """The one line that refuses a sheet of a design other than random."""
    return None if design == "random" else (
        f"{source} holds pairwise verdicts (rubric {rubric.name!r}): `evaluator review` draws a "
        f"pairwise sheet with --design random only (--design {design} ranks by the judge's "
        "scores); its labels go to `evaluator compare --labels`")


def sheet_fields(record: ResultRecord) -> dict[str, str]:
    """The two systems' names, from the case's record."""
    pair = record.pairwise
    return {} if pair is None else {"system_a": pair.systems["A"], "system_b": pair.systems["B"]}
