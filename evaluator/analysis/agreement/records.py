"""The typed result of :func:`evaluator.analysis.agreement.agreement.agreement`: ``evaluator agree``
(its text and ``--json``), the report and MLflow read it. Fields are in the order of the
JSON written; each criterion's statistics stay a dict keyed by statistic name."""

from __future__ import annotations

from typing import Any

from evaluator.analysis.score_mode import ScoreModeBlock
from evaluator.common.record import Record


class AgreementBootstrap(Record):
    """The bootstrap behind the CIs: resamples, seed, method and the share of undefined
    resamples above which it is unreliable."""

    resamples: int
    seed: int
    method: str
    undefined_limit: float


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
