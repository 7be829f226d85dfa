"""The ceiling: how far clinicians agree with each other on the cases several of them
labelled (the *overlap* cases), beside how far the judge agrees with them on the same cases,
and the difference with a 95% CI paired over cases.

On the overlap cases of one criterion, each case rated by two or more labellers:

* clinician vs clinician - quadratic-weighted kappa, Spearman, exact and within-one
  agreement, each the mean over the pairs of labellers of the pair's figure on the cases
  both rated; Krippendorff's alpha (ordinal) over all the labellers at once (a missing rating
  allowed);
* judge vs clinicians - the mean over labellers k of the same figure for (judge, labeller
  k) on the cases k rated (alpha too: alpha of the judge with labeller k);
* the difference, judge vs clinicians minus clinician vs clinician (negative: the judge
  agrees with a clinician less than clinicians agree with each other).

Every figure is computed from counts: a pair's confusion matrix (kappa, Spearman from the
mid-ranks of its margins, the agreement shares) and Krippendorff's coincidence matrix. Each
case adds its own counts, so a bootstrap resample (cases drawn with replacement) is one
matrix product, and the three figures of a statistic come from the same resampled cases:
the difference's CI is paired. The 95% CIs are BCa (:func:`scipy.stats.bootstrap`, the
jackknife over cases), seeded; a statistic undefined on more than
:data:`~evaluator.analysis.intervals.UNDEFINED_SHARE_LIMIT` of the resamples gets no CI,
one undefined on fewer a percentile interval of the rest (as every bootstrap of ``agree``).
docs/statistics.md ("The ceiling") has the formulas and the simulated coverage.

Kappa's weights are the squared differences of the scale's values (scikit-learn's
``weights="quadratic"`` given the scale as ``labels``); alpha is Krippendorff's ordinal
alpha (the ``krippendorff`` package). Both are checked against those libraries in
tests/test_ceiling_stats.py.

numpy and scipy are imported inside the functions (the ``stats`` extra).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from evaluator.analysis.agreement.records import Ceiling, CeilingFigure, CeilingStatistic
from evaluator.analysis.intervals import CONFIDENCE, UNDEFINED_SHARE_LIMIT, clean

CEILING_RESAMPLES = 1000
CEILING_SEED = 20141
# (key, name in the text): the statistics of the ceiling, in the order printed.
CEILING_STATISTICS = (("kappa_quadratic", "kappa (quadratic)"), ("spearman", "Spearman"),
                      ("exact", "exact agreement"), ("within_one", "within-one agreement"),
                      ("krippendorff_alpha_ordinal", "Krippendorff alpha (ordinal)"))
SIDES = ("clinicians", "judge", "difference")
# Below DECISION_FLOOR overlap cases the figures are shown but not read for a decision: in
# simulation the intervals cover 95% from about HONEST_FROM cases (docs/statistics.md), and
# under 30 an interval can span most of kappa's range. Between the two the reading is given
# with a warning.
DECISION_FLOOR = 30
HONEST_FROM = 60
# Kappa's difference whose whole CI lies within +-SAME_MARGIN reads as "about as well";
# one that includes 0 but is wider says only that no difference was detected.
SAME_MARGIN = 0.1
METHOD = "BCa bootstrap over the overlap cases, paired (one resample for all three)"
# Within-one agreement is near 1: a handful of cases more than one point apart decide it,
# and the bootstrap's interval of its difference covered 66-93% in simulation. Its
# difference gets Tukey's jackknife interval instead (pseudo-values over cases, a t
# interval: with one set of labellers on every case, the t interval of the per-case
# differences), which covers 94-96% from MIN_DISAGREEMENTS cases more than one point apart;
# with fewer, none of the three within-one figures gets an interval.
MIN_DISAGREEMENTS = 10
JACKKNIFE_METHOD = "jackknife t (Tukey: pseudo-values over the overlap cases)"


def kappa_from_counts(counts: Any, values: Any) -> Any:
    """Quadratic-weighted Cohen's kappa of confusion matrices ``counts`` (..., K, K) whose
    axes are the scale ``values``; NaN where it is undefined (no expected disagreement)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    v = np.asarray(values, dtype=float)
    weight = (v[:, None] - v[None, :]) ** 2
    total = counts.sum(axis=(-2, -1))
    rows, columns = counts.sum(axis=-1), counts.sum(axis=-2)
    observed = (counts * weight).sum(axis=(-2, -1))
    expected = np.einsum("...i,ij,...j->...", rows, weight, columns)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = 1.0 - observed * total / expected
    return np.where((expected > 0) & (total > 0), kappa, np.nan)


