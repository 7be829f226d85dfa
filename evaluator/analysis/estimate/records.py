"""The typed result of :func:`evaluator.analysis.estimate.estimate.estimate`: ``evaluator estimate``
(its text and ``--json`` lines), the report and MLflow read it. Its rows stay dicts (one
JSON line each; the report adds each file's label to them)."""

from __future__ import annotations

from typing import Any

from evaluator.common.record import Record


class EstimateReport(Record):
    """The labels' field and score mode, one row per system (``type`` "system"), per
    system and outcome (``type`` "estimate") and per pair of systems (``type``
    "difference"), and the note on the labels' scale (None when there is nothing to say)."""

    label_field: str
    score_mode: str
    systems: list[dict[str, Any]]
    estimates: list[dict[str, Any]]
    differences: list[dict[str, Any]]
    scale_note: str | None
