"""Confidence intervals for agreement statistics, each one naming the method that made it.

* :func:`paired_bootstrap` - a seeded BCa bootstrap over case pairs
  (``scipy.stats.bootstrap(paired=True, method="BCa")``). A resample where the statistic is
  undefined (a constant column: no correlation, no kappa) is **counted**, never silently
  dropped. Up to :data:`UNDEFINED_SHARE_LIMIT` of the resamples may be undefined: the
  interval is then the percentile interval of the defined ones (BCa cannot be computed with
  holes in the distribution) and says how many were left out. Above that share the dropped
  resamples bias the interval (away from zero for a correlation), so the result is marked
  unreliable and carries no interval: callers use a method that stays valid instead.
* :func:`fisher_z_ci` - the Fisher-z interval of a rank correlation with the Bonett-Wright
  (2000) standard error for Spearman's rho and the Fieller-Hartley-Pearson (1957) one for
  Kendall's tau-b: valid whatever the resamples do, for n > 3 (tau: n > 4); with the
  two-sided p-value of the same Wald statistic, so the two agree about 0 by construction.
* :func:`weighted_bootstrap` - the same over (judge, label, weight) triples resampled
  together: for a design-weighted statistic (labels drawn with inclusion probabilities pi,
  weights 1/pi), so each resample keeps every drawn case's own weight.
* :func:`wilson_ci` - the Wilson interval of a proportion (``scipy.stats.binomtest``): for
  exact and within-one agreement, which are shares of case pairs.
* :func:`kish_wilson_ci` - the Wilson interval of a design-weighted share, on Kish's
  effective sample size n_eff = (sum w)^2 / sum w^2 (:func:`kish_n_eff`).
* :func:`effective_wilson_ci` - the Wilson interval of a proportion estimated with a
  standard error other than the binomial one (a weighted or prediction-powered estimate),
  on its effective sample size (``statsmodels.stats.proportion.proportion_confint``, which
  takes a count and a size that are not whole numbers).
* :func:`tango_ci` - Tango's score interval of a paired difference of two proportions
  (matched 0/1 pairs), from its discordant pairs.
* :func:`welch_diff_ci` - the Welch t interval of a difference of two means
  (``scipy.stats.ttest_ind(equal_var=False)``).
* :func:`t_quantile` / :func:`t_p_value` - Student t's 97.5% quantile and two-sided p-value on
  ``df`` degrees of freedom (the normal ones where ``df`` is None): the small-sample
  intervals of the clinician-level estimates (docs/statistics.md, "Small samples").
* :func:`interval_or_reason` - the rule every figure follows: **a point is not a 95% CI**.
  An interval whose ends are equal (one value, every value the same, a statistic the data
  fix) is refused, with the reason, wherever it comes from (a formula, a bootstrap).

scipy, numpy and statsmodels are imported inside the functions (the ``stats`` extra).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

CONFIDENCE = 0.95
# Undefined bootstrap resamples tolerated before an interval is called unreliable: 1%.
UNDEFINED_SHARE_LIMIT = 0.01
Z95 = 1.959963984540054  # scipy.stats.norm.ppf(0.975), spelled out to stay import-free
# Fieller, Hartley & Pearson (1957): var(atanh(tau)) ~ 0.437 / (n - 4).
_KENDALL_VARIANCE = 0.437


def t_quantile(df: float | None) -> float:
    """Student t's 97.5% quantile on ``df`` degrees of freedom (``scipy.stats.t.ppf``): the
    multiplier of a standard error for a two-sided 95% interval; :data:`Z95` where ``df``
    is None or infinite (the normal limit, which t approaches as df grows). ``df`` need not
    be whole (Welch-Satterthwaite). NaN for ``df`` <= 0: no interval."""
    if df is None or math.isinf(df):
        return Z95
    if not df > 0:
        return math.nan
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import t

    return float(t.ppf(0.5 + CONFIDENCE / 2, df))


def t_p_value(statistic: float, df: float | None) -> float:
    """Two-sided p-value of ``statistic`` (estimate / se) on Student t with ``df`` degrees of
    freedom, the normal one where ``df`` is None: the test the :func:`t_quantile` interval
    inverts, so p < 0.05 exactly when the interval excludes 0."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import norm, t

    if df is None or math.isinf(df):
        return float(2 * norm.sf(abs(statistic)))
    return float(2 * t.sf(abs(statistic), df))