def _midranks(margin: Any) -> Any:
    """The mid-rank of each category given its counts (..., K): ties share their mean rank."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    return np.cumsum(margin, axis=-1) - margin + (margin + 1.0) / 2.0


def spearman_from_counts(counts: Any) -> Any:
    """Spearman's rho (ties: mid-ranks, as :func:`scipy.stats.spearmanr`) of the pairs a
    confusion matrix (..., K, K) counts; NaN where a side is constant."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    total = counts.sum(axis=(-2, -1))
    rows, columns = counts.sum(axis=-1), counts.sum(axis=-2)
    centre = ((total + 1.0) / 2.0)[..., None]
    ra, rb = _midranks(rows) - centre, _midranks(columns) - centre
    covariance = np.einsum("...ij,...i,...j->...", counts, ra, rb)
    variance_a = (rows * ra ** 2).sum(axis=-1)
    variance_b = (columns * rb ** 2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = covariance / np.sqrt(variance_a * variance_b)
    return np.where((variance_a > 0) & (variance_b > 0), rho, np.nan)


def share_from_counts(counts: Any, values: Any, within: float) -> Any:
    """The share of pairs whose values differ by at most ``within`` (0: exact agreement,
    1: within-one) in confusion matrices (..., K, K); NaN for an empty matrix."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    v = np.asarray(values, dtype=float)
    near = np.abs(v[:, None] - v[None, :]) <= within + 1e-9
    total = counts.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        share = (counts * near).sum(axis=(-2, -1)) / total
    return np.where(total > 0, share, np.nan)


def alpha_from_coincidences(coincidences: Any) -> Any:
    """Krippendorff's ordinal alpha of coincidence matrices (..., K, K) (each unit with m
    ratings adds 1/(m - 1) for every ordered pair of its ratings by different raters); NaN
    where there is no expected disagreement."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    n_c = coincidences.sum(axis=-1)
    total = n_c.sum(axis=-1)
    # Ordinal metric: (sum of n_g for g from c to k - (n_c + n_k) / 2) squared.
    cumulative = np.cumsum(n_c, axis=-1)
    lower = cumulative - n_c  # sum of n_g for g < c
    high = np.maximum(cumulative[..., :, None], cumulative[..., None, :])
    low = np.minimum(lower[..., :, None], lower[..., None, :])
    delta = (high - low - (n_c[..., :, None] + n_c[..., None, :]) / 2.0) ** 2
    observed = (coincidences * delta).sum(axis=(-2, -1))
    expected = np.einsum("...i,...ij,...j->...", n_c, delta, n_c)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (total - 1.0) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


