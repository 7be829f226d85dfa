"""The HTML report's data, typed: :class:`ReportData` is what
:func:`evaluator.report.build.build_report` returns and the page's template, its plots
(:mod:`evaluator.report.html`) and ``--show-text`` (:mod:`evaluator.report.text`) read.

Dataclasses, not frozen records: they hold loaded objects (records, a rubric, a score view)
and ``--show-text`` fills in each case row's text after the figures are made. The figures
themselves are records (:mod:`evaluator.report.figures`, :mod:`evaluator.report.decision`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evaluator.analysis.score_mode import ScoredView
from evaluator.analysis.summary.records import RunSummary
from evaluator.data.results import ResultRecord
from evaluator.report.decision import Decision
from evaluator.report.figures import ReportAgreement, ReportEstimates
from evaluator.rubrics.rubric import IntegerCriterion, Rubric
from evaluator.study.summary import StudySummary

# A case's text or the judge's own words: (field name, text) pairs.
TextPairs = list[tuple[str, str]]


@dataclass
class BlockView:
    """A summary block another tool added (self-consistency, several judges) as the page
    shows it: scalar rows, small key -> scalar tables, and the names of anything deeper."""

    scalars: list[tuple[str, Any]]
    tables: list[tuple[str, list[tuple[str, Any]]]]
    skipped: list[str]


@dataclass
class CaseRow:
    """One case the page lists (a failed case, or one of the worst): its id, status, input
    line and ``reason``; for the worst, its ``values`` of the scored keys and the same
    case's value (or status) in the other files (``others``). ``record`` is dropped
    (None) without ``--show-text``: it holds the judge's text. ``text``, ``text_note`` and
    ``judge_text`` are filled with ``--show-text`` only."""

    case_id: str
    status: str
    input_line: int | None
    record: ResultRecord | None
    reason: str | None = None
    values: list[int | float | None] = field(default_factory=list)
    others: list[Any] = field(default_factory=list)
    text: TextPairs = field(default_factory=list)
    text_note: str | None = None
    judge_text: TextPairs = field(default_factory=list)


@dataclass
class ReportFile:
    """One results file as the page shows it: where it is and its bytes' hash, its judge,
    records and score view, its summary recomputed from the records (over the common cases
    with ``--common-cases``: ``common_ids``), the notes on it, its summary file's blocks,
    the judge's confidence, its failed cases and each scored key's values."""

    path: str
    label: str
    judge: str
    rubric: Rubric
    sha256: str
    records: list[ResultRecord]
    by_id: dict[str, ResultRecord]
    view: ScoredView
    summary: RunSummary
    notes: list[str]
    left_out: str | None
    settings_hashes: list[str]
    blocks: dict[str, BlockView]
    confidence: dict[str, Any]
    failed: list[CaseRow]
    values: dict[str, list[int | float]] = field(default_factory=dict)
    common_ids: set[str] | None = None

    @property
    def compared_ids(self) -> set[str] | dict[str, ResultRecord]:
        """The case ids the file's statistics are over: the common cases, else all."""
        return self.common_ids if self.common_ids is not None else self.by_id


@dataclass
class WorstGroup:
    """One file's worst cases."""

    label: str
    rows: list[CaseRow]


@dataclass
class Worst:
    """The worst ``n`` cases by ``key`` per file, with every scored key (``columns``)."""

    key: str
    n: int
    columns: list[str]
    by_file: list[WorstGroup]


@dataclass
class CaseSets:
    """The judged (ok) case count per file, whether the files' ok case sets differ, and
    how many cases all of them judged."""

    ok_counts: list[int]
    differ: bool
    common: int


@dataclass
class CommonCases:
    """``--common-cases``: the ``n`` cases judged ok in every file, of ``union`` in any."""

    n: int
    union: int


@dataclass
class ScoreModeText:
    """The report's score mode and what it means."""

    mode: str
    meaning: str


@dataclass
class StatusRow:
    """One file's count of each status (every status, zeros included), its cases and its
    failed cases."""

    label: str
    counts: list[int]
    cases: int
    failed: int


@dataclass
class ReportData:
    """Everything the page shows: when and by which version it was made, the rubric and
    its scored keys, the files side by side, the worst cases, the agreement with labels
    and the clinician-level estimates (None without labels), the Decision built from them,
    and what the figures are over (case sets, common cases, score mode)."""

    generated: str
    version: str
    rubric: Rubric
    files: list[ReportFile]
    statuses: tuple[str, ...]
    judges: list[str]
    show_text: bool
    scored_keys: list[str]
    criteria: list[IntegerCriterion]
    aggregates: list[Any]
    ci_method: str
    stats_note: str | None
    case_sets: CaseSets
    common_cases: CommonCases | None
    score_mode: ScoreModeText
    expected: bool
    confidence_criteria: list[str]
    low_confidence: int
    no_distributions: str
    worst: Worst | None = None
    agreement: ReportAgreement | None = None
    estimates: ReportEstimates | None = None
    decision: Decision | None = None
    study: StudySummary | None = None  # a study's block, first on the page
