"""Clinician-level means from a judge's scores on every case and clinicians' labels on a few:
prediction-powered inference (PPI++), its active (inverse-probability-weighted) form, and the
classical and judge-only figures beside it. Pure functions on arrays.

Notation: N cases with the judge's score f_i on each; labels Y_i on the n labelled ones.

* :func:`classical_mean` - the labels alone: mean(Y) with the CLT interval (what
  ``ppi_py.classical_mean_ci`` computes: standard deviation with ddof 0).
* :func:`ppi_mean` - PPI++ for a simple random sample of labels (Angelopoulos, Duchi & Zrnic
  2023): theta = lambda * mean_U(f) + mean_n(Y - lambda * f) over the n labelled and the
  N - n unlabelled cases U, standard error sqrt(var(lambda f)/(N - n) + var(Y - lambda f)/n);
  lambda tuned to minimise the variance, cov_n(Y, f) / ((1 + n/(N - n)) var(f)), clipped to
  [0, 1] (lambda = 0: labels only; 1: plain PPI). Equal to ``ppi_py.ppi_mean_pointestimate``
  / ``ppi_mean_ci`` given the same arrays.
* :func:`ipw_mean` - active inference (Zrnic & Candes 2024): case i labelled with known
  probability pi_i (independently), xi_i = 1 when it was; per case, with the prediction
  g_i = lambda f_i + m, z_i = g_i + (xi_i / pi_i)(Y_i - g_i), theta = mean(z), standard
  error sd(z)/sqrt(N) (ddof 1). Unbiased for any fixed lambda and m; both are tuned to
  minimise var(z) (a least-squares fit: the difference estimator of model-assisted survey
  sampling), lambda clipped to [0, 1], by 2-fold cross-fitting (each half of the cases gets
  the lambda and m fitted on the other half). lambda = 0 with m tuned is the labels' weighted
  (Hajek-type) mean; lambda = m = 0 the Horvitz-Thompson mean.
* :func:`independent_difference` - two estimates from independent labels: the difference,
  sqrt(se_a^2 + se_b^2), a normal p-value. A paired difference is the estimator itself
  applied to per-case differences (label B - label A, judge B - judge A).

Pass rates (0/1 outcomes: a ``--pass`` gate) keep their CIs in [0, 1]:

* :func:`classical_rate` - the labels' share with the Wilson interval (scipy's
  ``binomtest``), where the normal one went below 0 with few labels or a rare outcome.
* :func:`ppi_rate` - PPI++ as :func:`ppi_mean` (the same estimate and lambda), its standard
  error with half a pseudo-case in each (label, judge) cell (Agresti & Min 2005), so that a
  judge that agreed with every labelled case does not get an SE of about 0.
* :func:`bounded_rate` - any estimate of a rate (PPI++, active, judge only) clipped to
  [0, 1], with the Wilson interval on its effective sample size p (1 - p) / se^2 at the
  estimate p (Korn & Graubard 1998; :func:`rate_n_eff`).

Each CI of a mean is a normal 95% interval; each p-value two-sided against 0. Valid
whatever the judge's quality (a bad judge only widens the interval); they assume the labels
are the clinicians' truth and the cases exchangeable (docs/statistics.md). numpy, scipy and
statsmodels are imported inside the functions (the ``stats`` extra).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluator.analysis.intervals import (
    Z95,
    effective_wilson_ci,
    interval_or_reason,
    t_p_value,
    t_quantile,
    wilson_ci,
)


@dataclass
class Estimate:
    """A mean with its standard error, 95% CI and two-sided p-value against 0; ``lam`` the
    power-tuning weight (None where there is none); ``method`` names the estimator;
    ``n_eff`` the effective sample size a pass rate's Wilson interval is on (else None)."""

    estimate: float | None
    se: float | None
    ci95: list[float] | None
    p: float | None
    method: str
    lam: float | None = None
    n: int = 0
    population: int = 0
    n_eff: float | None = None
    df: float | None = None


def _finite(value: float) -> float | None:
    value = float(value)
    return (0.0 if value == 0 else value) if math.isfinite(value) else None


def normal_estimate(estimate: float, se: float, method: str, *, lam: float | None = None,
                    n: int = 0, population: int = 0, df: float | None = None) -> Estimate:
    """``estimate`` with its 95% CI and two-sided p-value: Student t on ``df`` degrees of
    freedom (:func:`~evaluator.analysis.intervals.t_quantile`), the normal interval where
    ``df`` is None (the judge over every case). A standard error of 0 (one label, or every
    label the same and the judge given no weight) gives no CI and no p-value: a point is
    not a 95% interval, whatever the formula says
    (:func:`evaluator.analysis.intervals.interval_or_reason`, the rule every figure
    follows); nor does ``df`` <= 0 (one label)."""
    est, se_ = _finite(estimate), _finite(se)
    if est is None or se_ is None:
        return Estimate(None, None, None, None, method, lam, n, population, df=df)
    if df is not None and not df > 0:
        return Estimate(est, se_, None, None, f"{method}; no interval: no variation in the data (one label, or every "
                        "value the same)", lam, n,
                        population, df=df)
    q = t_quantile(df)
    ci, why = interval_or_reason([est - q * se_, est + q * se_],
                                 "no variation in the data (one label, or every value the same)")
    if why:
        return Estimate(est, se_, None, None, f"{method}; {why}", lam, n, population, df=df)
    p = t_p_value(est / se_, df)
    return Estimate(est, se_, ci, _finite(p), method, lam, n, population, df=df)


