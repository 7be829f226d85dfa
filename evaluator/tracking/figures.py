"""The metrics logged for a run, read from what the analysis functions return.

Nothing is computed here: every value is one the summary (:func:`evaluator.analysis.summary.summary.
summarize`), ``evaluator agree`` (:func:`evaluator.analysis.agreement.agreement.agreement`) or
``evaluator estimate`` (:func:`evaluator.analysis.estimate.estimate.estimate`) already gives. A
figure that is undefined (None, not finite) is not logged; an agreement statistic the analysis marks
meaningless (e.g. within-one agreement fixed by the score distribution) or not applicable is
left out too: the HTML report shows it with the reason. Names (:mod:`.names`):

- ``cases``, ``status/<status>`` (every status, 0 included, so runs share columns);
- ``criterion/<key>/`` and ``aggregate/<name>/``: ``n``, ``mean``, ``mean_ci95_low``,
  ``mean_ci95_high``, ``sd``, ``median``, ``min``, ``max``;
- ``pass_rate/<key>/``: ``rate``, ``rate_ci95_low``, ``rate_ci95_high``, ``n``, ``passed``,
  ``not_judged``, ``threshold``;
- ``self_consistency/`` and ``inter_judge/``: ``<key>/alpha``, ``<key>/unanimous``,
  ``complete_cases``;
- ``pairwise/<criterion>/``: ``n``, ``a_wins``, ``b_wins``, ``ties``, ``inconsistent`` and
  ``win_rate``, ``position_consistency``, ``position_bias`` with ``_ci95_low``/``_high``;
- with labels, ``agreement/``: ``joined``, ``unmatched_results``, ``unmatched_labels``,
  ``not_ok_labelled``, ``warnings`` (how many), and per criterion ``<key>/n`` and each
  statistic with its CI (``spearman``, ``kendall_tau_b``, their ``_p``, ``kappa_quadratic``,
  ``icc_a1``, ``krippendorff_alpha_ordinal``, ``mean_abs_difference``, ``exact``,
  ``within_one``, and ``exact_chance``, ``within_one_chance``); ``agreement_gate/<rule>/``:
  ``n``, ``tp``, ``fp``, ``fn``, ``tn`` and ``sensitivity``, ``specificity``, ``ppv``,
  ``npv`` with CIs; ``estimate/<criterion or rule>/``: ``ppi``, ``ppi_ci95_low``/``_high``,
  ``ppi_se``, ``lambda``, ``judge_mean``, ``judge_bias``, ``classical`` (each with its CI),
  ``effective_labels``, ``n_cases``, ``n_labelled``.

A CI is always ``<name>_ci95_low`` / ``<name>_ci95_high`` beside ``<name>``, never a key
below it: MLflow's file store keeps each metric as a file, so one key cannot also be a
folder of others. A figure with no CI because it is a point (every score the same: the
summary's ``ci_note``; an estimate withheld under the minimum of labels) gets no CI
metrics; :func:`interval_tags` and :func:`estimate_interval_tags` give the tag that says why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from evaluator.analysis.agreement.records import AgreementReport
from evaluator.analysis.estimate.records import EstimateReport
from evaluator.analysis.estimate.text import no_ci_reason
from evaluator.analysis.summary.records import PairwiseSummary, RunSummary, ScoreStats
from evaluator.data.results import Status
from evaluator.tracking.names import metric_key

Metrics = dict[str, float]

DESCRIBED = ("n", "mean", "sd", "median", "min", "max")
PASS_RATE_COUNTS = ("n", "passed", "not_judged", "threshold")
PAIRWISE_COUNTS = ("n", "a_wins", "b_wins", "ties", "inconsistent")
PAIRWISE_FIGURES = ("win_rate", "position_consistency", "position_bias")
AGREEMENT_COUNTS = ("joined", "unmatched_results", "unmatched_labels", "not_ok_labelled")
AGREEMENT_STATISTICS = ("spearman", "kendall_tau_b", "kappa_quadratic", "icc_a1",
                        "krippendorff_alpha_ordinal", "mean_abs_difference", "exact",
                        "within_one")
GATE_COUNTS = ("n", "tp", "fp", "fn", "tn")
GATE_RATES = ("sensitivity", "specificity", "ppv", "npv")
# estimate row attribute -> (metric name, the row's CI attribute or None)
ESTIMATE_FIGURES = (("ppi_estimate", "ppi", "ppi_ci"), ("ppi_se", "ppi_se", None),
                    ("lam", "lambda", None), ("judge_mean", "judge_mean", "judge_ci"),
                    ("judge_bias", "judge_bias", "judge_bias_ci"),
                    ("classical_estimate", "classical", "classical_ci"),
                    ("effective_labels", "effective_labels", None),
                    ("n_cases", "n_cases", None), ("n_labelled", "n_labelled", None))
# estimate row figure with a CI -> the attribute naming its method (and why it has no CI)
ESTIMATE_METHODS = {"ppi_estimate": "ppi_method", "judge_mean": "judge_method",
                    "judge_bias": "judge_bias_method", "classical_estimate": "classical_method"}


def number(value: Any) -> float | None:
    """``value`` as a finite float, or None (None, a bool, text, NaN, infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _put(out: Metrics, key: str, value: Any) -> None:
    value = number(value)
    if value is not None:
        out[key] = value


def _put_ci(out: Metrics, prefix: Sequence[str], name: str, value: Any,
            ci: Sequence[Any] | None) -> None:
    """``<prefix>/<name>`` and, when the interval has two ends, ``..._ci95_low/high``."""
    _put(out, metric_key(*prefix, name), value)
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        _put(out, metric_key(*prefix, f"{name}_ci95_low"), ci[0])
        _put(out, metric_key(*prefix, f"{name}_ci95_high"), ci[1])


def _scores(summary: RunSummary) -> list[tuple[str, str, ScoreStats]]:
    """``(group, key, stats)`` of every criterion and aggregate (none in a pairwise one)."""
    if isinstance(summary, PairwiseSummary):
        return []
    return [*(("criterion", key, entry) for key, entry in summary.criteria.items()),
            *(("aggregate", key, entry) for key, entry in summary.aggregates.items())]


def summary_metrics(summary: RunSummary) -> Metrics:
    """The metrics of a run's summary (scored or pairwise; see the module docstring)."""
    out: Metrics = {}
    _put(out, "cases", summary.cases)
    for status in dict.fromkeys([*get_args(Status), *summary.status_counts]):
        _put(out, metric_key("status", status), summary.status_counts.get(status, 0))
    for group, key, entry in _scores(summary):
        for name in DESCRIBED:
            if name != "mean":
                _put(out, metric_key(group, key, name), getattr(entry, name))
        _put_ci(out, (group, key), "mean", entry.mean, entry.ci95)
    if isinstance(summary, PairwiseSummary):
        for key, pair in summary.pairwise.criteria.items():
            for name in PAIRWISE_COUNTS:
                _put(out, metric_key("pairwise", key, name), getattr(pair, name))
            for name in PAIRWISE_FIGURES:
                if isinstance(figure := getattr(pair, name), Mapping):
                    _put_ci(out, ("pairwise", key), name, figure.get("value"),
                            figure.get("ci95"))
        return out
    for key, rate in summary.pass_rates.items():
        _put_ci(out, ("pass_rate", key), "rate", rate.rate, rate.ci95)
        for name in PASS_RATE_COUNTS:
            _put(out, metric_key("pass_rate", key, name), getattr(rate, name))
    for block, panel in (("self_consistency", summary.self_consistency),
                         ("inter_judge", summary.inter_judge)):
        if panel is not None:
            _put(out, metric_key(block, "complete_cases"), panel.complete_cases)
            for name, values in (("alpha", panel.alpha), ("unanimous", panel.unanimous)):
                for key, value in (values or {}).items():
                    _put(out, metric_key(block, key, name), value)
    return out


NO_CI_TAG = "evaluator.no_ci"


def interval_tags(summary: RunSummary) -> dict[str, str]:
    """A tag per summary mean that has no 95% CI because its scores are all equal (a point
    is not an interval: :func:`evaluator.analysis.intervals.interval_or_reason`):
    ``evaluator.no_ci/criterion/<key>/mean`` = the summary's ``ci_note`` ("no interval: all
    4 scores equal"), named after the metric whose CI is missing."""
    return {f"{NO_CI_TAG}/{metric_key(group, key, 'mean')}": entry.ci_note
            for group, key, entry in _scores(summary) if entry.ci_note}


def _usable(statistic: Any) -> bool:
    return (isinstance(statistic, Mapping) and not statistic.get("meaningless")
            and not statistic.get("not_applicable"))


def agreement_metrics(report: AgreementReport) -> Metrics:
    """The metrics of :func:`evaluator.analysis.agreement.agreement.agreement`'s report."""
    out: Metrics = {}
    for name in AGREEMENT_COUNTS:
        _put(out, metric_key("agreement", name), getattr(report, name))
    _put(out, metric_key("agreement", "warnings"), len(report.warnings))
    for key, stats in report.criteria.items():
        _put(out, metric_key("agreement", key, "n"), stats.get("n"))
        for name in AGREEMENT_STATISTICS:
            statistic = stats.get(name)
            if not _usable(statistic):
                continue
            _put_ci(out, ("agreement", key), name, statistic.get("value"),
                    statistic.get("ci95"))
            if "p" in statistic:
                _put(out, metric_key("agreement", key, f"{name}_p"), statistic["p"])
            if "chance" in statistic:
                _put(out, metric_key("agreement", key, f"{name}_chance"), statistic["chance"])
    for gate in report.gates:
        prefix = ("agreement_gate", gate.get("rule", ""))
        for name in GATE_COUNTS:
            _put(out, metric_key(*prefix, name), gate.get(name))
        for name in GATE_RATES:
            rate = gate.get(name)
            if isinstance(rate, Mapping):
                _put_ci(out, prefix, name, rate.get("value"), rate.get("ci95"))
    return out


def estimate_interval_tags(report: EstimateReport) -> dict[str, str]:
    """A tag per estimate figure that has a value but no 95% CI (withheld under the minimum
    of labels, or a point): ``evaluator.no_ci/estimate/<criterion or rule>/<name>`` = its
    reason from the figure's method ("no interval: 12 labelled, at least 20 needed ..."),
    named after the metric whose CI is missing, as :func:`interval_tags` for a summary."""
    tags: dict[str, str] = {}
    for row in report.estimates:
        for field, name, ci_field in ESTIMATE_FIGURES:
            if ci_field is None:
                continue
            why = no_ci_reason(number(getattr(row, field)), getattr(row, ci_field),
                               getattr(row, ESTIMATE_METHODS[field]))
            if why:
                tags[f"{NO_CI_TAG}/{metric_key('estimate', row.criterion, name)}"] = why
    return tags


def estimate_metrics(report: EstimateReport) -> Metrics:
    """The metrics of :func:`evaluator.analysis.estimate.estimate.estimate`'s report for one results
    file (one system): one block per criterion and per ``--pass`` gate."""
    out: Metrics = {}
    for row in report.estimates:
        prefix = ("estimate", row.criterion)
        for field, name, ci_field in ESTIMATE_FIGURES:
            if ci_field is None:
                _put(out, metric_key(*prefix, name), getattr(row, field))
            else:
                _put_ci(out, prefix, name, getattr(row, field), getattr(row, ci_field))
    return out
