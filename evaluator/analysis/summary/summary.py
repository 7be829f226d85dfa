"""Per-run summary: per-criterion statistics over the cases judged ``ok``, and status counts.

Failed cases are counted and listed by id, never imputed into the statistics. With the
``stats`` extra installed each criterion and aggregate also gets a seeded bootstrap 95% CI of
its mean, and the rubric's ``pass_thresholds`` give pass rates with Wilson CIs
(:mod:`evaluator.analysis.stats`); without it those are None and ``stats_note`` says what to
install. A mean whose values are all equal has no CI (a point is not a 95% interval): ``ci_note``
says why.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from statistics import fmean, median, stdev
from typing import Any, TypeVar

from evaluator.analysis.distributions import verdict_view
from evaluator.analysis.intervals import interval_or_reason
from evaluator.analysis.pairwise.pairwise import (
    INCONSISTENT_NOTE,
    Pairs,
    order_figures,
    outcome_counts,
)
from evaluator.analysis.panel import rater_agreement
from evaluator.analysis.score_mode import (
    GET_DISTRIBUTIONS,
    NO_DISTRIBUTIONS,
    ScoreModeBlock,
    ScoreModeError,
    mode_block,
)
from evaluator.analysis.stats import (
    BOOTSTRAP_RESAMPLES,
    STATS_EXTRA_HINT,
    mean_ci,
    pass_rate,
    stats_available,
)
from evaluator.analysis.summary.records import (
    AggregateStats,
    CriterionStats,
    PairwiseBlock,
    PairwiseCriterion,
    PairwiseSummary,
    PanelAgreement,
    PassRate,
    RunSummary,
    ScoreStats,
    Summary,
)
from evaluator.data.files import write_json_atomic
from evaluator.data.results import ResultRecord
from evaluator.rubrics.rubric import IntegerCriterion, Rubric

SUMMARY_VERSION = 1
Stats = TypeVar("Stats", bound=ScoreStats)
# Up to this many distinct values, a median is found from their counts (see _median).
_FEW_DISTINCT = 1024


def _median(values: Sequence[float]) -> float:
    """:func:`statistics.median`, found from the counts of the distinct values when they are
    few (scores are: 1-5, or halves of reduced scores), so a million scores never become a
    sorted list of a million float objects (~32 MB); otherwise by sorting."""
    counts: Counter[float] = Counter()
    for value in values:
        counts[value] += 1
        if len(counts) > _FEW_DISTINCT:
            return median(values)
    # Positions 0..n-1 in sorted order: the median is the value at (n-1)//2 when n is odd,
    # else the mean of the values at (n-1)//2 and n//2.
    n = len(values)
    lower: float | None = None
    seen = 0
    for value, count in sorted(counts.items()):
        seen += count
        if lower is None and seen > (n - 1) // 2:
            lower = value
        if seen > n // 2:
            return value if n % 2 else (lower + value) / 2  # type: ignore[operator]
    raise ValueError("no median of no values")


def describe(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, mean, SD (sample), median, min, max of a list of numbers (None when empty)."""
    if not values:
        return {"n": 0, "mean": None, "sd": None, "median": None, "min": None, "max": None}
    return {
        "n": len(values),
        "mean": fmean(values),
        "sd": stdev(values) if len(values) > 1 else None,
        "median": _median(values),
        "min": min(values),
        "max": max(values),
    }


def _stats(kind: type[Stats], values: Sequence[float], with_stats: bool,
           **fields: Any) -> Stats:
    """:func:`describe` and ``ci95``, the mean's bootstrap CI (None without the stats
    extra), as ``kind`` with ``fields``. When every value is the same (one included) there is
    no CI: a point is not a 95% interval (:func:`evaluator.analysis.intervals.
    interval_or_reason`), and ``ci_note`` says why ("no interval: all 4 scores equal")."""
    if not with_stats:
        return kind(**describe(values), ci95=None, **fields)
    why = "one score" if len(values) == 1 else f"all {len(values)} scores equal"
    ci95, note = interval_or_reason(mean_ci(values), why)
    return kind(**describe(values), ci95=ci95, ci_note=note, **fields)


