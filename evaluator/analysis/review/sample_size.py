"""How many labelled cases an agreement CI needs: an estimate from the CI at hand.

:func:`halfwidth_estimate` computes the statistic's 95% CI on the labelled cases exactly as
``evaluator agree`` does (:func:`evaluator.analysis.agreement.agreement.criterion_agreement`: a
seeded BCa bootstrap over case pairs for kappa and alpha, the Fisher-z fallback for a rank
correlation whose bootstrap is unreliable, pingouin's F interval for the ICC) and scales its
half-width by sqrt(n / n'), the rate at which a standard error shrinks with the number of
cases: n' = n * (half-width / target)^2. It is an **estimate**: it assumes the statistic, and
the scores and labels the next cases bring, stay as they are; with few labelled cases the
current interval, and so the estimate, is itself rough.

The heavy libraries (the ``stats`` extra) are imported by the agreement module's functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evaluator.analysis.agreement.agreement import (
    AGREEMENT_RESAMPLES,
    AGREEMENT_SEED,
    criterion_agreement,
)

# --target-statistic -> (the key in criterion_agreement's result, its name).
TARGET_STATISTICS: dict[str, tuple[str, str]] = {
    "weighted_kappa": ("kappa_quadratic", "quadratic-weighted kappa"),
    "spearman": ("spearman", "Spearman rho"),
    "kendall": ("kendall_tau_b", "Kendall tau-b"),
    "krippendorff_alpha": ("krippendorff_alpha_ordinal", "Krippendorff's alpha (ordinal)"),
    "icc": ("icc_a1", "ICC(A,1)"),
}
# Below this many labelled cases the current interval is itself unstable: said in a note.
FEW_LABELLED = 20
METHOD = ("estimate: the current 95% CI half-width scaled by sqrt(n / n'); assumes the "
          "statistic and the score and label distributions stay as they are")


def halfwidth_estimate(judge: Sequence[float], labels: Sequence[float], *, statistic: str,
                       target_halfwidth: float, judge_scale: Sequence[int] | None = None,
                       resamples: int = AGREEMENT_RESAMPLES,
                       seed: int = AGREEMENT_SEED) -> dict[str, Any]:
    """The labelled cases ``n`` would need to reach ``n_needed`` for the 95% CI of
    ``statistic`` (a key of :data:`TARGET_STATISTICS`) to have a half-width of at most
    ``target_halfwidth``; ``more`` = ``n_needed - n``. ``judge`` and ``labels`` are the
    paired scores of the labelled cases. ``n_needed`` is None, with a ``note``, when the
    statistic or its interval is undefined here."""
    if statistic not in TARGET_STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; one of "
                         f"{', '.join(TARGET_STATISTICS)}")
    if not target_halfwidth > 0:
        raise ValueError("the target half-width must be above 0")
    key, name = TARGET_STATISTICS[statistic]
    out: dict[str, Any] = {"statistic": statistic, "name": name, "n": len(judge),
                           "target_halfwidth": target_halfwidth, "value": None, "ci95": None,
                           "ci_method": None, "halfwidth": None, "n_needed": None,
                           "more": None, "method": METHOD, "note": None}
    figures = criterion_agreement(judge, labels, resamples=resamples, seed=seed,
                                  judge_scale=judge_scale)
    entry = figures.get(key)
    if entry is None:
        out["note"] = figures.get("note") or f"{name} not computed"
        return out
    out.update(value=entry.get("value"), ci95=entry.get("ci95"), ci_method=entry.get("ci_method"))
    if entry.get("meaningless"):
        out["warning"] = f"{name} is meaningless here: {entry['meaningless']}"
    ci = entry.get("ci95")
    if entry.get("value") is None:
        why = entry.get("note") or "a judge or labels with a single value?"
        out["note"] = (f"{name} is undefined on these {len(judge)} labelled case(s) ({why}): "
                       "no estimate")
        return out
    if not ci:
        out["note"] = (f"{name} has no 95% CI on these {len(judge)} labelled case(s) "
                       f"({entry.get('ci_method')}): no estimate")
        return out
    halfwidth = (ci[1] - ci[0]) / 2
    n = len(judge)
    out["halfwidth"] = halfwidth
    needed = (n if halfwidth <= target_halfwidth
              else math.ceil(n * (halfwidth / target_halfwidth) ** 2))
    out["n_needed"] = needed
    out["more"] = needed - n
    if n < FEW_LABELLED:
        out["note"] = (f"only {n} labelled case(s): the current interval, and so this "
                       "estimate, is rough; re-estimate after the next batch")
    return out