def clean(value: float | None) -> float | None:
    """A finite float (negative zero made 0.0, so "-0.000" is never printed), else None."""
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value):
        return None
    return 0.0 if value == 0 else value


NO_INTERVAL = "no interval"
# When two ends are "equal": within float rounding, not bit for bit. A rank correlation of
# identical columns comes out of scipy as 0.9999999999999998 on some resamples and 1.0 on
# others, and an inverse-probability-weighted mean as 0.9999999999999999: sums of n terms
# carry about n * 2.2e-16 of rounding, under 1e-12 for any n this tool sees. The figures
# are correlations, shares, means on a rubric scale and log-odds, of order 1, so an
# absolute 1e-12 (or 1e-9 of the value, for a large mean) is far below any real 95% CI's
# width, which shrinks as 1/sqrt(n) and is still ~1e-4 at n = 10^8.
POINT_ABS_TOL = 1e-12
POINT_REL_TOL = 1e-9


def interval_or_reason(ci: Sequence[float | None] | None,
                       why: str) -> tuple[list[float] | None, str | None]:
    """``(ci, None)`` for an interval with width; ``(None, "no interval: <why>")`` for one
    whose two ends are equal. Such a "[v, v]" is what a normal interval with a standard
    error of 0, or a bootstrap whose every resample gives the same value, returns when the
    data have no variation (one value, every value the same): it claims certainty that n
    cases cannot give, so no figure shows it as a 95% CI. ``why`` says what the data were
    ("all 12 scores equal"). No interval (None) stays None, with no reason added."""
    if not ci or ci[0] is None or ci[1] is None:
        return None, None
    low, high = float(ci[0]), float(ci[1])
    if math.isclose(low, high, rel_tol=POINT_REL_TOL, abs_tol=POINT_ABS_TOL):
        return None, f"{NO_INTERVAL}: {why}"
    return [low, high], None


def _interval(low: float | None, high: float | None) -> list[float] | None:
    low, high = clean(low), clean(high)
    return None if low is None or high is None else [low, high]


def paired_bootstrap(x: Any, y: Any, statistic: Callable[[Any, Any], float | None], *,
                     resamples: int, seed: int) -> dict[str, Any]:
    """A seeded bootstrap 95% CI of ``statistic(x, y)`` over case pairs.

    Returns ``ci95`` (None when unreliable or impossible), ``method``, ``resamples``,
    ``undefined`` (resamples where the statistic was undefined) and ``reliable``."""
    return _bootstrap((x, y), statistic, resamples=resamples, seed=seed, name="bootstrap")


def weighted_bootstrap(x: Any, y: Any, weights: Any,
                       statistic: Callable[[Any, Any, Any], float | None], *,
                       resamples: int, seed: int) -> dict[str, Any]:
    """:func:`paired_bootstrap` of a design-weighted ``statistic(x, y, weights)``: the
    (judge, label, weight) triples are resampled together, so a resample is a sample of
    drawn cases, each with its own 1/pi (the usual with-replacement bootstrap of a weighted
    estimator; it ignores the finite-population correction, so it errs wide when much of
    the run was drawn). Same return value; the method says "weighted bootstrap"."""
    return _bootstrap((x, y, weights), statistic, resamples=resamples, seed=seed,
                      name="weighted bootstrap")