def summarize(rubric: Rubric, judge: str, records: Iterable[ResultRecord], *,
              score_mode: str = "argmax", source: str = "the results") -> RunSummary:
    """Build the summary written to ``summary.json``, in one pass over ``records``
    (streamed from the results file: only the numbers are kept).

    ``score_mode`` (:mod:`evaluator.analysis.score_mode`): ``expected`` computes every figure
    from the expected scores; ``ok`` records without distributions are then left out and
    counted (``score_mode.left_out_no_distributions``), and :class:`ScoreModeError` (naming
    ``source``) is raised when no ``ok`` record has any. The panel blocks
    (``self_consistency``, ``inter_judge``) compare the verdicts as written in either mode."""
    integer_keys = [f.key for f in rubric.output if isinstance(f, IntegerCriterion)]
    by_key: dict[str, array[float]] = {key: array("d") for key in integer_keys}
    by_key.update({agg.name: array("d") for agg in rubric.aggregates})
    statuses: Counter[str] = Counter()
    failed: list[str] = []
    # Per panel kind (samples, jury): the first such record and each case's verdicts.
    panels: dict[str, tuple[ResultRecord, list[Any]] | None] = {"samples": None, "jury": None}
    ok = left_out = 0
    for record in records:
        statuses[record.status] += 1
        for attribute, kept in panels.items():
            verdicts = getattr(record, attribute)
            if verdicts:
                if kept is None:
                    kept = panels[attribute] = (record, [])
                kept[1].append([(v.scores, v.aggregates) if v.status == "ok" else (None, None)
                                for v in verdicts])
        if record.status != "ok" or record.scores is None:
            failed.append(record.case_id)
            continue
        ok += 1
        view = verdict_view(rubric, record, score_mode)  # type: ignore[arg-type]
        if view is None:  # expected scores of a record without distributions
            left_out += 1
            continue
        scores, aggregates = view
        for key in integer_keys:
            by_key[key].append(float(scores[key]))
        for agg in rubric.aggregates:
            value = (aggregates or {}).get(agg.name)
            if value is not None:
                by_key[agg.name].append(float(value))
    if score_mode == "expected" and ok and left_out == ok:
        raise ScoreModeError(f"{source}: --score expected needs score distributions, and none "
                             f"of its {ok} ok record(s) has any ({NO_DISTRIBUTIONS}); "
                             f"{GET_DISTRIBUTIONS}")
    return _assemble(rubric, judge, by_key, statuses, failed, panels,
                     ScoreModeBlock(**mode_block(score_mode, left_out)))


def _header(rubric: Rubric, judge: str, statuses: Counter[str],
            failed: list[str]) -> dict[str, Any]:
    """The fields every summary starts with: version, rubric, judge and the statuses, and
    ``stats_note`` without the stats extra."""
    return {"summary_version": SUMMARY_VERSION, "rubric": rubric.name, "judge": judge,
            "cases": sum(statuses.values()), "status_counts": dict(sorted(statuses.items())),
            "failed_case_ids": failed, "stats_note": None if stats_available() else
            f"confidence intervals need the stats extra: {STATS_EXTRA_HINT}"}


def _counts(values: Sequence[float], allowed: Sequence[int]) -> dict[str, int]:
    """The count of each allowed value, then of each reduced score between them (several
    samples or judges)."""
    counts = Counter(values)
    return {**{str(v): counts.get(float(v), 0) for v in allowed},
            **{f"{v:g}": n for v, n in sorted(counts.items()) if v not in allowed}}


