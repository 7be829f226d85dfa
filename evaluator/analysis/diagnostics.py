"""What can make agreement figures mislead, and the judge's own biases, measured on the
user's data.

* :func:`scale_use` - a judge (or labels) with one value for a criterion, or a judge using
  two values of a wider scale: a warning first, and which statistics are then meaningless.
* :func:`chance_agreement` - the exact / within-one agreement expected by chance from the two
  marginal distributions (a judge answering 2 on every case gets within-one 1.000 against 1-2
  labels, and so would any such judge: the chance level says so).
* :func:`circular_fields` - input fields the judge is shown from which the label can be
  read (the label is a deterministic function of the field over the joined cases).
* :func:`verbosity` - score against the length of the evaluated text and of the judge's own
  verdict (``completion_tokens``): Spearman with a Fisher-z CI and the p-value of the same
  statistic, and controlling for the label.
* :func:`subgroups` - mean score and agreement per value of a grouping column, and each
  group against the rest with a Welch CI of the difference.

Warnings name fields and counts, never case text. scipy, numpy and pingouin are imported
inside the functions (the ``stats`` extra).
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from itertools import pairwise
from statistics import median
from typing import Any

from evaluator.analysis.intervals import clean, fisher_z_ci, welch_diff_ci

# A statistic whose chance level (independent judge and labels with the same marginals) is
# at least this high says nothing about the judge.
CHANCE_CEILING = 0.9
# Value-comparing statistics (the rank correlations are meaningless only when constant).
VALUE_STATISTICS = ("kappa_quadratic", "icc_a1", "krippendorff_alpha_ordinal",
                    "mean_abs_difference", "exact", "within_one")
ALL_STATISTICS = ("spearman", "kendall_tau_b", *VALUE_STATISTICS)
# --by: a grouping column, not free text.
MAX_GROUPS = 20
MAX_GROUP_NAME = 60


def _values_text(values: Sequence[float]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def scale_use(judge: Sequence[float], labels: Sequence[float],
              judge_scale: Sequence[int] | None) -> tuple[list[str], dict[str, str]]:
    """(warnings, statistic -> why it is meaningless) for one criterion's paired values."""
    used = sorted(set(judge))
    labelled = sorted(set(labels))
    messages: list[str] = []
    meaningless: dict[str, str] = {}
    n = len(judge)
    if len(used) == 1:
        messages.append(f"the judge gave the same value ({used[0]:g}) to all {n} cases: it "
                        "does not discriminate, and no agreement statistic means anything")
        meaningless.update(dict.fromkeys(ALL_STATISTICS, "the judge gives one value"))
    elif judge_scale and len(used) == 2 and len(judge_scale) > 2:
        messages.append(f"the judge used only 2 of the {len(judge_scale)} values of its scale "
                        f"({_values_text(used)}): it makes a two-way split, whatever the "
                        "statistics below say about a graded scale")
    if len(labelled) == 1:
        messages.append(f"every label is {labelled[0]:g}: no agreement statistic means "
                        "anything")
        meaningless.update(dict.fromkeys(ALL_STATISTICS, "the labels have one value"))
    return messages, meaningless


