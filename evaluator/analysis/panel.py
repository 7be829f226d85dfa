"""Several verdicts for one case (self-consistency samples, or a jury of judges): reduce them
to one, and measure how well the raters agree across cases.

Reduction, per criterion type:

- integer criteria (ordinal scores): ``median`` (default), ``mean`` or ``majority`` (the most
  frequent score; a tie goes to the lower median of the tied scores, so the result is always
  a score some rater gave);
- aggregates (numbers computed from a verdict): ``mean``, or ``median`` when the criteria use
  ``median``; each verdict's aggregates are computed first, then reduced;
- everything else (lists of items, free text): the first verdict's, as written.

Agreement across raters is Krippendorff's alpha (``krippendorff``; ordinal for integer
criteria, interval for aggregates), raters being the samples or the judges and units the
cases; a rater without a verdict for a case is a missing value. The ``stats`` extra is
imported inside the functions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean, median, median_low, multimode
from typing import Any, Literal

from evaluator.analysis.distributions import mean_distributions
from evaluator.data.results import PanelVerdict, ResultRecord
from evaluator.rubrics.rubric import IntegerCriterion, Rubric

REDUCTIONS: tuple[str, ...] = ("median", "mean", "majority")


def reduction_of(reduce: str) -> dict[str, str]:
    """How each criterion type is reduced (stored on records and in summaries)."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduce!r}; choose one of {', '.join(REDUCTIONS)}")
    return {"integer": reduce, "aggregates": "median" if reduce == "median" else "mean",
            "other": "first"}


def _reduce_values(values: Sequence[float], how: str) -> float:
    if how == "mean":
        return fmean(values)
    if how == "median":
        return float(median(values))
    return float(median_low(multimode(values)))


def _plain(value: float) -> float | int:
    """An integral float as int, so a reduced 3.0 reads like a score."""
    return int(value) if float(value).is_integer() else value


def reduce_verdicts(rubric: Rubric, verdicts: Sequence[tuple[Mapping[str, Any],
                                                          Mapping[str, Any] | None]],
                    reduce: str) -> tuple[dict[str, Any], dict[str, float | None] | None]:
    """One ``(scores, aggregates)`` from several, each a validated verdict and its
    aggregates. ``verdicts`` must not be empty."""
    how = reduction_of(reduce)
    scores = dict(verdicts[0][0])
    for field in rubric.output:
        if isinstance(field, IntegerCriterion):
            scores[field.key] = _plain(_reduce_values(
                [float(v[0][field.key]) for v in verdicts], how["integer"]))
    if verdicts[0][1] is None:
        return scores, None
    aggregates: dict[str, float | None] = {}
    for name in verdicts[0][1]:
        values = [float(v[1][name]) for v in verdicts
                  if v[1] is not None and v[1].get(name) is not None]
        aggregates[name] = _reduce_values(values, how["aggregates"]) if values else None
    return scores, aggregates


