"""The typed result of :func:`evaluator.analysis.estimate.estimate.estimate`: ``evaluator estimate``
(its text and ``--json`` lines), the report, the Decision section and MLflow read it. Each
row is one JSON line of ``estimate --json`` (:meth:`Record.to_json`: its fields in the order
declared here, ``lambda`` under that name)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from evaluator.common.record import Record

# A figure's 95% interval: [low, high], or None where none could be made (its method says
# why).
Interval = list[float] | None
OutcomeKind = Literal["mean", "pass rate"]


class SystemRow(Record):
    """One system (a results file with its labels): its population, labels and design, the
    notes said before its figures, and the note on the labels' scale."""

    type: Literal["system"] = "system"
    system: str
    file: str
    labels: str
    n_cases: int
    n_labelled: int
    unlabelled_rows: int
    design: str
    design_text: str
    notes: list[str]
    scale_note: str | None


class EstimateRow(Record):
    """Every figure for one outcome (a criterion's mean, or a gate's pass rate) of one
    system: the judge alone over every case, its bias on the labelled cases, the labels
    alone and PPI++, each with its 95% CI and the method that made it; ``lam`` (``lambda``
    in JSON) PPI++'s weight on the judge; ``effective_labels`` how many simple-random
    labels alone would give PPI++'s CI; ``too_few`` (last) the words said in place of any
    direction when the labelled cases are under the minimum
    (:func:`evaluator.analysis.minimum.too_few`), else None."""

    # ``lambda`` is a Python keyword: the field is ``lam``, written and read as "lambda".
    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True,
                              validate_by_alias=True)

    type: Literal["estimate"] = "estimate"
    file: str
    system: str
    labels: str
    criterion: str
    outcome: OutcomeKind
    design: str
    n_cases: int
    n_labelled: int
    n_drawn: int | None
    judge_mean: float | None
    judge_ci: Interval
    judge_method: str
    judge_bias: float | None
    judge_bias_ci: Interval
    judge_bias_method: str
    classical_estimate: float | None
    classical_ci: Interval
    classical_method: str
    ppi_estimate: float | None
    ppi_ci: Interval
    ppi_se: float | None
    lam: float | None = Field(alias="lambda")
    ppi_method: str
    effective_labels: float | None
    too_few: str | None = None


class DifferenceRow(Record):
    """b - a for one outcome: ``mode`` paired (the estimator on per-case differences, over
    ``n_labelled`` of ``n_cases`` cases) or independent (both None), the PPI++ difference
    and the judge's own, each with its CI and method; ``lam`` (``lambda`` in JSON) the
    paired estimator's weight. Written after it (:mod:`evaluator.analysis.minimum`):
    ``too_few``, the words said in place of a direction when the labelled cases are under
    the minimum (then ``p`` is None: withheld); ``label_more``, how many more labelled
    cases would be expected to settle a sign the CI leaves open (None: none to settle, or
    no feasible number), and ``label_more_text`` saying so in words."""

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True,
                              validate_by_alias=True)

    type: Literal["difference"] = "difference"
    criterion: str
    a: str
    b: str
    a_file: str
    b_file: str
    mode: Literal["paired", "independent"]
    n_labelled: int | None
    n_cases: int | None
    note: str
    estimate: float | None
    ci: Interval
    p: float | None
    method: str
    judge_difference: float | None
    judge_difference_ci: Interval
    judge_difference_method: str
    lam: float | None = Field(alias="lambda")
    too_few: str | None = None
    label_more: int | None = None
    label_more_text: str | None = None


class EstimateReport(Record):
    """The labels' field and score mode, one row per system, per system and outcome and per
    pair of systems, and the note on the labels' scale (None when there is nothing to
    say)."""

    label_field: str
    score_mode: str
    systems: list[SystemRow]
    estimates: list[EstimateRow]
    differences: list[DifferenceRow]
    scale_note: str | None