def _bootstrap(samples: Sequence[Any], statistic: Callable[..., float | None], *,
               resamples: int, seed: int, name: str) -> dict[str, Any]:
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np
    from scipy.stats import bootstrap

    def stat(*arrays: Any) -> float:
        value = statistic(*arrays)
        return math.nan if value is None or not math.isfinite(value) else float(value)

    with warnings.catch_warnings():
        # scipy warns when BCa cannot be computed (NaNs, a degenerate jackknife): that case
        # is handled below, from the same bootstrap distribution.
        warnings.simplefilter("ignore")
        result = bootstrap(tuple(np.asarray(a, float) for a in samples), stat, paired=True,
                           vectorized=False, n_resamples=resamples, method="BCa",
                           confidence_level=CONFIDENCE, rng=np.random.default_rng(seed))
    distribution = np.asarray(result.bootstrap_distribution, dtype=float)
    undefined = int(np.count_nonzero(~np.isfinite(distribution)))
    out: dict[str, Any] = {"resamples": resamples, "undefined": undefined, "reliable": True}
    share = undefined / resamples
    if share > UNDEFINED_SHARE_LIMIT:
        out.update(ci95=None, reliable=False,
                   method=(f"{name}: unreliable, {undefined} of {resamples} resamples "
                           f"undefined (more than {UNDEFINED_SHARE_LIMIT:.0%})"))
        return out
    if undefined == 0:
        low, high = result.confidence_interval
        ci = _interval(low, high)
        if ci is not None:
            out.update(ci95=ci, method=f"{name} BCa, {resamples} resamples")
            return _no_point(out)
        # BCa needs a non-degenerate jackknife; the percentile interval does not.
        why = "BCa not computable"
    else:
        why = f"{undefined} of {resamples} resamples undefined, left out"
    finite = distribution[np.isfinite(distribution)]
    low, high = np.percentile(finite, [2.5, 97.5])
    out.update(ci95=_interval(low, high), method=f"{name} percentile ({why})")
    return _no_point(out)


def _no_point(out: dict[str, Any]) -> dict[str, Any]:
    """A bootstrap result under :func:`interval_or_reason`: when every resample gave the
    same value, no interval, and the method says why."""
    ci, reason = interval_or_reason(out["ci95"], "every resample gave the same value")
    if reason:
        out.update(ci95=ci, method=f"{out['method']}; {reason}")
    return out


def fisher_z_ci(r: float | None, n: int, kind: str) -> dict[str, Any]:
    """Fisher-z 95% CI of a rank correlation and the two-sided p-value against 0 of the same
    Wald statistic: ``kind`` "spearman" uses the Bonett-Wright standard error
    se = sqrt((1 + r^2/2) / (n - 3)), "kendall" the Fieller-Hartley-Pearson
    sqrt(0.437 / (n - 4)); the CI is tanh(atanh(r) +- 1.96 se), ``p`` is
    2 (1 - Phi(|atanh(r)| / se)).

    One statistic gives both, so p < 0.05 exactly when the CI excludes 0: tanh is
    increasing with tanh(0) = 0, so the CI excludes 0 exactly when |atanh(r)| > 1.96 se.
    (scipy's ``spearmanr`` p-value is a t approximation under independence; beside this CI
    it said p 0.047 next to [-0.576, 0.004].) The test is the interval's own: inverting
    it gives the interval back, and a t test of independence cannot be inverted into an
    interval for rho != 0. Under independence it holds its level (simulated with
    continuous and 1-5 scores: 1.9-5.3% rejected at 5% for n = 5-150; the t
    approximation rejected 8.1% at n = 5). References: Bonett, D. G. & Wright, T. A.
    (2000), Sample size requirements for estimating Pearson, Kendall and Spearman
    correlations, Psychometrika 65(1), 23-28; Fieller, E. C., Hartley, H. O. & Pearson,
    E. S. (1957), Tests for rank correlation coefficients I, Biometrika 44, 470-481.

    No interval and no p-value for an undefined r, too few cases, or |r| = 1 (a point, and
    an infinite statistic); ``method`` says why."""
    minimum = 4 if kind == "spearman" else 5
    name = ("Fisher z, Bonett-Wright SE" if kind == "spearman"
            else "Fisher z, Fieller-Hartley-Pearson SE")
    if r is None or n < minimum:
        return {"ci95": None, "p": None, "method": f"{name} (needs n >= {minimum})"}
    if abs(r) >= 1 or math.isclose(abs(r), 1, rel_tol=0, abs_tol=POINT_ABS_TOL):
        # atanh(+-1) is infinite: the interval is the point r itself. scipy gives
        # 0.9999999999999998 for a perfect ranking, whose interval is a point too.
        ci, why = interval_or_reason([r, r], "|r| = 1, a perfect ranking")
        return {"ci95": ci, "p": None, "method": f"{name}; {why}"}
    if kind == "spearman":
        se = math.sqrt((1 + r * r / 2) / (n - 3))
    else:
        se = math.sqrt(_KENDALL_VARIANCE / (n - 4))
    z = math.atanh(r)
    # For |r| next to 1, tanh gives both ends within rounding of 1: a point too.
    ci, why = interval_or_reason(_interval(math.tanh(z - Z95 * se), math.tanh(z + Z95 * se)),
                                 "|r| within rounding of 1")
    if why:
        return {"ci95": None, "p": None, "method": f"{name}; {why}"}
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import norm

    return {"ci95": ci, "p": clean(2 * norm.sf(abs(z) / se)), "method": name}


