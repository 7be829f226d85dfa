"""How many labels a direction needs, and how many more would settle one.

**The minimum.** Below :data:`MIN_LABELS_ESTIMATE` labelled cases of a system (for its
estimate and the judge's bias there) or :data:`MIN_LABELS_DIFFERENCE` labelled cases of a
pair (cases labelled for both systems when the difference is paired; the smaller system's
count when it is independent), no direction ("higher", "lower") and no p-value is stated:
the figures are still shown as figures, and the sentence says :func:`too_few`'s words.
The values come from the small-sample coverage simulation, ``benchmarks/small_n_coverage.py``,
whose table and reasoning are in ``docs/statistics.md``; this module is their one home.

**Label about N more.** Where a difference's 95% CI holds 0 (its sign undecided), how many
more labelled cases would be expected to settle it if the difference and the spread stay as
seen (:func:`label_more`). Pure arithmetic, no statistics library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from evaluator.analysis.intervals import Z95

# Where the values come from: benchmarks/small_n_coverage.py (results:
# benchmarks/results/small_n_coverage.txt; docs/statistics.md, "Few labels"): the smallest
# number of labels on a random sheet at and above which no interval of that kind covered
# less than 93% beyond its Monte Carlo error (500 replicates per cell: below 91.1%) in any
# scenario simulated (a decent judge, one confidently wrong on a share of cases, a lenient
# one, a 0-10 scale, labels piled at the scale's edge, a constant judge). Kept on the
# conservative side of the latest run (B differing from A both ways, case by case):
# - per system, 20 (session 21; 15 before): the lenient judge's PPI++ pass rate covered
#   91.0% at 15 in the full run and 92.1% (+-1.0) on 2,000 fresh replicates
#   (small_n_coverage.lenient15-recheck.txt), its PPI++ mean 91.8% at 10; the rule reads 20.
#   Under it `estimate` also withholds a system's PPI++ interval (ppi.withhold, and
#   "worth N labels"); the labels' own kept 93% at 10 and 15, and are shown.
# - per pair, 20: no paired cell covered under 94.0% at any n (the rule alone would allow
#   10); 20 is kept because a direction from a difference also rests on both systems'
#   figures (each needing 20), and the earlier simulation (B never below A) covered 90.0%
#   at 15.
# Active sheets have their own floor for an interval at all
# (:data:`evaluator.analysis.estimate.ppi.ACTIVE_MIN_LABELS`).
MIN_LABELS_ESTIMATE = 20
# The judge's bias (judge - label on the labelled cases, Student t) on a random sheet: its
# interval is withheld under this many labels (evaluator.analysis.estimate.ppi.withhold).
# A lenient judge's differences are a few large ones among many zeros, a skew the t interval
# does not survive at 20: 92.0% (+-0.8) in 3,000 draws (benchmarks/bias_interval.py), 92.3%
# in 2,000 (small_n_coverage.n20-60-recheck.txt); at 30, 93.3-93.8%. Neither Johnson's
# (1978) skewness-corrected t (93.3% at 20, 92.0% at 15) nor the bootstrap-t (94.4% there,
# but 92.7% for the decent judge at 30 and 83-90% in `edge`) kept every scenario in 93-97%
# (docs/statistics.md, "Few labels").
MIN_LABELS_BIAS = 30
MIN_LABELS_DIFFERENCE = 20

POWER = 0.8
Z_POWER = 0.8416212335729143  # norm.ppf(0.8): the new interval clears 0 in 80% of draws
# Settling the sign with POWER chance: the new CI's half-width must be |d| * Z95 / (Z95 +
# Z_POWER), so the standard error (and the half-width) must shrink by this factor more
# than for the half-width just to reach |d|.
POWER_FACTOR = (Z95 + Z_POWER) / Z95
LABEL_MORE_METHOD = (
    "N = n * (1.43 * CI half-width / |difference|)^2 - n, rounded up: the standard error "
    "shrinks as 1/sqrt(labelled cases), and 1.43 = (1.96 + 0.84) / 1.96 makes the new 95% "
    "CI clear 0 in 80% of draws if the true difference is the one seen; with few labels "
    "the interval's own quantile (t, not 1.96) makes N an overestimate")
PAIRED_LINE = ("Each difference is estimated on the cases labelled for both systems (paired "
               "PPI++ on per-case differences), so it need not equal the gap between the two "
               "values above.")
# The report's Decision box: plain words (its page 1 names no method), and the systems'
# values come after the differences there.
PAIRED_LINE_PLAIN = ("Each difference is estimated case by case on the cases labelled for both "
                     "systems, so it need not equal the gap between the two systems' values "
                     "below.")


def too_few(k: int | None, m: int) -> str | None:
    """"too few labels to decide: k labelled, at least m needed" when ``k`` labelled cases
    are under the minimum ``m``; None when they are enough (or unknown: None)."""
    if k is None or k >= m:
        return None
    return f"too few labels to decide: {k} labelled, at least {m} needed"


@dataclass(frozen=True)
class LabelMore:
    """How many more labelled cases would settle a sign: ``more`` (None: no feasible
    number, ``text`` says why) and the sentence ``text``."""

    more: int | None
    text: str


def more_needed(n: int, estimate: float, ci: Sequence[float]) -> float:
    """The additional labelled cases (unrounded; ``inf`` for an estimate of 0) after which
    the 95% CI of a difference estimated at ``estimate`` from ``n`` cases with interval
    ``ci`` would clear 0 with :data:`POWER` chance, at the spread seen: the standard error
    shrinks as 1/sqrt(n), so the new total is n * (POWER_FACTOR * half-width / |d|)^2."""
    half = (ci[1] - ci[0]) / 2
    if estimate == 0:
        return math.inf
    return n * (POWER_FACTOR * half / abs(estimate)) ** 2 - n


def label_more(n: int, estimate: float | None, ci: Sequence[float] | None, left: int,
               *, unit: str = "cases", tiny: float = 5e-4) -> LabelMore | None:
    """:func:`more_needed` for a difference from ``n`` labelled cases whose 95% CI holds 0,
    as a :class:`LabelMore`; None when there is nothing to settle (no estimate, no interval,
    an interval that excludes 0, or no label). ``left``: the unlabelled cases there are to
    label; a number above it (or an estimate within ``tiny`` of 0) is no feasible number.
    ``unit`` names what is labelled ("cases (per system, paired)")."""
    if estimate is None or not ci or n <= 0 or not (ci[0] <= 0 <= ci[1]):
        return None
    if abs(estimate) < tiny:
        return LabelMore(None, "no number of labels can be expected to settle the sign: the "
                               "difference seen is 0")
    need = more_needed(n, estimate, ci)
    more = max(1, math.ceil(need - 1e-9))
    if left <= 0:
        return LabelMore(None, "every case is labelled: the sign stays unsettled (the "
                               "difference is within what chance gives at this size)")
    if more > left:
        return LabelMore(None, f"labelling every case left ({left} more) would not be "
                               "expected to settle the sign at the difference and spread seen "
                               f"(it would take about {more} more)")
    return LabelMore(more, f"label about {more} more {unit} to settle the sign, with 80% "
                           "chance if the difference and spread stay as seen")
