"""Bradley-Terry strengths of several systems from pairwise outcomes (``evaluator compare``
with results files covering more than two systems), fitted as Chatbot Arena does: a
logistic regression of "the first-named system won" on a +1/-1 design (+1 in the column of
the battle's system A, -1 in B's), no intercept and no penalty, a tie half a win each way.

P(A beats B) = sigmoid(s_A - s_B): strengths are on the log-odds scale (natural log, not
Arena's 400/log(10) Elo scale), identified up to a constant, reported with their mean 0.
The fit is scikit-learn's ``LogisticRegression(fit_intercept=False, C=np.inf)`` by
:func:`logit.fit_logit` (checked against statsmodels in the tests); the 95% CIs are percentile bootstrap intervals over battles, resampled within
each results file (each pairing keeps its number of battles).

numpy is imported inside the functions (the ``stats`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluator.analysis.intervals import (
    NO_INTERVAL,
    UNDEFINED_SHARE_LIMIT,
    clean,
    interval_or_reason,
)
from evaluator.analysis.logit import fit_logit
from evaluator.analysis.pairwise.pairwise import WIN_VALUE, bootstrap_counts
from evaluator.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED

# Strengths closer than this are equal (the fit's own precision), and share a rank.
TIED_STRENGTH = 1e-9


@dataclass(frozen=True)
class Battles:
    """One pairing's battles: system A's and B's names and each battle's outcome ("A",
    "B", "tie" or "inconsistent", the last two half a win each way)."""

    a: str
    b: str
    outcomes: Sequence[str]


def _design(battles: Sequence[Battles], systems: Sequence[str]) -> tuple[Any, Any]:
    """The +1/-1 design without the first system's column (its strength is the anchor 0
    during the fit) and the responses."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    index = {name: i for i, name in enumerate(systems)}
    rows, y = [], []
    for group in battles:
        row = np.zeros(len(systems))
        row[index[group.a]] += 1.0
        row[index[group.b]] -= 1.0
        rows.extend([row] * len(group.outcomes))
        y.extend(WIN_VALUE[o] for o in group.outcomes)
    x = np.array(rows, dtype=float).reshape(-1, len(systems))
    return x[:, 1:], np.array(y, dtype=float)


def _connected(battles: Sequence[Battles], systems: Sequence[str]) -> bool:
    seen, todo = {systems[0]}, [systems[0]]
    while todo:
        name = todo.pop()
        for group in battles:
            for here, there in ((group.a, group.b), (group.b, group.a)):
                if here == name and there not in seen:
                    seen.add(there)
                    todo.append(there)
    return seen == set(systems)


def _centred(beta: Any) -> Any:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    full = np.concatenate([np.zeros((beta.shape[0], 1)), beta], axis=1)
    return full - full.mean(axis=1, keepdims=True)


def fit_strengths(battles: Sequence[Battles], systems: Sequence[str]) -> list[float] | None:
    """Each system's strength (log-odds, mean 0), in the order of ``systems``; None when
    the maximum-likelihood estimate is not finite (a system won or lost every battle)."""
    x, y = _design(battles, systems)
    beta, fitted = fit_logit(x, y, [1.0] * len(y))
    if not fitted:
        return None
    return [float(v) for v in _centred(beta[None, :])[0]]


def bradley_terry(battles: Sequence[Battles], *, resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = BOOTSTRAP_SEED) -> dict[str, Any]:
    """Strengths with their 95% CIs and the ranking (strongest first). Returns
    ``systems`` (name, strength, ci95, rank), ``battles``, ``scale``, ``method`` and
    ``note`` (why there are no strengths or no CIs, else None)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    battles = [b for b in battles if b.outcomes]
    systems = sorted({name for b in battles for name in (b.a, b.b)})
    out: dict[str, Any] = {
        "systems": [], "battles": sum(len(b.outcomes) for b in battles),
        "scale": "log-odds: P(i beats j) = sigmoid(s_i - s_j); mean strength 0",
        "method": (f"maximum likelihood (logistic, +1/-1 design); percentile bootstrap over "
                   f"battles within each file, {resamples} resamples"),
        "note": None}
    if len(systems) < 2:
        out["note"] = "fewer than two systems"
        return out
    if not _connected(battles, systems):
        out["note"] = ("the pairings do not connect every system: their strengths are not "
                       "on one scale")
        return out
    strengths = fit_strengths(battles, systems)
    if strengths is None:
        out["note"] = ("a system won (or lost) every battle: its strength is infinite and "
                       "no finite fit exists")
        return out
    x, y = _design(battles, systems)
    draws = []
    for counts in bootstrap_counts([len(b.outcomes) for b in battles], resamples, seed):
        beta, fitted = fit_logit(x, y, counts, start=np.asarray(strengths[1:]) - strengths[0])
        centred = _centred(beta)
        centred[~fitted] = np.nan
        draws.append(centred)
    distribution = np.concatenate(draws)
    undefined = int((~np.isfinite(distribution).all(axis=1)).sum())
    intervals: list[list[float] | None] = [None] * len(systems)
    if undefined / resamples > UNDEFINED_SHARE_LIMIT:
        out["note"] = (f"bootstrap unreliable: {undefined} of {resamples} resamples have no "
                       "finite fit (too few battles); no CIs")
    else:
        kept = distribution[np.isfinite(distribution).all(axis=1)]
        low, high = np.percentile(kept, [2.5, 97.5], axis=0)
        why = "every resample gave the same strength"
        checked = [interval_or_reason([clean(lo), clean(hi)], why)
                   for lo, hi in zip(low, high, strict=True)]
        intervals = [ci for ci, _ in checked]
        notes = []
        if undefined:
            notes.append(f"{undefined} of {resamples} resamples had no finite fit: left out")
        points = [systems[i] for i, (_, reason) in enumerate(checked) if reason]
        if points:
            # E.g. every battle a tie or inconsistent: each resample fits strength 0 to all.
            notes.append(f"{NO_INTERVAL} for {', '.join(points)}: {why} (a point is not "
                         "a 95% CI; every battle a tie or inconsistent?)")
        out["note"] = "; ".join(notes) or None
    order = sorted(range(len(systems)), key=lambda i: -strengths[i])
    rank = 0
    for position, i in enumerate(order, start=1):
        # Equal strengths (within rounding) share a rank: 1, 1, 3.
        if position == 1 or strengths[order[position - 2]] - strengths[i] > TIED_STRENGTH:
            rank = position
        out["systems"].append({"name": systems[i], "strength": clean(strengths[i]),
                               "ci95": intervals[i], "rank": rank})
    return out
