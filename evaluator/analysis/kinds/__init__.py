"""Rubric kinds, analysis side: one module per kind (``absolute``, ``pairwise``), each an
:class:`AnalysisKind`, chosen once from ``rubric.kind`` by :func:`analysis_kind`. The run
side of the same kinds: :mod:`evaluator.run.kinds`. Adding a kind: docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from evaluator.analysis.kinds import absolute, pairwise
from evaluator.analysis.summary.records import RunSummary
from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import Rubric


class AnalysisKind(Protocol):
    """What the analysis and the reports need of a rubric kind. ``SHEET``: the kind of
    labelling sheet its results give (``sheet.json``'s ``kind``: a score per criterion,
    ``single``, or A/B/tie, ``pairwise``); a review sheet asks about its ``SHEET_CRITERIA``
    (criterion types, which the rubric ``SHEET_VERB``) and adds its ``SHEET_COLUMNS``."""

    SHEET: str
    SHEET_CRITERIA: tuple[type, ...]
    SHEET_VERB: str
    SHEET_COLUMNS: tuple[str, ...]

    def summarize(self, rubric: Rubric, judge: str, records: Iterable[ResultRecord], *,
                  score_mode: str = "argmax", source: str = "the results") -> RunSummary:
        """The results' summary (``summary.json``), in one pass over ``records``."""

    def elsewhere(self, source: object, rubric_name: str, command: str) -> str | None:
        """None when ``evaluator command`` (agree, review, estimate, report: they read
        scores) reads this kind's results; else the one line that refuses ``source``."""

    def sheet_refusal(self, source: str, rubric: Rubric, design: str) -> str | None:
        """None when review draws a sheet of ``source`` by ``design``; else the line refusing it."""

    def sheet_fields(self, record: ResultRecord) -> dict[str, str]:
        """A sheet row's cells of ``SHEET_COLUMNS``."""


KINDS: dict[str, AnalysisKind] = {"absolute": absolute, "pairwise": pairwise}


def analysis_kind(rubric: Rubric) -> AnalysisKind:
    """The analysis side of ``rubric``'s kind."""
    return KINDS[rubric.kind]
