"""The HTML report's short notes: what agreement statistics cannot say, one line per
criterion and file instead of one line per statistic.

:func:`evaluator.analysis.agreement.agreement.agreement` marks each statistic that means
nothing for the data (``"meaningless": why``); a judge with one value marks all eight with the
same reason. The terminal (``evaluator agree``) lists them one by one; the page says it once:
"all agreement statistics are meaningless for hallucination: the judge gave 3 on every case".
Presentation only: the agreement figures are not changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The agreement table's columns, in order: (key in the agreement result, title on the page).
AGREEMENT_STATISTICS: tuple[tuple[str, str], ...] = (
    ("spearman", "Spearman rho"), ("kendall_tau_b", "Kendall tau-b"),
    ("kappa_quadratic", "kappa (quadratic)"), ("icc_a1", "ICC(A,1)"),
    ("krippendorff_alpha_ordinal", "Krippendorff alpha"),
    ("mean_abs_difference", "mean |judge − label|"), ("exact", "exact"),
    ("within_one", "within one"))
# The reasons evaluator.analysis.diagnostics.scale_use gives, said with the value itself.
_ONE_JUDGE_VALUE = "the judge gives one value"
_ONE_LABEL_VALUE = "the labels have one value"


def _values_text(values: Sequence[Any]) -> str:
    return ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values)


def _reason(why: str, stats: Mapping[str, Any]) -> str:
    """``why`` with the single value named, where the data give it."""
    judge, labels = stats.get("judge_values_used") or [], stats.get("label_values_used") or []
    if why == _ONE_JUDGE_VALUE and len(judge) == 1:
        return f"the judge gave {_values_text(judge)} on every case"
    if why == _ONE_LABEL_VALUE and len(labels) == 1:
        return f"every label is {_values_text(labels)}"
    return why


def _titles(titles: Sequence[str]) -> str:
    return titles[0] if len(titles) == 1 else f"{', '.join(titles[:-1])} and {titles[-1]}"


def meaningless_note(criterion: str, stats: Mapping[str, Any] | None) -> str | None:
    """One line for every statistic of one criterion and file that means nothing for these
    data (marked * in the table), grouped by reason; None when there is none.

    All of them for one reason: "all agreement statistics are meaningless for accuracy: the
    judge gave 2 on every case"; one reason for some: "exact and within one are meaningless
    for accuracy: chance alone gives 0.982"; several: "meaningless for accuracy: exact
    (...); within one (...)"."""
    if not stats:
        return None
    shown = [(key, title) for key, title in AGREEMENT_STATISTICS
             if isinstance(stats.get(key), Mapping) and not stats[key].get("not_applicable")]
    by_reason: dict[str, list[str]] = {}
    for key, title in shown:
        if why := stats[key].get("meaningless"):
            by_reason.setdefault(str(why), []).append(title)
    if not by_reason:
        return None
    if len(by_reason) == 1 and len(next(iter(by_reason.values()))) == len(shown) > 1:
        return (f"all agreement statistics are meaningless for {criterion}: "
                f"{_reason(next(iter(by_reason)), stats)}")
    if len(by_reason) == 1:
        (why, titles), = by_reason.items()
        return (f"{_titles(titles)} {'is' if len(titles) == 1 else 'are'} meaningless for "
                f"{criterion}: {_reason(why, stats)}")
    return f"meaningless for {criterion}: " + "; ".join(
        f"{_titles(titles)} ({_reason(why, stats)})" for why, titles in by_reason.items())