class _Tables:
    """Each overlap case's own counts, stacked (n, tables, K, K): one confusion matrix per
    pair of labellers and per (judge, labeller), the coincidences of all the labellers and of
    the judge with each labeller. Summed over a resample's cases they are its matrices."""

    def __init__(self, judge: Sequence[float], ratings: Sequence[Mapping[str, float]],
                 values: Sequence[float]) -> None:
        # Imported here: the stats extra, which `import evaluator` never loads.
        import numpy as np

        self.values = [float(v) for v in values]
        index = {v: i for i, v in enumerate(self.values)}
        k = len(self.values)
        self.labellers = sorted({name for case in ratings for name in case})
        self.pairs = list(itertools.combinations(self.labellers, 2))
        n = len(judge)
        rated = [[index.get(float(case[name])) if name in case else None
                  for name in self.labellers] for case in ratings]
        judged = [index[float(v)] for v in judge]
        # Pairs of labellers, judge with each labeller, all labellers' coincidences, the
        # judge's coincidences with each labeller.
        count = len(self.pairs) + 2 * len(self.labellers) + 1
        tables = np.zeros((n, count, k, k))
        for case, (mine, j) in enumerate(zip(rated, judged, strict=True)):
            for t, (a, b) in enumerate(itertools.combinations(range(len(self.labellers)), 2)):
                if mine[a] is not None and mine[b] is not None:
                    tables[case, t, mine[a], mine[b]] += 1
            base = len(self.pairs)
            for i, value in enumerate(mine):
                if value is not None:
                    tables[case, base + i, j, value] += 1
            present = [value for value in mine if value is not None]
            if len(present) >= 2:
                for a, b in itertools.permutations(range(len(present)), 2):
                    tables[case, base + len(mine), present[a], present[b]] += (
                        1.0 / (len(present) - 1))
            for i, value in enumerate(mine):
                if value is not None:
                    tables[case, base + len(mine) + 1 + i, j, value] += 1
                    tables[case, base + len(mine) + 1 + i, value, j] += 1
        self.tables = tables

    def figures(self, weights: Any) -> Any:
        """Every figure (statistic x side, :data:`CEILING_STATISTICS` x :data:`SIDES`) of
        the resamples ``weights`` (..., n): how often each case is in each resample."""
        # Imported here: the stats extra, which `import evaluator` never loads.
        import numpy as np

        n, count, k, _ = self.tables.shape
        summed = (weights @ self.tables.reshape(n, count * k * k)).reshape(
            *weights.shape[:-1], count, k, k)
        p, m = len(self.pairs), len(self.labellers)
        pairs, judged = summed[..., :p, :, :], summed[..., p:p + m, :, :]
        together, judge_alpha = summed[..., p + m, :, :], summed[..., p + m + 1:, :, :]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a mean over NaNs is NaN
            rows = []
            for key, _ in CEILING_STATISTICS:
                if key == "krippendorff_alpha_ordinal":
                    clinicians = alpha_from_coincidences(together)
                    judge = alpha_from_coincidences(judge_alpha).mean(axis=-1)
                else:
                    clinicians = self._statistic(key, pairs).mean(axis=-1)
                    judge = self._statistic(key, judged).mean(axis=-1)
                rows += [clinicians, judge, judge - clinicians]
        return np.stack(rows)

    def far_cases(self) -> tuple[int, int, int]:
        """How many cases have two clinicians, the judge and a clinician, and either, more
        than one point apart: the cases that move within-one agreement."""
        # Imported here: the stats extra, which `import evaluator` never loads.
        import numpy as np

        v = np.asarray(self.values)
        far = np.abs(v[:, None] - v[None, :]) > 1 + 1e-9
        p, m = len(self.pairs), len(self.labellers)
        apart = (self.tables * far).sum(axis=(-2, -1)) > 0  # (n, tables)
        clinicians, judge = apart[:, :p].any(axis=1), apart[:, p:p + m].any(axis=1)
        return (int(clinicians.sum()), int(judge.sum()), int((clinicians | judge).sum()))

    def _statistic(self, key: str, counts: Any) -> Any:
        if key == "kappa_quadratic":
            return kappa_from_counts(counts, self.values)
        if key == "spearman":
            return spearman_from_counts(counts)
        return share_from_counts(counts, self.values, 0 if key == "exact" else 1)