def satterthwaite_df(parts: Sequence[tuple[float, float | None]]) -> float | None:
    """Welch-Satterthwaite degrees of freedom of a variance that is a sum of independent
    parts, each (variance, its df): (sum v)^2 / sum v^2 / df (Satterthwaite 1946; Welch
    1947). A part with df None (normal: infinite) adds nothing to the denominator; all
    None, or all variance 0: None. Never more than the parts' df summed, never less than
    the smallest: a part known from 9 labels keeps the whole near t_9 when it dominates."""
    finite = [(v, d) for v, d in parts if d is not None and v > 0]
    if any(d <= 0 for _, d in finite):  # a part from one label: no df, no interval
        return 0.0
    total = sum(v for v, _ in parts if v > 0)
    if not finite or not total > 0:
        return None
    denominator = sum(v * v / d for v, d in finite)
    return total * total / denominator if denominator > 0 else None


def classical_mean(y: Sequence[float]) -> Estimate:
    """The labels' mean with Student's t 95% CI: sd with ddof 1, n - 1 degrees of freedom
    (exact for normal labels; ppi_py's classical CI is the normal one with ddof 0, which it
    approaches as n grows). One label: no interval."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    values = np.asarray(y, dtype=float)
    n = len(values)
    if n == 0:
        return Estimate(None, None, None, None, "labels only: no labels")
    se = float(values.std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    return normal_estimate(float(values.mean()), se, f"labels only: mean, t interval (df {n - 1})",
                           n=n, population=n, df=n - 1)


def tuned_lambda(y: Sequence[float], yhat: Sequence[float], yhat_all: Sequence[float]) -> float:
    """PPI++'s power-tuning weight for a mean (ppi_py's ``_calc_lam_glm`` with clip):
    (1/n) sum (g - mean g)(h - mean h) / ((1 + n/N) var(h over labelled and all)), g, h the
    labels' and the judge's residuals about the lambda = 1 estimate; clipped to [0, 1]; 0
    when the judge is constant (it carries no information)."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    y_, f, f_all = (np.asarray(a, dtype=float) for a in (y, yhat, yhat_all))
    n, big_n = len(y_), len(f_all)
    judged = np.concatenate([f, f_all])
    if not len(judged) or judged.min() == judged.max():
        # A constant judge: tested on its scores themselves, since their residuals' variance
        # is rounding noise (about 1e-32), and the ratio below of two such noises is any
        # lambda in [0, 1] (it gave 1.0 on one run and 0.02 on another).
        return 0.0
    point = f_all.mean() + (y_ - f).mean()
    g, h, h_all = y_ - point, f - point, f_all - point
    covariance = float(((g - g.mean()) * (h - h.mean())).sum()) / n
    variance = float(np.var(np.concatenate([h, h_all]), ddof=1))
    if not variance > 0:
        return 0.0
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


# Degrees of freedom the tuned lambda costs the rectifier's variance (a fitted slope).
RECTIFIER_TUNED_DF_LOSS = 1

EVERY_LABELLED = "every case labelled: the labels' mean, lambda 0"


# Up to how many labels the tuned lambda's jackknife is computed (n refits of lambda): above
# it the plug-in variance's neglect of lambda's own error is O(1/n) and the loop not worth it.
JACKKNIFE_MAX_LABELS = 1000


