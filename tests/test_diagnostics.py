"""The judge-bias diagnostics' figures (evaluator/analysis/diagnostics.py): the verbosity
correlation's p-value and CI come from one statistic and agree about 0, checked against the
Bonett-Wright formula computed here by hand and on many simulated data sets."""

from __future__ import annotations

import math
import warnings
from statistics import NormalDist

import pytest

from evaluator.analysis.diagnostics import verbosity
from evaluator.analysis.intervals import fisher_z_ci

np = pytest.importorskip("numpy", reason="needs the stats extra")
pd = pytest.importorskip("pandas", reason="needs the stats extra")
stats = pytest.importorskip("scipy.stats", reason="needs the stats extra")


def by_hand(x, y) -> tuple[float, list[float], float]:
    """Spearman rho (pandas' rank correlation), the Bonett-Wright Fisher-z 95% CI and the
    two-sided p of the same Wald statistic, from the paper's formulas (Bonett & Wright
    2000): se = sqrt((1 + r^2/2) / (n - 3)), z = atanh(r) / se. No scipy."""
    r = float(pd.Series(x, dtype=float).corr(pd.Series(y, dtype=float), method="spearman"))
    se = math.sqrt((1 + r * r / 2) / (len(x) - 3))
    q = NormalDist().inv_cdf(0.975)
    ci = [math.tanh(math.atanh(r) - q * se), math.tanh(math.atanh(r) + q * se)]
    return r, ci, 2 * (1 - NormalDist().cdf(abs(math.atanh(r)) / se))


def text_correlation(scores, lengths) -> dict:
    return verbosity(scores, None, lengths, [None] * len(scores))["text_chars"]["correlation"]


def scipy_p(x, y) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(stats.spearmanr(x, y).pvalue)


def test_rho_its_ci_and_p_follow_the_papers_formulas():
    rng = np.random.default_rng(5)
    for n in (4, 7, 15, 40, 200):
        scores = rng.integers(1, 6, n).tolist()
        lengths = (np.asarray(scores) * 40 + rng.normal(0, 120, n)).round().tolist()
        figure = text_correlation(scores, lengths)
        r, ci, p = by_hand(scores, lengths)
        assert figure["n"] == n
        assert figure["rho"] == pytest.approx(r, abs=1e-12)
        assert figure["ci95"] == pytest.approx(ci, abs=1e-9)
        assert figure["p"] == pytest.approx(p, rel=1e-6, abs=1e-12)
        assert "Bonett-Wright" in figure["method"]


def test_the_reported_disagreement_is_gone():
    """Data where scipy's t approximation gave p < 0.05 but the Fisher-z CI held 0 (a page
    said rho -0.315 [-0.576, 0.004], p 0.047): the p shown is now the CI's own."""
    rng = np.random.default_rng(0)
    found = 0
    for _ in range(4000):
        scores = rng.integers(1, 6, 40).tolist()
        lengths = rng.integers(200, 2000, 40).tolist()
        figure = text_correlation(scores, lengths)
        low, high = figure["ci95"]
        if scipy_p(scores, lengths) < 0.05 and low <= 0 <= high:
            found += 1
            assert figure["p"] >= 0.05
            assert figure["p"] == pytest.approx(by_hand(scores, lengths)[2], rel=1e-6)
    assert found >= 1  # the case that disagreed before exists in these data


def _simulated(rng):
    """Data sets of every awkward kind: n from 4, rho near 0, heavy ties, scores piled at
    an edge of the 1-5 scale, lengths with three values, and some with a real effect."""
    edge = ([0.02, 0.03, 0.05, 0.2, 0.7], [0.75, 0.15, 0.05, 0.03, 0.02],
            [0.2, 0.2, 0.2, 0.2, 0.2])
    for n in (4, 5, 6, 8, 12, 20, 40, 100):
        for p in edge:
            for strength in (0.0, 0.3, 1.0):
                for _ in range(25):
                    scores = rng.choice([1, 2, 3, 4, 5], size=n, p=p)
                    noise = rng.normal(0, 1, n)
                    lengths = 500 + 100 * (strength * (scores - scores.mean()) + noise)
                    if rng.random() < 0.3:  # few distinct lengths: ties on both sides
                        lengths = np.digitize(lengths, [450, 550]) * 100
                    yield scores.tolist(), lengths.round().tolist()


def test_p_below_005_exactly_when_the_ci_excludes_0_on_simulated_data():
    rng = np.random.default_rng(20141)
    significant = not_significant = no_figures = old_disagreed = 0
    for scores, lengths in _simulated(rng):
        figure = text_correlation(scores, lengths)
        if figure["rho"] is None:  # one value on a side: undefined, said why
            assert figure["undefined"] and figure["p"] is None and figure["ci95"] is None
            continue
        if figure["ci95"] is None:  # |rho| = 1 or n = 3: neither, never one alone
            assert figure["p"] is None
            no_figures += 1
            continue
        low, high = figure["ci95"]
        excludes = not low <= 0 <= high
        assert (figure["p"] < 0.05) == excludes, (figure, scores, lengths)
        significant += excludes
        not_significant += not excludes
        old_disagreed += (scipy_p(scores, lengths) < 0.05) != excludes
    # Both outcomes occur, and scipy's p would have disagreed with the CI on some.
    assert significant > 100 and not_significant > 100
    assert old_disagreed > 0 and no_figures > 0


def test_the_test_holds_its_level_under_independence():
    """Scores on 1-5 against unrelated lengths: at most about 5% rejected at 5% (it is
    conservative at small n; scipy's t approximation rejected 8% at n = 5)."""
    rng = np.random.default_rng(7)
    for n in (6, 12, 40):
        rejected = total = 0
        for _ in range(1000):
            scores = rng.integers(1, 6, n).tolist()
            lengths = rng.lognormal(6, 1, n).round().tolist()
            figure = text_correlation(scores, lengths)
            if figure["p"] is None:
                continue
            total += 1
            rejected += figure["p"] < 0.05
        # 1000 draws: a true 5% gives at most ~7% with probability > 0.999.
        assert total > 900 and rejected / total < 0.07, (n, rejected, total)


@pytest.mark.parametrize("kind", ["spearman", "kendall"])
def test_fisher_z_gives_no_p_without_an_interval(kind):
    assert fisher_z_ci(1.0, 30, kind)["p"] is None
    assert fisher_z_ci(0.3, 3, kind)["p"] is None
    assert fisher_z_ci(None, 30, kind)["p"] is None
    figure = fisher_z_ci(0.3, 30, kind)
    assert figure["ci95"] is not None and 0 < figure["p"] < 1


def test_kendalls_p_is_its_intervals_own():
    """The Fisher-z fallback of Kendall's tau (Fieller-Hartley-Pearson SE) agrees too."""
    for r in np.linspace(-0.6, 0.6, 121):
        for n in (8, 30, 90):
            figure = fisher_z_ci(float(r), n, "kendall")
            low, high = figure["ci95"]
            se = math.sqrt(0.437 / (n - 4))
            assert figure["p"] == pytest.approx(
                2 * (1 - NormalDist().cdf(abs(math.atanh(r)) / se)), rel=1e-6, abs=1e-12)
            assert (figure["p"] < 0.05) == (not low <= 0 <= high)