def chance_agreement(judge: Sequence[float], labels: Sequence[float], within: float,
                     weights: Sequence[float] | None = None) -> float:
    """Share of pairs with |judge - label| <= ``within`` expected when judge and labels are
    independent with their observed marginal distributions (with design ``weights``, the
    weighted marginals: the chance level of a weighted agreement share)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    w = np.ones(len(judge)) if weights is None else np.asarray(weights, float)
    j_values, j_index = np.unique(np.asarray(judge, float), return_inverse=True)
    l_values, l_index = np.unique(np.asarray(labels, float), return_inverse=True)
    j_counts = np.bincount(j_index, weights=w, minlength=len(j_values))
    l_counts = np.bincount(l_index, weights=w, minlength=len(l_values))
    close = np.abs(j_values[:, None] - l_values[None, :]) <= within
    joint = np.outer(j_counts / j_counts.sum(), l_counts / l_counts.sum())
    return float((joint * close).sum())


def determined_by_one_side(judge: Sequence[float], labels: Sequence[float],
                           within: float) -> str | None:
    """Why exact (``within`` 0) or within-one (1) agreement cannot depend on which case got
    which score, or None. With judge values {1, 5} and labels {1, 2}, a 1 is always within
    one of the label and a 5 never is: within-one agreement is the judge's share of 1s,
    whatever the labels say."""
    used, labelled = sorted(set(judge)), sorted(set(labels))
    if all(len({abs(j - lab) <= within for lab in labelled}) == 1 for j in used):
        return "it is fixed by the judge's score distribution alone, whatever the labels"
    if all(len({abs(j - lab) <= within for j in used}) == 1 for lab in labelled):
        return "it is fixed by the label distribution alone, whatever the judge says"
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _is_function(keys: Sequence[Any], labels: Sequence[float]) -> bool:
    seen: dict[Any, float] = {}
    return all(seen.setdefault(key, label) == label for key, label in zip(keys, labels))


def circular_fields(fields: Mapping[str, Sequence[str]],
                    labels: Sequence[float]) -> list[dict[str, Any]]:
    """Fields whose (stripped) value determines the label on every joined case.

    ``fields``: field name -> its value per joined case, in the order of ``labels``. A
    field is reported when the label is a function of its value and the values repeat
    (fewer distinct values than half the cases: a field unique per case trivially
    "determines" anything), or, for a numeric field, when one threshold per label change
    sorts the cases by label. Nothing is reported when the labels have one value."""
    n = len(labels)
    if n < 4 or len(set(labels)) < 2:
        return []
    found = []
    label_values = len(set(labels))
    for name, raw in fields.items():
        values = [str(v).strip() for v in raw]
        distinct = len(set(values))
        if distinct * 2 <= n and _is_function(values, labels):
            found.append({"field": name, "rule": "lookup", "field_values": distinct,
                          "one_to_one": distinct == label_values, "n": n})
            continue
        numbers = [_number(v) for v in values]
        if n < 10 or any(v is None for v in numbers) or not _is_function(numbers, labels):
            continue
        ordered = [label for _, label in sorted(zip(numbers, labels), key=lambda p: p[0])]
        changes = sum(1 for a, b in pairwise(ordered) if a != b)
        if changes == label_values - 1:
            found.append({"field": name, "rule": "threshold", "field_values": distinct,
                          "one_to_one": False, "n": n})
    return found


def circular_warning(label_field: str, entry: Mapping[str, Any]) -> str:
    """The warning for one :func:`circular_fields` entry: names the field, never a value."""
    how = ("its values map one-to-one onto the labels" if entry["one_to_one"] else
           f"its {entry['field_values']} values each give one label" if entry["rule"] == "lookup"
           else "a threshold on its numeric value gives the label")
    return (f"circular labels: {label_field!r} can be read from the input field "
            f"{entry['field']!r} the judge is shown ({how} in all {entry['n']} joined cases): "
            "agreement measures reading that field, not judging")


def _undefined(n: int, minimum: int, *columns: tuple[Sequence[float], str]) -> str | None:
    """Why a (partial) rank correlation is undefined (too few cases, a column with one
    value: "every length the same"), or None. ``columns``: (values, what one value is)."""
    if n < minimum:
        return f"{n} case(s), fewer than {minimum}"
    for values, what in columns:
        if len(set(values)) < 2:
            return f"every {what} the same"
    return None


def _correlation(x: Sequence[float], y: Sequence[float], what: str = "length") -> dict[str, Any]:
    """Spearman rho of scores ``x`` and ``y`` (a length, or ``what``) with its Fisher-z
    (Bonett-Wright) CI and the p-value of the same Wald statistic
    (:func:`~evaluator.analysis.intervals.fisher_z_ci`), so p < 0.05 exactly when the CI
    excludes 0; rho None when undefined, ``undefined`` saying why. With no CI (n = 3,
    |rho| = 1) there is no p-value either, and ``method`` says why."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import spearmanr

    n = len(x)
    why = _undefined(n, 3, (x, "score"), (y, what))
    if why:
        return {"n": n, "rho": None, "p": None, "ci95": None, "method": "Spearman",
                "undefined": why}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = spearmanr(x, y)
    rho = clean(result.statistic)
    ci = fisher_z_ci(rho, n, "spearman")
    return {"n": n, "rho": rho, "p": ci["p"], "ci95": ci["ci95"],
            "method": f"Spearman; CI and p: {ci['method']}"}