def _interval(point: float | None, distribution: Any, low: float, high: float,
              resamples: int) -> tuple[list[float] | None, str, int]:
    """One figure's CI from its bootstrap distribution, as ``agree``'s bootstrap gives
    them: BCa; no CI when too many resamples are undefined; else percentile of the rest."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    undefined = int(np.count_nonzero(~np.isfinite(distribution)))
    if point is None:
        return None, "-", undefined
    if undefined / resamples > UNDEFINED_SHARE_LIMIT:
        return None, (f"no interval: {undefined} of {resamples} resamples undefined (more "
                      f"than {UNDEFINED_SHARE_LIMIT:.0%})"), undefined
    if undefined == 0 and np.isfinite(low) and np.isfinite(high):
        ci, method = [float(low), float(high)], "BCa"
    else:
        finite = distribution[np.isfinite(distribution)]
        ci = [float(v) for v in np.percentile(finite, [2.5, 97.5])]
        method = ("percentile (" + (f"{undefined} resample(s) undefined, left out"
                                    if undefined else "BCa not computable") + ")")
    if abs(ci[1] - ci[0]) <= 1e-12:
        return None, "no interval: every resample gave the same value", undefined
    return [clean(ci[0]) or 0.0, clean(ci[1]) or 0.0], method, undefined


def reading(n: int, difference: CeilingFigure) -> str:
    """Kappa's difference (judge minus clinicians) on ``n`` overlap cases read in words:
    too few cases to decide (under :data:`DECISION_FLOOR`); no interval; lower, higher; the
    same within :data:`SAME_MARGIN`; else no difference detected, with the interval said in
    words (a wide interval that includes 0 is not evidence that the two are alike). Between
    :data:`DECISION_FLOOR` and :data:`HONEST_FROM` cases, a warning follows."""
    if n < DECISION_FLOOR:
        return (f"too few overlap cases ({n}) to decide: the figures are shown, but a "
                f"decision needs {DECISION_FLOOR} or more (the intervals are honest from "
                f"about {HONEST_FROM})")
    if difference.ci95 is None:
        return "kappa's difference has no interval: nothing to decide"
    low, high = difference.ci95
    if high < 0:
        text = ("the judge agrees with a clinician less than clinicians agree with each "
                f"other: the judge's kappa is {-high:.2f} to {-low:.2f} lower than the "
                "clinicians'")
    elif low > 0:
        text = ("the judge agrees with a clinician more than clinicians agree with each "
                f"other: the judge's kappa is {low:.2f} to {high:.2f} higher than the "
                "clinicians'")
    elif -SAME_MARGIN <= low and high <= SAME_MARGIN:
        text = ("the judge agrees with a clinician about as well as clinicians agree with "
                f"each other: the judge's kappa is within {SAME_MARGIN:g} of the "
                f"clinicians' (from {-low:.2f} lower to {high:.2f} higher)")
    else:
        text = ("no difference detected: the judge's kappa is anything from "
                f"{-low:.2f} lower to {high:.2f} higher than the clinicians'")
    if n < HONEST_FROM:
        text += (f" (on {n} overlap cases; below about {HONEST_FROM} the intervals may "
                 "cover less than 95%)")
    return text


def _jackknife_t(point: float | None, left_out: Any) -> tuple[list[float] | None, str]:
    """Tukey's jackknife interval of a figure: its pseudo-values n*theta - (n - 1)*theta_-i
    over the cases (``left_out``: the figure without case i), and the 95% t interval of
    their mean (:func:`scipy.stats.ttest_1samp`). For a mean of per-case values the
    pseudo-values are those values."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    from scipy.stats import ttest_1samp

    n = len(left_out)
    if point is None or not np.all(np.isfinite(left_out)):
        return None, "no interval: undefined without some case"
    pseudo = n * point - (n - 1) * np.asarray(left_out, dtype=float)
    if np.ptp(pseudo) <= 1e-12:
        return None, "no interval: every case gives the same value"
    interval = ttest_1samp(pseudo, 0.0).confidence_interval(CONFIDENCE)
    return [clean(float(interval.low)) or 0.0, clean(float(interval.high)) or 0.0], \
        JACKKNIFE_METHOD