def tuned_jackknife_variance(y: Any, f: Any, f_unlabelled: Any) -> float:
    """The delete-one jackknife variance of PPI++'s estimate over the labelled cases, lambda
    re-tuned without each (Quenouille 1956; Tukey 1958): (n - 1)/n sum (theta_(i) -
    mean theta_(.))^2, the unlabelled cases held fixed. It counts what the plug-in
    var(Y - lambda f)/n leaves out, that lambda was tuned on the same few labels: where the
    labels pile at one end of the scale and the few away from it decide lambda, the tuned
    estimate's spread was 10% above the plug-in SE and it covered 89-92% at 10-60 labels
    (benchmarks/small_n_coverage.py, ``edge``). In expectation the jackknife variance errs
    large, not small (Efron & Stein 1981, The jackknife estimate of variance, Annals of
    Statistics 9, 586-596); :func:`ppi_mean` takes the larger of the two."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    n = len(y)
    mean_u = float(np.mean(f_unlabelled))
    keep = ~np.eye(n, dtype=bool)
    thetas = np.empty(n)
    for i in range(n):
        y_i, f_i = y[keep[i]], f[keep[i]]
        lam = tuned_lambda(y_i, f_i, f_unlabelled)
        thetas[i] = lam * mean_u + float((y_i - lam * f_i).mean())
    return float((n - 1) / n * ((thetas - thetas.mean()) ** 2).sum())


def ppi_mean(y: Sequence[float], yhat: Sequence[float], yhat_unlabelled: Sequence[float],
             lam: float | None = None) -> Estimate:
    """PPI++ mean for labels ``y`` on a simple random sample of the cases, ``yhat`` the
    judge on those cases and ``yhat_unlabelled`` on the others (never the labelled ones
    again: the variance formula takes the two sets as independent, and counting the
    labelled cases in both undercovers when n is a large share of N); ``lam`` None: tuned,
    and the rectifier's variance is the larger of the plug-in and the jackknife's with
    lambda re-tuned (:func:`tuned_jackknife_variance`; up to :data:`JACKKNIFE_MAX_LABELS`
    labels). No unlabelled case: the labels' own mean."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    y_, f, f_all = (np.asarray(a, dtype=float) for a in (y, yhat, yhat_unlabelled))
    n, big_n = len(y_), len(f_all)
    if n == 0:
        return Estimate(None, None, None, None, "PPI++: no labels", n=n, population=big_n)
    if big_n == 0:
        every = classical_mean(y_)
        # Both facts: the labels stand alone, and (where there is none) why no interval;
        # the text report shows a method from its "no interval" on.
        _, cut, why = every.method.partition("; no interval")
        every.method = EVERY_LABELLED + (f"; no interval{why}; {EVERY_LABELLED}" if cut else "")
        every.lam = 0.0
        return every
    weight = tuned_lambda(y_, f, f_all) if lam is None else float(lam)
    estimate = float((weight * f_all).mean() + (y_ - weight * f).mean())
    # Each part's variance with its own degrees of freedom, and Welch-Satterthwaite's df for
    # their sum: the rectifier's, from the n labels, loses one more where lambda was tuned
    # on them (a fitted slope, as a regression estimator's residual variance: Cochran 1977,
    # 7.3); the judge's over the N - n others, N - n - 1.
    fitted = 1 + (RECTIFIER_TUNED_DF_LOSS if lam is None and weight > 0 else 0)
    rectifier_df = n - fitted
    rectifier = (float((y_ - weight * f).var(ddof=fitted)) / n if rectifier_df > 0
                 else float((y_ - weight * f).var()) / n)
    if lam is None and weight > 0 and 2 < n <= JACKKNIFE_MAX_LABELS:
        rectifier = max(rectifier, tuned_jackknife_variance(y_, f, f_all))
    unlabelled = float((weight * f_all).var(ddof=1)) / big_n if big_n > 1 else 0.0
    df = satterthwaite_df([(rectifier, float(rectifier_df)),
                           (unlabelled, float(big_n - 1) if big_n > 1 else None)])
    if rectifier_df <= 0:
        df = 0.0
    elif df is None:
        df = float(rectifier_df)
    se = math.sqrt(rectifier + unlabelled)
    method = ("PPI++ (lambda tuned" if lam is None else f"PPI (lambda = {weight:g}") + (
        f"; t interval, df {df:.0f})" if df >= 1 else ")")
    return normal_estimate(estimate, se, method, lam=weight, n=n, population=big_n, df=df)


# Agresti & Min (2005, "Simple improved confidence intervals for comparing matched
# proportions"): half a case added to each cell of the paired 2 x 2 table keeps the
# variance of a matched-pairs difference away from 0 when few pairs disagree. PPI's
# correction, mean(label - lambda judge), is such a difference for a 0/1 outcome.
PSEUDO_CELL = 0.5


def _rate_labels(y: Any) -> Any:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    values = np.asarray(y, dtype=float)
    if not np.isin(values, (0.0, 1.0)).all():
        raise ValueError("a pass rate's labels are 0 or 1")
    return values


def classical_rate(y: Sequence[float]) -> Estimate:
    """The labels' pass rate (``y`` 0/1) with the Wilson 95% CI (``scipy.stats.binomtest``;
    always in [0, 1], never a point); ``se`` the CLT one, as :func:`classical_mean`."""
    values = _rate_labels(y)
    estimate = classical_mean(values)
    if estimate.estimate is None:
        return estimate
    ci = wilson_ci(int(values.sum()), len(values))["ci95"]
    return Estimate(estimate.estimate, estimate.se, ci, estimate.p,
                    "labels only: Wilson interval", None, estimate.n, estimate.population,
                    float(len(values)))


def _snapped(value: float) -> float:
    """A rate within 1e-12 of 0 or 1 is that bound: float noise of the estimators (a lambda
    of 1e-33 where it is 0), not a figure."""
    return 0.0 if value < 1e-12 else 1.0 if value > 1 - 1e-12 else value