def wilson_ci(successes: int, n: int) -> dict[str, Any]:
    """Wilson 95% CI of ``successes`` / ``n`` (``scipy.stats.binomtest``)."""
    if n == 0:
        return {"ci95": None, "method": "Wilson"}
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import binomtest

    ci = binomtest(successes, n).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return {"ci95": _interval(ci.low, ci.high), "method": "Wilson"}


def kish_n_eff(weights: Sequence[float]) -> float:
    """Kish's effective sample size (sum w)^2 / sum w^2 of design weights: n for equal
    weights, less the more they differ (0 for none)."""
    total = math.fsum(weights)
    squares = math.fsum(w * w for w in weights)
    return total * total / squares if squares > 0 else 0.0


def kish_wilson_ci(share: float, n_eff: float) -> dict[str, Any]:
    """Wilson 95% CI of a design-weighted ``share`` with Kish effective sample size
    ``n_eff``: :func:`wilson_ci` (``scipy.stats.binomtest``) of round(share * m) successes
    of m = round(n_eff) trials (at least 1). Kish's n_eff charges the unequal weights'
    variance, not how the weights go with the outcome: an approximation, said in the
    method."""
    trials = max(1, round(n_eff))
    interval = wilson_ci(round(share * trials), trials)
    return {"ci95": interval["ci95"], "method": f"Wilson, Kish n_eff {n_eff:.1f}",
            "n_eff": n_eff}


def effective_wilson_ci(share: float, n_eff: float) -> list[float] | None:
    """Wilson 95% CI of ``share`` (in [0, 1]) as if it were a binomial proportion from
    ``n_eff`` trials, neither rounded (``statsmodels.stats.proportion.proportion_confint``,
    method "wilson"): for an estimate whose variance is not the binomial one, ``n_eff`` =
    the outcome's variance / se^2, the binomial trials that would give its standard error
    (Kott & Carr 1997; Korn & Graubard 1998). Always within [0, 1], never a point for
    ``n_eff`` > 0; None without one."""
    if not n_eff > 0 or not math.isfinite(n_eff) or not 0 <= share <= 1:
        return None
    # Imported here: the stats extra, which `import evaluator` never loads.
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(share * n_eff, n_eff, alpha=1 - CONFIDENCE, method="wilson")
    return _interval(max(0.0, float(low)), min(1.0, float(high)))


