"""The run summary's typed records: :func:`evaluator.analysis.summary.summary.summarize` builds
them; ``summary.json``, ``evaluator summary``, the report and MLflow read them. Fields are
in the order of the JSON written; one made with ``omitted_if_none`` is a key the JSON has
only when it has a value."""

from __future__ import annotations

from typing import Any

from pydantic import model_serializer

from evaluator.analysis.score_mode import ScoreModeBlock
from evaluator.common.record import Record, omitted_if_none


class ScoreStats(Record):
    """One key's scores over the cases judged ok (n, mean, SD, median, min, max; None
    when there are none), the mean's 95% CI (None without the stats extra) and, when every
    score is equal, ``ci_note``: why there is no CI (a point is not an interval)."""

    n: int
    mean: float | None
    sd: float | None
    median: float | None
    min: float | None
    max: float | None
    ci95: list[float] | None
    ci_note: str | None = omitted_if_none()


class CriterionStats(ScoreStats):
    """An integer criterion's :class:`ScoreStats`, with the count of each value (allowed
    values, then reduced scores between them; None for expected scores) and its alias."""

    counts: dict[str, int] | None
    alias: str | None = omitted_if_none()


class AggregateStats(ScoreStats):
    """An aggregate's :class:`ScoreStats` and its alias."""

    alias: str | None = omitted_if_none()


class PassRate(Record):
    """The share of judged cases at or above a pass threshold, with its Wilson 95% CI
    (None without the stats extra or cases), and the cases not judged (neither)."""

    threshold: float
    rule: str
    n: int
    passed: int
    rate: float | None
    ci95: list[float] | None
    not_judged: int


class PanelAgreement(Record):
    """Agreement across a case's samples or jury members: Krippendorff's alpha and the
    share of unanimous cases per key (None without the stats extra)."""

    reduction: dict[str, str] | None
    raters: list[str]
    cases: int | None = omitted_if_none()
    complete_cases: int | None = omitted_if_none()
    alpha: dict[str, float | None] | None
    unanimous: dict[str, float | None] | None = omitted_if_none()
    alpha_method: str | None = omitted_if_none()

    @model_serializer(mode="wrap")
    def _in_order(self, handler: Any) -> dict[str, Any]:
        # Without the stats extra the block has always been written in this order.
        out = handler(self)
        return out if self.alpha is not None else {
            "reduction": out["reduction"], "alpha": None, "raters": out["raters"]}


class PairwiseCriterion(Record):
    """One choice criterion's outcomes and, with the stats extra, its figures (A's win
    rate, position consistency, position bias: :func:`evaluator.analysis.pairwise.pairwise.
    order_figures`)."""

    n: int
    a_wins: int
    b_wins: int
    ties: int
    inconsistent: int
    win_rate: dict[str, Any] | None = omitted_if_none()
    position_consistency: dict[str, Any] | None = omitted_if_none()
    position_bias: dict[str, Any] | None = omitted_if_none()


class PairwiseBlock(Record):
    """A pairwise summary's systems (``A``, ``B``), criteria and the note on ties."""

    systems: dict[str, str]
    criteria: dict[str, PairwiseCriterion]
    note: str


class SummaryHeader(Record):
    """What every summary starts with: version, rubric, judge and the statuses."""

    summary_version: int
    rubric: str
    judge: str
    cases: int
    status_counts: dict[str, int]
    failed_case_ids: list[str]


class Summary(SummaryHeader):
    """A scored rubric's summary (see :mod:`evaluator.analysis.summary.summary`)."""

    criteria: dict[str, CriterionStats]
    aggregates: dict[str, AggregateStats]
    aliases: dict[str, str]
    pass_rates: dict[str, PassRate]
    ci_method: str
    self_consistency: PanelAgreement | None = omitted_if_none()
    inter_judge: PanelAgreement | None = omitted_if_none()
    stats_note: str | None = omitted_if_none()
    score_mode: ScoreModeBlock
    results_file: str | None = omitted_if_none()


class PairwiseSummary(SummaryHeader):
    """A pairwise rubric's summary: the statuses and :class:`PairwiseBlock`."""

    pairwise: PairwiseBlock
    stats_note: str | None = omitted_if_none()
    results_file: str | None = omitted_if_none()


RunSummary = Summary | PairwiseSummary