# Half a case: how far from 0 and 1 the rate in Korn & Graubard's effective n is kept (see
# :func:`rate_n_eff`), as the half pseudo-case above keeps PPI's SE away from 0.
EDGE_CASES = 0.5


def rate_n_eff(rate: float, se: float, fallback_n: float, steps: float = 1.0) -> float:
    """Korn & Graubard's (1998) effective sample size of an estimated rate: n_eff =
    p (1 - p) / se^2, the binomial trials whose standard error at the estimate p is ``se``.
    It is the estimate's own variance that scales the interval: Wilson's interval on it,
    centred on p, is then about as wide as +-1.96 se. At p = 0 or 1 (a clipped estimate)
    p (1 - p) is 0 and so would n_eff be, an interval of all of [0, 1]; SAS's SURVEYFREQ uses
    the sample size there instead, which jumps from a tiny n_eff near the edge to n at it.
    Here p is kept half a case from the edge, p in [0.5/m, 1 - 0.5/m] with m =
    ``fallback_n`` (the labels' number; Kish's n_eff of their weights on an active sheet):
    n_eff is continuous in p, and at the edge it is what half a pass in m cases would give
    with this SE. An SE of 0 (every label and judgement the same): ``fallback_n``.
    ``steps``: the points of a case's value per unit of the rate (1 for a pass; a mean on a
    scale mapped to [0, 1], the scale's span: one case one point from the top moves a mean
    of m labels 1/(m span) from it), so the edge is half a point of one case, EDGE_CASES /
    (m steps): kept at half a *case* of the unit, a mean of 4.9 from ten labels on 1-5 (nine
    5s and a 4) was read as 4.8 in p (1 - p), which doubled n_eff and gave [4.58, 4.98],
    missing a truth of 4.579 in 11% of draws (benchmarks/small_n_coverage.py, ``edge``, 10
    labels: 86.4%)."""
    m = float(fallback_n)
    if not se > 0 or not math.isfinite(se) or not m > 0:
        return m
    edge = min(0.5, EDGE_CASES / (m * max(1.0, float(steps))))
    p = min(1.0 - edge, max(edge, rate))
    return p * (1.0 - p) / se ** 2


WITHHELD_MARK = "needed for a 95% interval"
# A random sheet's (or a plain labels file's) fewest labels for a system's PPI++ interval and
# for the judge's bias's (the values: evaluator.analysis.minimum.MIN_LABELS_ESTIMATE and
# MIN_LABELS_BIAS). Under them the lenient judge's covered 91.0-92.3%
# (benchmarks/small_n_coverage.py, bias_interval.py); the labels' own intervals kept 93% and
# are shown.
PPI_TOO_FEW = ("no interval: {n} labelled, at least {minimum} " + WITHHELD_MARK
               + " of this system's PPI++ figure (its labels' own interval is shown)")
BIAS_TOO_FEW = ("no interval: {n} labelled, at least {minimum} " + WITHHELD_MARK
                + " of the judge's bias")


def withheld(estimate: Estimate) -> bool:
    """``estimate``'s interval was withheld for too few labels (:data:`ACTIVE_TOO_FEW`,
    :data:`PPI_TOO_FEW`, :data:`BIAS_TOO_FEW`): no later step may give it one back."""
    return WITHHELD_MARK in estimate.method


# What a method says of the interval it no longer has: dropped from a withheld figure's.
_INTERVAL_WORDS = re.compile(r"; t interval, df [\d.]+|; Wilson on n_eff [^;]*|, t interval$")


def withhold(estimate: Estimate, reason: str) -> Estimate:
    """``estimate`` with its CI and p-value withheld, ``reason`` (:data:`PPI_TOO_FEW` or
    :data:`BIAS_TOO_FEW`, formatted) in its method in place of the interval's words; the
    estimate and its SE kept (a figure, no interval). An estimate with no value or no
    interval (withheld already, or none for its own reason, which it keeps): unchanged."""
    if estimate.estimate is None or estimate.ci95 is None:
        return estimate
    method = _INTERVAL_WORDS.sub("", estimate.method.split("; no interval")[0])
    return Estimate(estimate.estimate, estimate.se, None, None, f"{method}; {reason}",
                    estimate.lam, estimate.n, estimate.population, None, estimate.df)


def df_adjusted_n_eff(n_eff: float, df: float | None) -> float:
    """Korn & Graubard's (1998) degrees-of-freedom adjusted effective sample size, n_eff
    (z_0.975 / t_0.975,df)^2: the Wilson interval on it is as much wider than Wilson's on
    n_eff as a t interval on ``df`` is wider than the normal one, so a rate estimated from
    few labels keeps the small-sample allowance its mean would get. ``df`` None: unchanged."""
    if df is None or not df > 0 or not math.isfinite(n_eff):
        return n_eff
    return n_eff * (Z95 / t_quantile(df)) ** 2