def _assemble(rubric: Rubric, judge: str, by_key: dict[str, array[float]],
              statuses: Counter[str], failed: list[str],
              panels: dict[str, tuple[ResultRecord, list[Any]] | None],
              mode: ScoreModeBlock) -> Summary:
    with_stats = stats_available()
    categorical = mode.mode != "expected"  # expected scores are not categories: no counts
    criteria = {f.key: _stats(CriterionStats, by_key[f.key], with_stats,
                              counts=_counts(by_key[f.key], f.allowed) if categorical else None,
                              alias=rubric.alias_of(f.key) or None)
                for f in rubric.output if isinstance(f, IntegerCriterion)}
    aggregates = {agg.name: _stats(AggregateStats, by_key[agg.name], with_stats,
                                   alias=rubric.alias_of(agg.name) or None)
                  for agg in rubric.aggregates}
    # Rates are over judged cases; cases without a verdict are neither pass nor fail.
    not_judged = sum(statuses.values()) - statuses.get("ok", 0)
    pass_rates = {key: PassRate(**pass_rate(by_key[key], threshold, with_ci=with_stats),
                                not_judged=not_judged)
                  for key, threshold in rubric.pass_thresholds.items()}
    blocks = {name: panel_summary(rubric, *panel, attribute, with_stats)
              for name, attribute in (("self_consistency", "samples"), ("inter_judge", "jury"))
              if (panel := panels[attribute]) is not None}
    return Summary(
        **_header(rubric, judge, statuses, failed), criteria=criteria, aggregates=aggregates,
        aliases=dict(rubric.aliases), pass_rates=pass_rates, score_mode=mode, **blocks,
        ci_method=(f"mean: percentile bootstrap, 95%, {BOOTSTRAP_RESAMPLES} resamples, seeded "
                   "(scipy.stats.bootstrap); pass rates: Wilson (scipy.stats.binomtest)"))


def pairwise_summary(rubric: Rubric, judge: str,
                     records: Iterable[ResultRecord]) -> PairwiseSummary:
    """A pairwise rubric's summary, in one pass: status counts and, per choice criterion,
    A's win rate over B (an inconsistent pair counted as a tie), the position consistency
    and the position bias, each with its 95% CI (:mod:`evaluator.analysis.pairwise.pairwise`;
    ``evaluator compare`` adds length bias, Bradley-Terry and labels)."""
    statuses: Counter[str] = Counter()
    failed: list[str] = []
    pairs = {c.key: Pairs(c.key, {}) for c in rubric.choices()}
    for record in records:
        statuses[record.status] += 1
        if record.status != "ok":
            failed.append(record.case_id)
        for kept in pairs.values():
            kept.add(record)
    with_stats = stats_available()
    criteria = {key: PairwiseCriterion(**outcome_counts(kept.outcome),
                                       **(order_figures(kept) if with_stats and len(kept)
                                          else {}))
                for key, kept in pairs.items()}
    systems = next((kept.systems for kept in pairs.values() if kept.systems), {})
    return PairwiseSummary(**_header(rubric, judge, statuses, failed), pairwise=PairwiseBlock(
        systems=systems, criteria=criteria, note=INCONSISTENT_NOTE))


def panel_summary(rubric: Rubric, first: ResultRecord, table: list[Any], attribute: str,
                  with_stats: bool) -> PanelAgreement:
    """Agreement across a case's samples (``attribute="samples"``) or jury members
    (``"jury"``): Krippendorff's alpha per criterion and the share of unanimous cases.
    ``table[case][rater]`` holds ``(scores, aggregates)``, ``(None, None)`` for a failure."""
    verdicts = getattr(first, attribute)
    raters = ([v.judge for v in verdicts] if attribute == "jury"
              else [f"sample {v.sample}" for v in verdicts])
    agreement = rater_agreement(rubric, table) if with_stats else {"alpha": None}
    return PanelAgreement(**{**agreement, "reduction": first.reduction, "raters": raters})


def write_summary(path: Path, summary: RunSummary) -> None:
    """Write the summary as JSON (mode 0600, replaced atomically)."""
    write_json_atomic(path, summary.to_json())


def summary_path_for(results_path: Path) -> Path:
    """``results.jsonl`` -> ``results.summary.json`` beside it."""
    results_path = Path(results_path)
    return results_path.with_name(results_path.stem + ".summary.json")