def _partial(x: Sequence[float], y: Sequence[float], control: Sequence[float]) -> dict[str, Any]:
    """Spearman partial correlation of x and y given ``control`` (``pingouin.partial_corr``)
    with a Fisher-z CI (Bonett-Wright SE, n - 1 for the one covariate)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import pandas as pd
    import pingouin

    n = len(x)
    why = _undefined(n, 5, (x, "score"), (y, "length"), (control, "label"))
    if why:
        return {"n": n, "rho": None, "ci95": None, "method": "Spearman partial",
                "undefined": why}
    data = pd.DataFrame({"x": x, "y": y, "c": control})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            table = pingouin.partial_corr(data=data, x="x", y="y", covar="c",
                                          method="spearman")
        except (ValueError, AssertionError, ZeroDivisionError):
            return {"n": n, "rho": None, "ci95": None, "method": "Spearman partial",
                    "undefined": "pingouin could not compute it on these values"}
    rho = clean(table["r"].iloc[0])
    ci = fisher_z_ci(rho, n - 1, "spearman")
    return {"n": n, "rho": rho, "ci95": ci["ci95"],
            "method": f"Spearman partial (pingouin); CI on n - 1, {ci['method']}"}


def verbosity(scores: Sequence[float], labels: Sequence[float] | None,
              text_chars: Sequence[int | None] | None,
              completion_tokens: Sequence[int | None]) -> dict[str, Any]:
    """Score against the evaluated text's length (characters) and the judge's own verdict
    length (completion tokens): Spearman rho with a CI, the same controlling for the label
    (a longer answer may deserve more; a longer answer with the same label should not get
    more), and the median lengths per score value."""
    out: dict[str, Any] = {}
    for name, lengths in (("text_chars", text_chars), ("completion_tokens", completion_tokens)):
        if lengths is None:
            continue
        kept = [(s, float(n), lab) for s, n, lab in
                zip(scores, lengths, labels if labels is not None else [None] * len(scores))
                if n is not None]
        if not kept:
            continue
        s, n = [k[0] for k in kept], [k[1] for k in kept]
        entry = {"correlation": _correlation(s, n)}
        if labels is not None:
            entry["given_label"] = _partial(s, n, [k[2] for k in kept])
        by_score: dict[float, list[float]] = defaultdict(list)
        for score, length in zip(s, n):
            by_score[score].append(length)
        entry["median_by_score"] = {f"{score:g}": {"n": len(v), "median": float(median(v))}
                                    for score, v in sorted(by_score.items())}
        out[name] = entry
    return out


def subgroups(groups: Sequence[str], scores: Sequence[float],
              labels: Sequence[float]) -> dict[str, Any]:
    """Per group value: n, mean score, mean label, exact agreement, Spearman (when
    undefined, ``spearman_undefined`` says why); each group
    against the rest: the difference of mean scores and of mean labels (Welch CIs), so a
    score gap the labels do not show stands out."""
    members: dict[str, list[int]] = defaultdict(list)
    for i, group in enumerate(groups):
        members[group].append(i)
    table = {}
    for group, rows in sorted(members.items()):
        rest = [i for i in range(len(groups)) if groups[i] != group]
        s = [scores[i] for i in rows]
        lab = [labels[i] for i in rows]
        correlation = _correlation(s, lab, "label")
        table[group] = {
            "n": len(rows),
            "mean_score": clean(sum(s) / len(s)),
            "mean_label": clean(sum(lab) / len(lab)),
            "exact": clean(sum(1 for a, b in zip(s, lab) if a == b) / len(rows)),
            "spearman": correlation["rho"],
            "spearman_undefined": correlation.get("undefined"),
            "vs_rest": {
                "score": welch_diff_ci(s, [scores[i] for i in rest]),
                "label": welch_diff_ci(lab, [labels[i] for i in rest]),
            },
        }
    return table
