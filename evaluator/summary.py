"""Per-run summary: per-criterion statistics over the cases judged ``ok``, and status counts.

Failed cases are counted and listed by id, never imputed into the statistics. With the
``stats`` extra installed each criterion and aggregate also gets a seeded bootstrap 95% CI of
its mean, and the rubric's ``pass_thresholds`` give pass rates with Wilson CIs
(:mod:`evaluator.stats`); without it those are None and ``stats_note`` says what to install.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from statistics import fmean, median, stdev
from typing import Any

from evaluator.files import write_json_atomic
from evaluator.panel import rater_agreement
from evaluator.results import ResultRecord
from evaluator.rubric import IntegerCriterion, Rubric
from evaluator.stats import (
    BOOTSTRAP_RESAMPLES,
    STATS_EXTRA_HINT,
    mean_ci,
    pass_rate,
    stats_available,
)

SUMMARY_VERSION = 1


def describe(values: list[float]) -> dict[str, float | int | None]:
    """n, mean, SD (sample), median, min, max of a list of numbers (None when empty)."""
    if not values:
        return {"n": 0, "mean": None, "sd": None, "median": None, "min": None, "max": None}
    return {
        "n": len(values),
        "mean": fmean(values),
        "sd": stdev(values) if len(values) > 1 else None,
        "median": median(values),
        "min": min(values),
        "max": max(values),
    }


def summarize(rubric: Rubric, judge: str, records: Iterable[ResultRecord]) -> dict[str, Any]:
    """Build the summary dict written to ``summary.json``."""
    records = list(records)
    ok = [r for r in records if r.status == "ok" and r.scores is not None]
    with_stats = stats_available()
    by_key: dict[str, list[float]] = {}
    criteria: dict[str, Any] = {}
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            values = [float(r.scores[field.key]) for r in ok]  # type: ignore[index]
            counts = Counter(values)
            by_key[field.key] = values
            entry = describe(values)
            entry["ci95"] = mean_ci(values) if with_stats else None
            entry["counts"] = {str(v): counts.get(float(v), 0) for v in field.allowed}
            # Reduced scores (several samples or judges) can fall between allowed values.
            entry["counts"].update({f"{v:g}": n for v, n in sorted(counts.items())
                                    if v not in field.allowed})
            alias = rubric.alias_of(field.key)
            if alias:
                entry["alias"] = alias
            criteria[field.key] = entry
    aggregates: dict[str, Any] = {}
    for agg in rubric.aggregates:
        values = [r.aggregates[agg.name] for r in ok
                  if r.aggregates and r.aggregates.get(agg.name) is not None]
        floats = [float(v) for v in values]  # type: ignore[arg-type]
        by_key[agg.name] = floats
        entry = describe(floats)
        entry["ci95"] = mean_ci(floats) if with_stats else None
        alias = rubric.alias_of(agg.name)
        if alias:
            entry["alias"] = alias
        aggregates[agg.name] = entry
    pass_rates: dict[str, Any] = {}
    for key, threshold in rubric.pass_thresholds.items():
        values = by_key[key]
        if with_stats:
            pass_rates[key] = pass_rate(values, threshold)
        else:
            pass_rates[key] = {"threshold": threshold, "rule": f">= {threshold:g}",
                               "n": len(values), "passed": sum(v >= threshold for v in values),
                               "rate": None, "ci95": None}
        # Rates are over judged cases; cases without a verdict are neither pass nor fail.
        pass_rates[key]["not_judged"] = len(records) - len(ok)
    statuses = Counter(r.status for r in records)
    summary = {
        "summary_version": SUMMARY_VERSION,
        "rubric": rubric.name,
        "judge": judge,
        "cases": len(records),
        "status_counts": dict(sorted(statuses.items())),
        "failed_case_ids": [r.case_id for r in records if r.status != "ok"],
        "criteria": criteria,
        "aggregates": aggregates,
        "aliases": dict(rubric.aliases),
        "pass_rates": pass_rates,
        "ci_method": (f"mean: percentile bootstrap, 95%, {BOOTSTRAP_RESAMPLES} resamples, seeded "
                      "(scipy.stats.bootstrap); pass rates: Wilson (scipy.stats.binomtest)"),
    }
    for name, attribute in (("self_consistency", "samples"), ("inter_judge", "jury")):
        panels = [r for r in records if getattr(r, attribute)]
        if panels:
            summary[name] = panel_summary(rubric, panels, attribute, with_stats)
    if not with_stats:
        summary["stats_note"] = f"confidence intervals need the stats extra: {STATS_EXTRA_HINT}"
    return summary


def panel_summary(rubric: Rubric, records: list[ResultRecord], attribute: str,
                  with_stats: bool) -> dict[str, Any]:
    """Agreement across a case's samples (``attribute="samples"``) or jury members
    (``"jury"``): Krippendorff's alpha per criterion and the share of unanimous cases."""
    first = getattr(records[0], attribute)
    raters = ([v.judge for v in first] if attribute == "jury"
              else [f"sample {v.sample}" for v in first])
    table = [[(v.scores, v.aggregates) if v.status == "ok" else (None, None)
              for v in getattr(r, attribute)] for r in records]
    block: dict[str, Any] = {"reduction": records[0].reduction}
    if with_stats:
        block.update(rater_agreement(rubric, table))
    else:
        block["alpha"] = None
    block["raters"] = raters
    return block


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Write the summary as JSON (mode 0600, replaced atomically)."""
    write_json_atomic(path, summary)


def summary_path_for(results_path: Path) -> Path:
    """``results.jsonl`` -> ``results.summary.json`` beside it."""
    results_path = Path(results_path)
    return results_path.with_name(results_path.stem + ".summary.json")