def combine_verdicts(rubric: Rubric, records: Sequence[ResultRecord], reduce: str,
                     kind: Literal["samples", "jury"], raters: Sequence[int | str],
                     **overrides: Any) -> ResultRecord:
    """One record from a case's several records (its samples, or its jury members'): every
    verdict kept under ``kind``, scores reduced when every one is ``ok``; otherwise the
    first failing one's status, and its reason naming the sample or judge. ``overrides``
    replace fields taken from the first record (e.g. the jury's judge name)."""
    verdicts = [PanelVerdict(status=r.status, scores=r.scores, aggregates=r.aggregates,
                             reason=r.reason, finish_reason=r.finish_reason,
                             completion_tokens=r.completion_tokens,
                             distributions=r.distributions,
                             **({"sample": rater, "raw_output": r.raw_output}
                                if kind == "samples"
                                else {"judge": rater, "settings_hash": r.settings_hash}))
                for rater, r in zip(raters, records, strict=True)]
    fields = records[0].model_dump(exclude={"status", "scores", "aggregates", "reason",
                                            "raw_output", "finish_reason", "completion_tokens",
                                            "cached_tokens", "samples", "jury", "reduction",
                                            "distributions"})
    cached = [r.cached_tokens for r in records if r.cached_tokens is not None]
    fields.update({kind: verdicts, "reduction": reduction_of(reduce),
                   "completion_tokens": sum(r.completion_tokens or 0 for r in records),
                   "cached_tokens": sum(cached) if cached else None}, **overrides)
    failed = next((k for k, r in enumerate(records) if r.status != "ok"), None)
    if failed is not None:
        bad = records[failed]
        who = (f"sample {failed + 1} of {len(records)}" if kind == "samples"
               else f"judge {raters[failed]}")
        reason = bad.reason if bad.status == "input_error" else f"{who}: {bad.reason}"
        return ResultRecord(status=bad.status, finish_reason=bad.finish_reason, reason=reason,
                            **fields)
    scores, aggregates = reduce_verdicts(
        rubric, [(r.scores or {}, r.aggregates) for r in records], reduce)
    distributions = mean_distributions(rubric, [r.distributions for r in records], scores)
    return ResultRecord(status="ok", scores=scores, aggregates=aggregates,
                        distributions=distributions,
                        finish_reason=records[0].finish_reason, **fields)


def rater_keys(rubric: Rubric) -> list[tuple[str, str]]:
    """``(key, level)`` for every number raters are compared on: integer criteria at the
    ordinal level, aggregates at the interval level."""
    keys = [(f.key, "ordinal") for f in rubric.output if isinstance(f, IntegerCriterion)]
    return keys + [(agg.name, "interval") for agg in rubric.aggregates]


def value_of(key: str, scores: Mapping[str, Any] | None,
             aggregates: Mapping[str, Any] | None) -> float | None:
    """A criterion's or aggregate's number in one verdict (None when absent)."""
    for source in (scores, aggregates):
        if source is not None and source.get(key) is not None:
            value = source[key]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
    return None


def rater_agreement(rubric: Rubric, table: Sequence[Sequence[tuple[Mapping[str, Any] | None,
                                                                   Mapping[str, Any] | None]]],
                    ) -> dict[str, Any]:
    """Agreement across raters. ``table[case][rater]`` is that rater's ``(scores,
    aggregates)`` for the case, ``(None, None)`` when it gave no verdict.

    Per key: Krippendorff's alpha (None when it is undefined: fewer than two cases with two
    verdicts, or no variation at all) and the share of cases where every rater gave the same
    value (among cases every rater judged)."""
    raters = max((len(row) for row in table), default=0)
    out: dict[str, Any] = {"raters": raters, "cases": len(table),
                           "complete_cases": sum(1 for row in table
                                                 if all(s is not None for s, _ in row)),
                           "alpha": {}, "unanimous": {},
                           "alpha_method": "Krippendorff's alpha (krippendorff package): "
                                           "ordinal for criteria, interval for aggregates"}
    for key, level in rater_keys(rubric):
        matrix = [[value_of(key, s, a) for s, a in row] + [None] * (raters - len(row))
                  for row in table]
        complete = [row for row in matrix if all(v is not None for v in row)]
        out["unanimous"][key] = (sum(1 for row in complete if len(set(row)) == 1)
                                 / len(complete)) if complete else None
        out["alpha"][key] = _alpha(matrix, level)
    return out


def _alpha(matrix: Sequence[Sequence[float | None]], level: str) -> float | None:
    """Krippendorff's alpha over ``matrix[unit][rater]`` (None = missing)."""
    pairable = [row for row in matrix if sum(v is not None for v in row) >= 2]
    values = {v for row in pairable for v in row if v is not None}
    if len(pairable) < 2 or len(values) < 2:
        return None
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    from krippendorff import alpha

    data = np.array([[np.nan if v is None else v for v in row] for row in pairable],
                    dtype=float).T  # raters x units
    value = float(alpha(reliability_data=data, level_of_measurement=level))
    return value if math.isfinite(value) else None