def bounded_rate(estimate: Estimate, fallback_n: float,
                 label_variance: float | None = None, steps: float = 1.0) -> Estimate:
    """``estimate`` of a pass rate (a mean of 0/1 outcomes, or of probabilities) with its
    95% CI in [0, 1]: the estimate clipped to [0, 1], and the Wilson interval on its
    effective sample size (:func:`rate_n_eff`: p (1 - p) / se^2 at the estimate p, Korn &
    Graubard 1998; :func:`~evaluator.analysis.intervals.effective_wilson_ci`). A binomial
    interval for an estimate whose variance is not the binomial one, as for
    design-weighted proportions (Kott & Carr 1997). ``fallback_n``: the labels' number
    (Kish's n_eff of their weights on an active sheet; the cases', for the judge only),
    used where the SE is 0 and to keep p half a case from 0 and 1. ``label_variance`` given
    (an active sheet: the labels' weighted variance), n_eff is the smaller of that and
    ``label_variance`` / se^2, the scale used before: on an active sheet with a good judge
    and a rare pass rate, Korn & Graubard's alone covered 89.5-92.9% in simulation, the
    smaller one 90.4-94.3% (docs/statistics.md). ``steps``: :func:`rate_n_eff`'s (a mean on
    a scale: its span). The standard error is kept as it is."""
    if estimate.estimate is None or estimate.se is None or withheld(estimate):
        return estimate
    rate = _snapped(min(1.0, max(0.0, estimate.estimate)))
    se = estimate.se
    n_eff = rate_n_eff(rate, se, fallback_n, steps)
    if (label_variance is not None and label_variance > 0 and math.isfinite(label_variance)
            and se > 0):
        n_eff = min(n_eff, label_variance / se ** 2)
    n_eff = df_adjusted_n_eff(n_eff, estimate.df)
    ci = effective_wilson_ci(rate, n_eff)
    ci = None if ci is None else [_snapped(ci[0]), _snapped(ci[1])]
    method = estimate.method.split("; no interval")[0]
    return Estimate(rate, se, ci, estimate.p, f"{method}; Wilson on n_eff {n_eff:.1f}",
                    estimate.lam, estimate.n, estimate.population, n_eff, estimate.df)


def bounded_mean(estimate: Estimate, low: float, high: float, fallback_n: float) -> Estimate:
    """``estimate`` of a mean on a bounded scale [``low``, ``high``] (a rubric's 1-5, 0-10)
    with the CI of :func:`bounded_rate` on the scale mapped to [0, 1]: Wilson's interval on
    the estimate's (df-adjusted) effective sample size, mapped back. Where the labels pile
    up at an end of the scale the symmetric t interval misses on the side away from the
    edge (a sample of few labels mostly lacks the rare ones away from it: its mean sits
    too near the edge and its SE is too small); Wilson's interval leans away from the edge
    by the binomial variance's bound p (1 - p), and near the middle it is about the t
    interval (docs/statistics.md, "Small samples"). The estimate, its SE, df and p-value are
    unchanged; ``fallback_n`` as :func:`bounded_rate`'s. (Its ``label_variance`` cap is for
    0/1 outcomes, whose variance is p (1 - p); a score's is far below that bound, and the
    cap would widen the interval twofold.) The estimate is kept half a scale point of one
    label from the scale's ends (:func:`rate_n_eff` with ``steps`` the span), not half a
    label: a mean of ten labels can be 0.1 from the top. A scale of no width: unchanged."""
    span = float(high) - float(low)
    # No interval stays none (one label; every label the same: the rules every figure
    # follows, and a score at the top of 1-4 is not a pass to give Wilson's interval to).
    if (estimate.estimate is None or estimate.se is None or not span > 0
            or estimate.ci95 is None):
        return estimate
    unit = Estimate((estimate.estimate - low) / span, estimate.se / span, None, estimate.p,
                    estimate.method, estimate.lam, estimate.n, estimate.population,
                    estimate.n_eff, estimate.df)
    rate = bounded_rate(unit, fallback_n, steps=span)
    if rate.ci95 is None:
        return estimate
    ci = [low + span * rate.ci95[0], high - span * (1 - rate.ci95[1])]
    return Estimate(estimate.estimate, estimate.se, ci, estimate.p,
                    f"{estimate.method.split('; no interval')[0]}; Wilson on n_eff "
                    f"{rate.n_eff:.1f} over the scale {low:g}-{high:g}", estimate.lam,
                    estimate.n, estimate.population, rate.n_eff, estimate.df)


