"""A paired difference of two pass rates (system B - A on the same labelled cases): PPI++ on
the per-case differences, with Tango's score interval in place of the t interval.

A per-case difference of two 0/1 outcomes is -1, 0 or 1, mostly 0 when the systems agree: the
t interval on such differences gave no interval where every labelled pair agreed (up to half
the draws at 10-30 labels) and 99-100% coverage where some did not, then 89-93% at 60
(benchmarks/small_n_coverage.py). A matched-pairs score interval keeps its level where
discordant pairs are few and is an interval even where there are none (Tango 1998; Newcombe
1998 compared ten; :func:`~evaluator.analysis.intervals.tango_ci`).

:func:`rate_bias`: the judge's bias in a pass rate, judge - label on the labelled cases, is
such a paired difference too (the judge's and the clinician's outcome on one case): Tango's
interval on the cases the judge passed and the label did not, and the other way.

:func:`paired_rate_difference`: the labels' own Tango interval from their discordant pairs
(x pairs passed by B only, y by A only, of n) where PPI++'s lambda is 0 or its estimate is
worth fewer labels than there are; else PPI++'s estimate theta and standard error se on
Tango's interval over an effective sample: n_eff = (q - theta^2) / se^2 pairs, q the labels'
share of discordant pairs (per-case variance of a difference of 0/1 outcomes: q - theta^2),
df-adjusted as a rate's (Korn & Graubard 1998: n_eff (z / t_df)^2), with x' - y' = n_eff
theta and x' + y' = n_eff q: the score interval recentred on PPI++'s estimate and scaled to its
standard error, as :func:`~evaluator.analysis.estimate.ppi.bounded_rate` does for one rate
with Wilson's. numpy and scipy are imported inside the functions (the ``stats`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluator.analysis.estimate import ppi
from evaluator.analysis.intervals import tango_ci

# A tuned lambda below this is float noise of the fit (1e-33 where the labels are constant).
LAMBDA_NOISE = 1e-12


def _labels_alone(x: int, y: int, n: int, population: int, why: str) -> ppi.Estimate:
    """Tango's interval on the labels' own discordant pairs."""
    result = tango_ci(x, y, n)
    estimate = (x - y) / n
    se = ((x + y) / n - estimate ** 2) ** 0.5 / n ** 0.5
    return ppi.Estimate(estimate, se, result["ci95"], result["p"],
                        f"labels only ({why}): Tango score interval on {x} + {y} discordant "
                        f"of {n} pairs", 0.0, n, population, float(n))


def paired_rate_difference(d: Sequence[float], g: Sequence[float],
                           g_unlabelled: Sequence[float]) -> ppi.Estimate:
    """B - A of a pass rate on the n cases labelled for both: ``d`` the labels' per-case
    differences (-1, 0 or 1), ``g`` the judge's on those cases (its 0/1 differences, or of its
    probabilities of passing), ``g_unlabelled`` on the others. See the module docstring; the
    estimate is PPI++'s (:func:`ppi.ppi_mean` on the differences, equal to ppi_py's) where
    PPI++ is kept, the labels' mean difference where not. ``p`` is the same score test at 0,
    so p < 0.05 exactly when the interval excludes 0. No label: no estimate."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    diffs = np.asarray(d, dtype=float)
    if not np.isin(diffs, (-1.0, 0.0, 1.0)).all():
        raise ValueError("a paired pass-rate difference's labels are -1, 0 or 1")
    n, population = len(diffs), len(g_unlabelled)
    if n == 0:
        return ppi.Estimate(None, None, None, None, "no case labelled for both", n=0,
                            population=population)
    x, y = int((diffs > 0).sum()), int((diffs < 0).sum())
    point = ppi.ppi_mean(diffs, g, g_unlabelled)
    lam = float(point.lam or 0.0)
    if population == 0 or lam < LAMBDA_NOISE or x + y == 0 or not point.se:
        why = "; ".join(reason for reason, holds in (
            ("every case labelled", population == 0),
            ("every labelled pair agrees", x + y == 0)) if holds) or "PPI++ lambda 0"
        return _labels_alone(x, y, n, population, why)
    theta = min(1.0, max(-1.0, float(point.estimate)))
    share = max((x + y) / n, abs(theta))
    n_eff = ppi.df_adjusted_n_eff((share - theta ** 2) / point.se ** 2, point.df)
    if not n_eff >= n:  # the judge is worth fewer labels than there are: they stand alone
        return _labels_alone(x, y, n, population,
                             "PPI++ worth fewer labels than there are")
    result = tango_ci(n_eff * (share + theta) / 2, n_eff * (share - theta) / 2, n_eff)
    return ppi.Estimate(theta, point.se, result["ci95"], result["p"],
                        f"PPI++ on per-case differences (lambda tuned), Tango score interval "
                        f"on n_eff {n_eff:.1f}", lam, n, population, n_eff, point.df)


def rate_bias(judge: Sequence[float], labels: Sequence[float]) -> ppi.Estimate | None:
    """The judge's bias in a pass rate on the n labelled cases, mean(judge - label), with
    Tango's score interval on its discordant cases (x the judge passed and the label did
    not, y the other way): a matched-pairs difference of two proportions, where the t
    interval on -1/0/1 differences gave none when they all agreed and a poor one when few
    did (see the module docstring). None where the judge's values are not 0/1 (its
    probabilities of passing, ``--score expected``): the caller keeps the t interval."""
    # Imported here: the stats extra, which `import evaluator` never loads.
    import numpy as np

    f, y = np.asarray(judge, dtype=float), np.asarray(labels, dtype=float)
    if not len(y) or not np.isin(f, (0.0, 1.0)).all() or not np.isin(y, (0.0, 1.0)).all():
        return None
    n = len(y)
    x, z = int(((f == 1) & (y == 0)).sum()), int(((f == 0) & (y == 1)).sum())
    result = tango_ci(x, z, n)
    estimate = (x - z) / n
    se = ((x + z) / n - estimate ** 2) ** 0.5 / n ** 0.5
    return ppi.Estimate(estimate, se, result["ci95"], result["p"],
                        f"judge - label on the labelled cases: Tango score interval on {x} + "
                        f"{z} discordant of {n}", None, n, 0, float(n))
