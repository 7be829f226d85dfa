"""Issue 47: a paired pass-rate difference gets Tango's score interval (a known case, and an
interval where every labelled pair agrees), and two active sheets' independent difference is
withheld where either side's interval is."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="needs the stats extra")

from evaluator.analysis.estimate import ppi
from evaluator.analysis.estimate.paired_rate import paired_rate_difference, rate_bias
from evaluator.analysis.intervals import Z95, tango_ci

ROOT = Path(__file__).resolve().parent.parent


def test_tangos_interval_is_the_published_one():
    # Fagerland, Lydersen & Laake (2017), Statistical Analysis of Contingency Tables, ch. 8:
    # Bentur et al. (2009), 1 and 7 discordant pairs of 21: Tango -0.5173 to -0.0260.
    result = tango_ci(1, 7, 21)
    assert result["ci95"] == pytest.approx([-0.5173, -0.0260], abs=1e-4)
    assert result["p"] < 0.05
    # Every pair agrees: +-z^2 / (n + z^2), not a point and not withheld.
    assert tango_ci(0, 0, 10)["ci95"] == pytest.approx([-Z95 ** 2 / (10 + Z95 ** 2),
                                                        Z95 ** 2 / (10 + Z95 ** 2)])


def test_a_paired_rate_difference_where_every_pair_agrees_has_an_interval_and_says_why():
    """The t interval on per-case differences gave none here (every difference 0)."""
    d = [0.0] * 30
    g = [0.0] * 20 + [1.0] * 5 + [-1.0] * 5
    result = paired_rate_difference(d, g, [0.0, 1.0] * 200)
    assert result.ci95 == pytest.approx(tango_ci(0, 0, 30)["ci95"])
    assert "every labelled pair agrees" in result.method
    assert ppi.ppi_mean(d, g, [0.0, 1.0] * 200).ci95 is None  # the old one: none
    with pytest.raises(ValueError, match="-1, 0 or 1"):
        paired_rate_difference([0.5], [0.0], [0.0])


def test_a_paired_rate_difference_keeps_ppi_plus_plus_where_the_judge_is_worth_it():
    rng = np.random.default_rng(3)
    a = (rng.random(2000) < 0.4).astype(float)
    b = np.maximum(a, (rng.random(2000) < 0.2).astype(float))
    ja, jb = a.copy(), b.copy()
    flip = rng.random(2000) < 0.05
    ja[flip] = 1 - ja[flip]
    drawn = rng.choice(2000, 60, replace=False)
    rest = np.setdiff1d(np.arange(2000), drawn)
    d, g = b - a, jb - ja
    result = paired_rate_difference(d[drawn], g[drawn], g[rest])
    point = ppi.ppi_mean(d[drawn], g[drawn], g[rest])
    assert result.estimate == pytest.approx(point.estimate)
    assert result.n_eff >= 60 and "Tango" in result.method
    assert -1 <= result.ci95[0] < result.estimate < result.ci95[1] <= 1


def test_an_independent_difference_is_withheld_where_a_side_is():
    method = "active PPI++; " + ppi.ACTIVE_TOO_FEW.format(n=12, minimum=ppi.ACTIVE_MIN_LABELS)
    a = ppi.Estimate(3.0, 0.2, None, None, method, n=12)
    b = ppi.Estimate(3.4, 0.2, [3.0, 3.8], 0.01, "active PPI++", n=40, df=39.0)
    result = ppi.independent_difference(a, b)
    assert result.ci95 is None and result.p is None
    assert "12 labels on an active sheet, at least 30 needed" in result.method
    both = ppi.independent_difference(ppi.Estimate(3.0, 0.2, [2.6, 3.4], 0.01, "", n=40,
                                                   df=39.0), b)
    assert both.ci95 is not None


def _bench():
    spec = importlib.util.spec_from_file_location("small_n_coverage",
                                                  ROOT / "benchmarks" / "small_n_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tangos_interval_keeps_its_level_exactly_and_over_covers_only_where_discordance_is_rare():
    """The labels' own paired interval by exact enumeration (the trinomial of (B only, A
    only, agree) pairs: Newcombe 1998; Fagerland, Lydersen & Laake 2013). At 20 pairs it
    covers at least 93% everywhere on the grid and about 95% where 6 or more discordant
    pairs are expected; where fewer than 3 are, about 99%: the 99-100% of the small-n
    table's "rate B - A paired" row, whose scenarios expect 0.3-2.7 discordant pairs at
    10-30 labels, all passing B only, is this, not a miscounted interval."""
    bench = _bench()
    grid = bench.tango_exact_grid(20)
    assert grid["least"] >= 0.93
    assert 0.94 <= grid["many"] <= 0.965
    assert grid["few"] >= 0.98
    # The small-n table's decent scenario (9% B only, none A only): 100% at 10 pairs.
    assert bench.tango_exact_coverage(10, 0.09, 0.0) > 0.999
    # Cross-check of the enumeration with simulation: 4,000 draws at 15 pairs.
    rng = np.random.default_rng(5)
    draws = rng.multinomial(15, [0.2, 0.1, 0.7], size=4000)
    hits = [(lambda ci: ci[0] <= 0.1 <= ci[1])(tango_ci(int(x), int(y), 15)["ci95"])
            for x, y, _ in draws]
    assert np.mean(hits) == pytest.approx(bench.tango_exact_coverage(15, 0.2, 0.1), abs=0.012)


def test_the_judges_bias_in_a_rate_is_tangos_interval_on_its_discordant_cases():
    """judge - label on 0/1 outcomes: the estimate is mean(judge - label), the interval
    Tango's on x cases the judge passed alone and y the label passed alone (checked against
    tango_ci on counts made by hand); the judge's probabilities of passing: None (t kept)."""
    judge = [1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1]
    label = [1, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1]
    x = sum(1 for f, y in zip(judge, label) if f == 1 and y == 0)
    y = sum(1 for f, y in zip(judge, label) if f == 0 and y == 1)
    assert (x, y) == (3, 1)
    bias = rate_bias(judge, label)
    assert bias.estimate == pytest.approx(np.mean(np.subtract(judge, label)))
    assert bias.ci95 == pytest.approx(tango_ci(3, 1, 12)["ci95"], abs=1e-12)
    assert -1 <= bias.ci95[0] < bias.estimate < bias.ci95[1] <= 1
    assert "3 + 1 discordant of 12" in bias.method
    # Every case agreeing: still an interval, never a point.
    same = rate_bias([1, 0, 1], [1, 0, 1])
    assert same.estimate == 0 and same.ci95[0] < 0 < same.ci95[1]
    assert rate_bias([0.8, 0.1], [1, 0]) is None