def ppi_rate(y: Sequence[float], yhat: Sequence[float],
             yhat_unlabelled: Sequence[float]) -> Estimate:
    """PPI++ of a pass rate on a simple random sample: ``y`` the labels' 0/1 outcomes,
    ``yhat`` the judge's (0/1, or its probability of passing) on the labelled cases,
    ``yhat_unlabelled`` on the others. The estimate and lambda are :func:`ppi_mean`'s (and
    so ppi_py's); the standard error sqrt(var(lambda f_U)/(N - n) + var(r)/n) takes var(r)
    over the labelled residuals r = label - lambda judge and half a pseudo-case in each
    cell of (label 0 or 1) x (judge at its lowest or highest value) (:data:`PSEUDO_CELL`):
    otherwise a judge that happened to agree with every labelled case gets an SE of about
    0 however few the labels. The CI is :func:`bounded_rate`'s: Wilson's on the estimate's
    own effective n, p (1 - p) / se^2 (fallback: the labels' number). Where the judge is
    worth fewer labels than there are (var(labels) / se^2 below n: its SE is larger than
    the labels' own; a judge that adds only noise), or where the tuned lambda is 0, lambda
    is 0 and the labels stand alone (:func:`classical_rate`), as PPI++'s lambda is meant to
    make them. Where PPI++ is kept, its interval is about as wide as the labels' own at
    most, not never wider: Wilson's width depends on where the estimate is, and PPI++'s
    can be nearer 0.5 than the labels' share. Every case labelled: :func:`classical_rate`
    with lambda 0."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    y_ = _rate_labels(y)
    f, f_u = (np.asarray(a, dtype=float) for a in (yhat, yhat_unlabelled))
    n, big_n = len(y_), len(f_u)
    if n == 0:
        return ppi_mean(y_, f, f_u)
    if big_n == 0:  # the labels stand alone: lambda 0, as ppi_mean says
        every = classical_rate(y_)
        every.method, every.lam = f"{EVERY_LABELLED}, Wilson interval", 0.0
        return every
    point = ppi_mean(y_, f, f_u)
    lam = float(point.lam or 0.0)
    low, high = float(min(f.min(), f_u.min())), float(max(f.max(), f_u.max()))
    residual = np.concatenate([y_ - lam * f,
                               np.array([0.0, 0.0, 1.0, 1.0]) - lam * np.array([low, high,
                                                                              low, high])])
    weight = np.concatenate([np.ones(n), np.full(4, PSEUDO_CELL)])
    centre = float((weight * residual).sum() / weight.sum())
    variance = float((weight * (residual - centre) ** 2).sum() / weight.sum())
    unlabelled = float((lam * f_u).std()) ** 2 / big_n
    se = math.sqrt(unlabelled + variance / n)
    df = satterthwaite_df([(variance / n, float(max(1, n - 1 - RECTIFIER_TUNED_DF_LOSS))),
                           (unlabelled, float(big_n - 1) if big_n > 1 else None)])
    # The judge's worth in labels: how many labels alone give this SE. lambda 0 (every
    # label the same gives it: no covariance) is the labels' mean, and so their interval.
    # Its worth counts the small-sample allowance (Korn & Graubard's df adjustment): the
    # labels' Wilson interval needs none, so PPI++ is kept only where it is narrower after it.
    if lam > 0 and df_adjusted_n_eff(labelled_variance(y_) / se ** 2, df) >= n:
        return bounded_rate(
            normal_estimate(float(point.estimate), se, "PPI++ (lambda tuned; SE with half a "
                            "pseudo-case per (label, judge) cell)", lam=lam, n=n,
                            population=big_n, df=df), n)
    alone = classical_rate(y_)
    alone.method = ("PPI++ with lambda 0: the judge is worth fewer labels than there are, so "
                    "the labels' own Wilson interval")
    alone.lam, alone.population = 0.0, big_n
    return alone


def rate_difference(estimate: Estimate, span: float = 1.0) -> Estimate:
    """A difference of two pass rates (judge - label, system B - A) kept within [-1, 1],
    where such a difference lies (``span``: of two means on a scale from lo to hi, within
    [-(hi - lo), hi - lo]): its interval's ends (and the estimate, which a PPI++ correction
    can push past) clipped to it, and the method saying so where they were. Clipping to
    where the truth must lie cannot make the interval miss it, so the coverage is the
    unclipped interval's; a score interval for a paired difference (Newcombe 1998) would
    also be narrower at the edge, but a judge's probability of passing and PPI++'s
    per-case differences are not the 0/1 pairs it is for."""
    if estimate.estimate is None:
        return estimate
    value = min(span, max(-span, estimate.estimate))
    ci = estimate.ci95
    clipped = value != estimate.estimate
    if ci is not None:
        low, high = max(-span, ci[0]), min(span, ci[1])
        clipped = clipped or [low, high] != list(ci)
        ci = [low, high]
    method = estimate.method + (f"; clipped to [{-span:g}, {span:g}]" if clipped else "")
    return Estimate(value, estimate.se, ci, estimate.p, method, estimate.lam, estimate.n,
                    estimate.population, estimate.n_eff, estimate.df)


def _ipw_terms(f_all: Any, labels: Any, pi: Any) -> tuple[Any, Any, Any]:
    """A_i = xi_i Y_i / pi_i, B_i = f_i (1 - xi_i / pi_i) and C_i = 1 - xi_i / pi_i: the
    per-case term with prediction lambda f + m is z = A + lambda B + m C."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    labelled = ~np.isnan(labels)
    ratio = np.where(labelled, 1.0 / pi, 0.0)
    a = np.where(labelled, np.nan_to_num(labels) * ratio, 0.0)
    c = 1.0 - ratio
    return a, f_all * c, c


