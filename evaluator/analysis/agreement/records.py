"""The typed result of :func:`evaluator.analysis.agreement.agreement.agreement`: ``evaluator agree``
(its text and ``--json``), the report and MLflow read it. Fields are in the order of the
JSON written; each criterion's statistics stay a dict keyed by statistic name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import Field

from evaluator.analysis.score_mode import ScoreModeBlock
from evaluator.common.record import Record


class AgreementBootstrap(Record):
    """The bootstrap behind the CIs: resamples, seed, method and the share of undefined
    resamples above which it is unreliable."""

    resamples: int
    seed: int
    method: str
    undefined_limit: float


class CeilingFigure(Record):
    """One figure of the ceiling with its 95% CI (None: none, ``ci_method`` says why) and
    the bootstrap resamples where it was undefined."""

    value: float | None
    ci95: list[float] | None
    ci_method: str
    undefined: int = 0


class CeilingStatistic(Record):
    """One statistic on the overlap cases: clinician vs clinician, judge vs clinicians, and
    the difference (judge minus clinicians), from the same resampled cases."""

    clinicians: CeilingFigure
    judge: CeilingFigure
    difference: CeilingFigure


class Ceiling(Record):
    """The ceiling of one criterion (:mod:`evaluator.analysis.agreement.ceiling`): the
    overlap cases (``n``, each labelled by two or more of ``labellers``), the labeller
    ``pairs`` and ``ratings`` behind them, the bootstrap, per statistic the three
    figures, and kappa's difference read in words (``reading``)."""

    criterion: str
    n: int
    labellers: list[str]
    pairs: int
    ratings: int
    resamples: int
    seed: int
    method: str
    statistics: dict[str, CeilingStatistic]
    # What kappa's difference says, in words (or that there are too few cases to decide):
    # :func:`evaluator.analysis.agreement.ceiling.reading`, printed by agree and the report.
    reading: str = ""

    @property
    def kappa(self) -> CeilingStatistic | None:
        """The quadratic-weighted kappa's three figures (None: not computed here)."""
        return self.statistics.get(KAPPA)


class LabellerAgreement(Record):
    """The judge against one labeller's own labels on one criterion (every case that
    labeller labelled): the per-labeller breakdown of a sheet labelled by several."""

    labeller: str
    n: int
    kappa_quadratic: float | None
    exact: float | None


class SheetLabelsBlock(Record):
    """Labels read from a labelling sheet's folder: whether it is blind, how several
    labellers' labels of one case became the case's label (``rule``), what was left out
    (``cannot_judge``: labels saved as "cannot judge"), how many labels were saved with
    the judge's verdict in view, and the notes said before the figures; ``overlap``: per
    criterion, how many of the joined cases two or more labellers labelled (a criterion
    without such cases is absent), whether or not they were enough for a ceiling."""

    folder: str
    blind: bool
    labellers: list[str]
    rule: str
    cannot_judge: int
    judge_seen: int
    notes: list[str]
    overlap: dict[str, int] = Field(default_factory=dict)


class AgreementReport(Record):
    """A results file against a labels file: the join's counts, the design and warnings,
    then per criterion every statistic (``criteria``) and the ``--pass`` gates' tables."""

    results: str
    labels: str
    label_field: str
    results_ok: int
    labels_total: int
    joined: int
    common_cases: int | None
    unmatched_results: int
    unmatched_labels: int
    unlabelled_rows: int
    not_ok_labelled: int
    not_ok_status_counts: dict[str, int]
    bootstrap: AgreementBootstrap
    label_scale: list[int | float] | None
    text_field: str | None
    by: str | None
    notes: list[str]
    warnings: list[str]
    design: dict[str, Any]
    circular: list[dict[str, Any]]
    note: str
    score_mode: ScoreModeBlock
    criteria: dict[str, dict[str, Any]]
    gates: list[dict[str, Any]]
    gates_note: str | None
    # Labels from a sheet folder (issue 37): None for a labels file.
    sheet: SheetLabelsBlock | None = None
    # The judge against each labeller, per criterion, and the ceiling per criterion with
    # overlap cases (empty without them).
    by_labeller: dict[str, list[LabellerAgreement]] = Field(default_factory=dict)
    ceiling: list[Ceiling] = Field(default_factory=list)
    # The note when labels were given with the judge's verdict in view (None: blind).
    verdict_seen: str | None = None


KAPPA = "kappa_quadratic"
ICC = "icc_a1"


class StatisticFigure(Record):
    """One statistic of a criterion, as the report states it: its value and 95% CI, and
    why it has no value (``note``), does not apply (``not_applicable``) or says nothing
    here (``meaningless``)."""

    value: int | float | None = None
    ci95: list[float] | None = None
    note: str | None = None
    not_applicable: str | None = None
    meaningless: str | None = None

    @classmethod
    def of(cls, entry: Mapping[str, Any] | None) -> StatisticFigure:
        """The figure of one entry of :attr:`AgreementReport.criteria` (None: absent)."""
        entry = entry or {}
        return cls(value=entry.get("value"), ci95=entry.get("ci95"), note=entry.get("note"),
                   not_applicable=entry.get("not_applicable") or None,
                   meaningless=entry.get("meaningless") or None)


class KappaFigures(Record):
    """The judge's agreement with the labels on one criterion of one file, as the report's
    Decision states it: ``computed`` False (fewer than two joined cases) with the ``note``
    saying why, else over ``n`` cases the quadratic-weighted kappa and the ICC(A,1) that
    takes its place where kappa does not apply (expected scores)."""

    n: int
    computed: bool
    note: str | None
    kappa: StatisticFigure
    icc: StatisticFigure

    @classmethod
    def of(cls, stats: Mapping[str, Any]) -> KappaFigures:
        """The figures of one criterion's statistics (:attr:`AgreementReport.criteria`): the
        one place their keys are read for the report's Decision."""
        return cls(n=stats.get("n", 0), computed="spearman" in stats, note=stats.get("note"),
                   kappa=StatisticFigure.of(stats.get(KAPPA)),
                   icc=StatisticFigure.of(stats.get(ICC)))