def _within_one(tables: _Tables, sides: dict[str, dict[str, Any]], left_out: Any) -> None:
    """Within-one agreement's intervals made honest (:data:`MIN_DISAGREEMENTS`): none
    with too few cases more than one point apart; else the difference's by the jackknife."""
    clinicians, judge, either = tables.far_cases()
    for side, far in (("clinicians", clinicians), ("judge", judge), ("difference", either)):
        if sides[side]["value"] is None:
            continue
        if far < MIN_DISAGREEMENTS:
            sides[side]["ci95"] = None
            sides[side]["ci_method"] = (
                f"no interval: too few disagreements ({far} case(s) more than one point "
                f"apart; an interval needs {MIN_DISAGREEMENTS})")
        elif side == "difference":
            sides[side]["ci95"], sides[side]["ci_method"] = _jackknife_t(
                sides[side]["value"], left_out)


def ceiling(criterion: str, judge: Sequence[float], ratings: Sequence[Mapping[str, float]],
            *, scale: Sequence[float], resamples: int = CEILING_RESAMPLES,
            seed: int = CEILING_SEED) -> Ceiling:
    """The ceiling of ``criterion`` on its overlap cases: per case the judge's score
    (``judge``) and the labellers' labels (``ratings``: labeller -> label, two or more per
    case), on ``scale`` (the criterion's values; a value outside it is added). Each
    statistic of :data:`CEILING_STATISTICS`, clinician vs clinician, judge vs clinicians and
    their difference, with 95% BCa CIs from ``resamples`` case resamples (seeded)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    from scipy.stats import bootstrap

    values = sorted({float(v) for v in scale} | {float(v) for v in judge}
                    | {float(v) for case in ratings for v in case.values()})
    tables = _Tables(judge, ratings, values)
    n = len(judge)
    point = tables.figures(np.ones(n))

    def statistic(index: Any, axis: int = -1) -> Any:
        index = np.asarray(index, dtype=np.int64)
        batch = index.reshape(-1, index.shape[-1])
        flat = (batch + n * np.arange(len(batch))[:, None]).ravel()
        weights = np.bincount(flat, minlength=len(batch) * n).reshape(len(batch), n)
        return tables.figures(weights.astype(float)).reshape(-1, *index.shape[:-1])

    with warnings.catch_warnings():
        # scipy warns when BCa cannot be computed (NaNs, a degenerate jackknife): handled in
        # _interval, from the same bootstrap distribution.
        warnings.simplefilter("ignore")
        result = bootstrap((np.arange(n),), statistic, vectorized=True, method="BCa",
                           n_resamples=resamples, confidence_level=CONFIDENCE,
                           rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    statistics: dict[str, CeilingStatistic] = {}
    for s, (key, _) in enumerate(CEILING_STATISTICS):
        sides: dict[str, Any] = {}
        for offset, side in enumerate(SIDES):
            row = 3 * s + offset
            value = clean(point[row])
            ci, method, undefined = _interval(value, result.bootstrap_distribution[row],
                                              low[row], high[row], resamples)
            sides[side] = {"value": value, "ci95": ci, "ci_method": method,
                           "undefined": undefined}
        if key == "within_one":
            # The difference's row without each case in turn: the jackknife's.
            left_out = tables.figures(np.ones((n, n)) - np.eye(n))[3 * s + 2]
            _within_one(tables, sides, left_out)
        statistics[key] = CeilingStatistic(**sides)
    return Ceiling(criterion=criterion, n=n, labellers=tables.labellers,
                   pairs=len(tables.pairs),
                   ratings=sum(len(case) for case in ratings), resamples=resamples,
                   seed=seed, method=METHOD, statistics=statistics,
                   reading=reading(n, statistics["kappa_quadratic"].difference))