def tango_ci(x: float, y: float, n: float, quantile: float = Z95) -> dict[str, Any]:
    """Tango's (1998) score 95% CI of a paired difference of two proportions, p_B - p_A,
    from ``n`` pairs of which ``x`` passed B only and ``y`` passed A only (the discordant
    pairs; counts need not be whole, for an effective n). The interval is every Delta whose
    score statistic (x - y - n Delta) / sqrt(n (2 p21 + Delta (1 - Delta))), with p21 the
    constrained maximum-likelihood estimate of P(A only) given Delta, is within
    ``quantile`` of 0: always in [-1, 1], never a point, and an interval even where every
    pair agrees (x = y = 0: +-z^2 / (n + z^2)); Newcombe (1998) found it and his hybrid
    score interval the two best of ten for matched pairs, and Tango's the one that keeps
    its level where discordant pairs are few. ``p``: the same score test at Delta = 0
    (McNemar's, (x - y) / sqrt(x + y)), so p < 0.05 exactly when the interval excludes 0.
    References: Tango, T. (1998), Equivalence test and confidence interval for the
    difference in proportions for the paired-sample design, Statistics in Medicine 17,
    891-908; Newcombe, R. G. (1998), Improved confidence intervals for the difference
    between binomial proportions based on paired data, Statistics in Medicine 17,
    2635-2650."""
    if not n > 0 or x < 0 or y < 0 or x + y > n * (1 + 1e-9):
        return {"ci95": None, "p": None, "method": "Tango score"}
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.optimize import brentq
    from scipy.stats import norm

    def score(delta: float) -> float:
        b = -x - y + (2 * n - x + y) * delta
        c = -y * delta * (1 - delta)
        p21 = (math.sqrt(max(b * b - 8 * n * c, 0.0)) - b) / (4 * n)
        gap = x - y - n * delta
        variance = n * (2 * p21 + delta * (1 - delta))
        if gap == 0:
            return 0.0
        return gap / math.sqrt(variance) if variance > 0 else math.copysign(math.inf, gap)

    edge = 1e-12
    centre = min(1 - edge, max(-1 + edge, (x - y) / n))
    # The statistic falls as Delta rises: each end is where it crosses +-quantile.
    low = (-1.0 if score(-1 + edge) <= quantile else
           brentq(lambda d: score(d) - quantile, -1 + edge, centre, xtol=1e-12)
           if score(centre) < quantile else centre)
    high = (1.0 if score(1 - edge) >= -quantile else
            brentq(lambda d: score(d) + quantile, centre, 1 - edge, xtol=1e-12)
            if score(centre) > -quantile else centre)
    p = 1.0 if x + y == 0 else clean(2 * norm.sf(abs(x - y) / math.sqrt(x + y)))
    return {"ci95": _interval(low, high), "p": p, "method": "Tango score"}


def welch_diff_ci(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """mean(a) - mean(b) with its Welch t 95% CI (``scipy.stats.ttest_ind``); the interval
    is None with fewer than two values on a side, and when both sides are constant (a
    point: :func:`interval_or_reason`); ``method`` says why."""
    if not a or not b:
        return {"difference": None, "ci95": None, "method": "Welch t"}
    difference = clean(sum(a) / len(a) - sum(b) / len(b))
    if len(a) < 2 or len(b) < 2:
        return {"difference": difference, "ci95": None,
                "method": "Welch t (needs two cases per group)"}
    if min(a) == max(a) and min(b) == max(b):
        ci, why = interval_or_reason([difference, difference],
                                     "every value the same within each group")
        return {"difference": difference, "ci95": ci, "method": f"Welch t; {why}"}
    # Imported here: the stats extra, which `import evaluator` never loads.
    from scipy.stats import ttest_ind

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = ttest_ind(a, b, equal_var=False)
        ci = result.confidence_interval(confidence_level=CONFIDENCE)
    interval, why = interval_or_reason(_interval(ci.low, ci.high),
                                       "the groups' values differ by less than rounding")
    return {"difference": difference, "ci95": interval, "p": clean(result.pvalue),
            "method": f"Welch t; {why}" if why else "Welch t"}


def format_number(value: float | None, digits: int = 3) -> str:
    """``value`` with ``digits`` decimals, "-" for None; never "-0.000" (a negative number
    that rounds to zero prints as zero)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def format_p(p: float | None) -> str:
    """A p-value as every output shows it: two significant digits, ``<1e-4`` below 1e-4
    (a smaller p is not worth more digits; ``0.000`` would read as impossible), "-" for
    none."""
    if p is None or (isinstance(p, float) and not math.isfinite(p)):
        return "-"
    return "<1e-4" if p < 1e-4 else f"{p:.2g}"


def format_ci(ci: Sequence[float | None] | None, digits: int = 3) -> str:
    """``[low, high]`` with :func:`format_number`, "-" for no interval."""
    if not ci or ci[0] is None or ci[1] is None:
        return "-"
    return f"[{format_number(ci[0], digits)}, {format_number(ci[1], digits)}]"
