"""Per-run summary: per-criterion statistics over the cases judged ``ok``, and status counts.

Failed cases are counted and listed by id, never imputed into the statistics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from statistics import fmean, median, stdev
from typing import Any

from evaluator.files import write_json_atomic
from evaluator.results import ResultRecord
from evaluator.rubric import IntegerCriterion, Rubric

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
    criteria: dict[str, Any] = {}
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            values = [float(r.scores[field.key]) for r in ok]  # type: ignore[index]
            counts = Counter(int(v) for v in values)
            entry = describe(values)
            entry["counts"] = {str(v): counts.get(v, 0) for v in field.allowed}
            alias = rubric.alias_of(field.key)
            if alias:
                entry["alias"] = alias
            criteria[field.key] = entry
    aggregates: dict[str, Any] = {}
    for agg in rubric.aggregates:
        values = [r.aggregates[agg.name] for r in ok
                  if r.aggregates and r.aggregates.get(agg.name) is not None]
        entry = describe([float(v) for v in values])  # type: ignore[arg-type]
        alias = rubric.alias_of(agg.name)
        if alias:
            entry["alias"] = alias
        aggregates[agg.name] = entry
    statuses = Counter(r.status for r in records)
    return {
        "summary_version": SUMMARY_VERSION,
        "rubric": rubric.name,
        "judge": judge,
        "cases": len(records),
        "status_counts": dict(sorted(statuses.items())),
        "failed_case_ids": [r.case_id for r in records if r.status != "ok"],
        "criteria": criteria,
        "aggregates": aggregates,
        "aliases": dict(rubric.aliases),
    }


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """Write the summary as JSON (mode 0600, replaced atomically)."""
    write_json_atomic(path, summary)


def summary_path_for(results_path: Path) -> Path:
    """``results.jsonl`` -> ``results.summary.json`` beside it."""
    results_path = Path(results_path)
    return results_path.with_name(results_path.stem + ".summary.json")