def _tuned_ipw(a: Any, b: Any, c: Any, lam: float | None) -> tuple[float, float]:
    """(lambda, m) minimising the sample variance of A + lambda B + m C: a least-squares
    fit of -A on (B, C) after centring, lambda clipped to [0, 1]; with ``lam`` given, only
    m is fitted."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    def centred(v: Any) -> Any:
        return v - v.mean()

    ac, bc, cc = centred(a), centred(b), centred(c)
    if lam is None:
        design = np.column_stack([bc, cc])
        if np.linalg.matrix_rank(design) == 2:
            (fitted, _), *_ = np.linalg.lstsq(design, -ac, rcond=None)
            lam = float(np.clip(fitted, 0.0, 1.0))
        else:
            lam = 0.0
    rest = ac + lam * bc
    m = float(-(rest * cc).sum() / (cc * cc).sum()) if (cc * cc).sum() > 0 else 0.0
    return float(lam), m


CROSS_FIT_FOLDS = 2
# An active sheet's fewest labels for a 95% interval (benchmarks/small_n_coverage.py:
# below it the inverse-probability-weighted intervals covered 78-92% on judges whose
# uncertainty does not track their errors).
ACTIVE_MIN_LABELS = 30
ACTIVE_TOO_FEW = ("no interval: {n} labels on an active sheet, at least {minimum} needed for "
                  "a 95% interval (below it a random sheet's are valid)")
# Degrees of freedom the tuned (lambda, offset) cost an active estimate's variance.
IPW_TUNED_DF_LOSS = 0
CROSS_FIT_SEED = 0


def _cross_fitted(a: Any, b: Any, c: Any, lam: float | None = None) -> tuple[Any, float]:
    """z with lambda and m tuned by cross-fitting: the cases split in two folds (a fixed
    seed: the same data give the same estimate), each fold's z with the (lambda, m) fitted on
    the other. Tuning on the cases it is applied to makes sd(z) too small when few cases are
    labelled; cross-fitting keeps z's terms independent of their own tuning (coverage:
    benchmarks/ppi_coverage.py). ``lam`` given: only m is fitted. The lambda shown is
    the folds' mean."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    size = len(a)
    fold = np.empty(size, dtype=int)
    fold[np.random.default_rng(CROSS_FIT_SEED).permutation(size)] = (
        np.arange(size) % CROSS_FIT_FOLDS)
    z = np.empty(size)
    weights = []
    for k in range(CROSS_FIT_FOLDS):
        train, test = fold != k, fold == k
        fold_lam, m = _tuned_ipw(a[train], b[train], c[train], lam)
        z[test] = a[test] + fold_lam * b[test] + m * c[test]
        weights.append(fold_lam)
    return z, float(np.mean(weights))


