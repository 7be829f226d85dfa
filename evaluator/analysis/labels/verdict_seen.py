"""Whether labels were given with the judge's verdict in view: :func:`verdict_seen_note`,
the note ``agree`` and ``estimate`` print then, from what a
:class:`~evaluator.analysis.labels.labelset.LabelSet` says (its source's ``blind``, labels
saved after the verdict was shown) or, when its source does not say, from its rows (a
worksheet's design, the judge's columns, the sheet it sits in)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluator.analysis.labels.labelset import LabelSet

# The columns a non-blind worksheet (``evaluator review --design priority``) adds to show
# the judge's verdict: whole-row signals, and each criterion's KEY.<part> (an aggregate's
# KEY.aggregate). A labels file holding any of them was labelled with the verdict in view.
JUDGE_SIGNAL_COLUMNS = ("min_confidence", "max_spread", "gate_margin")
JUDGE_PARTS = ("score", "expected", "confidence", "distribution")
AGGREGATE_PART = "aggregate"
VERDICT_SEEN = ("NOTE: labels given with the judge's verdict in view ({why}): they may echo "
                "the judge, which inflates agreement (kappa, gate sensitivity) and PPI++'s "
                "lambda; for figures about the judge, label a blind sheet (evaluator review "
                "--design random or active)")


def judge_columns(rows: Sequence[tuple[int, dict[str, Any]]]) -> list[str]:
    """The columns of a non-blind sheet that show the judge's verdict
    (:data:`JUDGE_SIGNAL_COLUMNS`, ``KEY.<part>`` of :data:`JUDGE_PARTS`, ``KEY.aggregate``) among ``rows``'
    columns, in the file's order."""
    names = dict.fromkeys(name for _, row in rows for name in row)
    return [name for name in names if name in JUDGE_SIGNAL_COLUMNS
            or ("." in name and name.rsplit(".", 1)[1] in (*JUDGE_PARTS, AGGREGATE_PART))]


def verdict_seen_note(labels: LabelSet, *, priority: bool = False) -> str | None:
    """The note for labels given with the judge's verdict in view, or None. A source that
    says whether it was blind (a sheet, an export of one): not blind, or some of its labels
    were saved after the verdict was shown. Else (a labels file), wherever the file is (a
    worksheet mailed to a clinician and back): its design is ``priority`` (a sheet that
    shows the verdicts), or what its reader found (``shown``: the judge's columns, a
    non-blind sheet's folder)."""
    if labels.blind is not None:
        why = []
        if not labels.blind:
            why.append(f"{labels.origin} is not a blind {labels.noun}")
        if labels.judge_seen:
            why.append(f"{labels.judge_seen} label(s) were saved after the verdict was shown")
        return VERDICT_SEEN.format(why="; ".join(why)) if why else None
    if priority:
        return VERDICT_SEEN.format(why=f"{labels.origin} is a priority worksheet, which shows "
                                       "the judge's verdicts")
    return VERDICT_SEEN.format(why=labels.shown) if labels.shown else None


def shown_in_rows(path: Path, rows: Sequence[tuple[int, dict[str, Any]]]) -> str | None:
    """Why the labels file ``path`` shows the judge's verdict, from its ``rows``: they have
    a column of the judge's (:func:`judge_columns`); None when they do not."""
    shown = judge_columns(rows)
    if not shown:
        return None
    more = f" and {len(shown) - 2} more" if len(shown) > 2 else ""
    return f"{path} has the judge's columns ({', '.join(shown[:2])}{more})"