def ipw_mean(f_all: Sequence[float], labels: Sequence[float | None],
             pi: Sequence[float], lam: float | None = None,
             offset: float | None = None) -> Estimate:
    """Active-inference mean over N cases: ``f_all`` the judge on each, ``labels`` the label
    or None where the case was not labelled, ``pi`` each case's probability of having been
    labelled (every case's, labelled or not). The prediction is lambda f + m: ``lam`` and
    ``offset`` None are tuned (the best linear predictor of the labels from the judge, as in
    model-assisted survey estimation; a constant offset changes nothing for a simple random
    sample, but inverse-probability weights would otherwise pay for the judge's bias).
    ``lam=0`` with the offset tuned: the labels alone, weighted (a Hajek-type mean);
    ``lam=0, offset=0``: the Horvitz-Thompson mean."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    f = np.asarray(f_all, dtype=float)
    y = np.asarray([math.nan if v is None else v for v in labels], dtype=float)
    p = np.asarray(pi, dtype=float)
    big_n, n = len(f), int(np.count_nonzero(~np.isnan(y)))
    if big_n < 2 or n == 0:
        return Estimate(None, None, None, None, "active: too few cases", n=n,
                        population=big_n)
    if np.any(~(p > 0)) or np.any(p > 1):
        raise ValueError("inclusion probabilities must be in (0, 1]")
    a, b, c = _ipw_terms(f, y, p)
    if offset is None:
        z, weight = _cross_fitted(a, b, c, lam)
    else:
        weight, shift = _tuned_ipw(a, b, c, lam)
        if offset is not None:
            shift = float(offset)
        z = a + weight * b + shift * c
    if weight == 0:
        method = ("labels only: Horvitz-Thompson mean" if offset is not None else
                  "labels only: inverse-probability weighted mean")
    else:
        method = ("active PPI++ (inverse-probability weighted, lambda and offset tuned "
                  "by 2-fold cross-fitting)"
                  if lam is None else
                  f"active PPI (inverse-probability weighted, lambda = {weight:g})")
    # Student t on the labelled count: z's spread comes from the n labelled terms (the
    # others are the judge's prediction alone), as a design-based variance has the number
    # of sampled units less the parameters fitted as its df (Korn & Graubard 1999, 5.2).
    df = float(n - 1 - (IPW_TUNED_DF_LOSS if weight > 0 or offset is None else 0))
    if n < ACTIVE_MIN_LABELS:
        # Below it no df rule kept 93-97% (benchmarks/small_n_coverage.py): a handful of
        # 1/pi-weighted labels is too skewed a sum for any t; a random sheet is.
        figure = normal_estimate(float(z.mean()), float(z.std(ddof=1)) / math.sqrt(big_n),
                                 method, lam=weight, n=n, population=big_n, df=df)
        figure.ci95, figure.p = None, None
        figure.method = f"{method}; {ACTIVE_TOO_FEW.format(n=n, minimum=ACTIVE_MIN_LABELS)}"
        return figure
    return normal_estimate(float(z.mean()), float(z.std(ddof=1)) / math.sqrt(big_n),
                           method, lam=weight, n=n, population=big_n, df=df)


def judge_mean(f_all: Sequence[float]) -> Estimate:
    """The judge's mean over all N cases with its CLT CI: the judge-only figure, which says
    nothing of the judge's own bias."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    f = np.asarray(f_all, dtype=float)
    if len(f) == 0:
        return Estimate(None, None, None, None, "judge only: no cases")
    return normal_estimate(float(f.mean()), float(f.std(ddof=1)) / math.sqrt(len(f))
                           if len(f) > 1 else 0.0, "judge only: mean over all cases",
                           n=0, population=len(f))


def labelled_variance(labels: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """The labels' variance (ddof 0), weighted by ``weights`` (1/pi: the population's
    variance under a design) when given."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    y = np.asarray(labels, dtype=float)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    if len(y) == 0 or not w.sum() > 0:
        return math.nan
    mean = float((w * y).sum() / w.sum())
    return float((w * (y - mean) ** 2).sum() / w.sum())


def effective_labels(label_variance: float, estimate: Estimate) -> float | None:
    """How many labels of a simple random sample, used alone, give the CI of ``estimate``:
    var(labels) / se^2 (for a random design, n x var(labels only) / var(PPI))."""
    if estimate.se is None or not math.isfinite(label_variance):
        return None
    if estimate.se == 0:
        return None
    return _finite(label_variance / estimate.se ** 2)


def _df_of(estimate: Estimate) -> float | None:
    """An estimate's df; where only its labelled count is known (an estimate rebuilt from a
    row), that count less two, the df of a PPI++ mean with lambda tuned (the smaller)."""
    if estimate.df is not None:
        return estimate.df
    return float(estimate.n - 2) if estimate.n > 2 else None


def independent_difference(a: Estimate, b: Estimate) -> Estimate:
    """b - a for estimates from independent labels: se sqrt(se_a^2 + se_b^2). Where either
    side's interval was withheld for too few labels (an active sheet under
    :data:`ACTIVE_MIN_LABELS`: :func:`withheld`), the difference's is too, with the reason:
    two such sheets' difference covered 87.7-92.4% below 30 labels
    (benchmarks/small_n_coverage.py)."""
    if a.estimate is None or b.estimate is None or a.se is None or b.se is None:
        return Estimate(None, None, None, None, "independent difference: an estimate is missing")
    if withheld(a) or withheld(b):
        side = min((e for e in (a, b) if withheld(e)), key=lambda e: e.n)
        # The side's reason, less what it says of that side alone ("its labels' own
        # interval is shown"): no labels-only difference is shown.
        reason = re.sub(r" \([^()]*\)$", "", side.method[side.method.index("no interval: "):])
        return Estimate(b.estimate - a.estimate, math.sqrt(a.se ** 2 + b.se ** 2), None, None,
                        f"independent: {reason} on a side", n=min(a.n, b.n),
                        population=min(a.population, b.population))
    df = satterthwaite_df([(a.se ** 2, _df_of(a)), (b.se ** 2, _df_of(b))])
    return normal_estimate(b.estimate - a.estimate, math.sqrt(a.se ** 2 + b.se ** 2),
                           "independent: se = sqrt(se_A^2 + se_B^2)"
                           + (f", t on Welch-Satterthwaite df {df:.0f}" if df else ""),
                           n=min(a.n, b.n), population=min(a.population, b.population), df=df)
