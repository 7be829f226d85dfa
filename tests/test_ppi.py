"""The estimators of :mod:`evaluator.analysis.estimate.ppi`, checked as statisticians check them:
against the method authors' implementation (ppi-python) on the same data, and by simulation
(do 95% CIs cover the truth in about 95% of replicates?).

The reference lives outside the venv (``make reference``: locks/reference.txt into
.cache/ppi-reference; its wheel carries a top-level ``tests`` package that would shadow
ours). ``make test`` sets EVALUATOR_PPI_REFERENCE, and then a missing reference fails the
reference tests instead of skipping them."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="needs the stats extra")
pytest.importorskip("scipy", reason="needs the stats extra")

from evaluator.analysis.designs import DEFAULT_FLOOR, inclusion_probabilities
from evaluator.analysis.estimate import ppi
from evaluator.analysis.intervals import Z95, t_quantile

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = Path(os.environ.get("EVALUATOR_PPI_REFERENCE", ROOT / ".cache" / "ppi-reference"))


@pytest.fixture(scope="module")
def ppi_py():
    if not (REFERENCE / "ppi_py").is_dir():
        if os.environ.get("EVALUATOR_PPI_REFERENCE"):
            pytest.fail(f"the PPI reference is not installed in {REFERENCE} (make reference)")
        pytest.skip("the PPI reference (ppi-python) is not installed: make reference")
    # Appended, never first: nothing of ours may resolve to it.
    sys.path.append(str(REFERENCE))
    try:
        import ppi_py as module
    finally:
        sys.path.remove(str(REFERENCE))
    return module


@pytest.fixture(scope="module")
def benchmark():
    """benchmarks/ppi_coverage.py: its scenarios are the ones the tests simulate."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmarks_ppi_coverage",
                                                  ROOT / "benchmarks" / "ppi_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scalar(value) -> float:
    return float(np.ravel(value)[0])


def _data(seed: int):
    """Labels, the judge on the labelled cases, the judge on the unlabelled ones."""
    rng = np.random.default_rng(seed)
    big_n = int(rng.integers(60, 3000))
    n = int(rng.integers(8, min(big_n, 400)))
    truth = rng.choice([1, 2, 3, 4, 5], big_n).astype(float)
    judge = np.clip(np.round(truth + 0.5 + rng.normal(0, rng.uniform(0.2, 2), big_n)), 1, 5)
    if seed % 3 == 0:  # a continuous judge (expected scores) as well
        judge = judge + rng.uniform(-0.4, 0.4, big_n)
    labelled = rng.choice(big_n, n, replace=False)
    others = np.setdiff1d(np.arange(big_n), labelled)
    return truth[labelled], judge[labelled], judge[others]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("lam", [None, 1.0, 0.0])
def test_ppi_mean_equals_ppi_py(ppi_py, seed, lam):
    y, yhat, yhat_all = _data(seed)
    ours = ppi.ppi_mean(y, yhat, yhat_all, lam=lam)
    point = _scalar(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_all, lam=lam))
    low, high = ppi_py.ppi_mean_ci(y, yhat, yhat_all, alpha=0.05, lam=lam)
    assert ours.estimate == pytest.approx(point, abs=1e-9, rel=0)
    # ppi_py's interval is the normal one with variances of ddof 0; ours is Student t on
    # Welch-Satterthwaite df with ddof 1 (2 for the rectifier where lambda is tuned): the
    # same centre, and a half-width t/z times ppi_py's, times at most sqrt(n / (n - 2)).
    # Both factors go to 1 as n grows: at n = 400, 1.003 and 1.0025.
    n = len(y)
    ratio = (ours.ci95[1] - ours.ci95[0]) / (_scalar(high) - _scalar(low))
    quantile = t_quantile(ours.df) / Z95
    assert ours.ci95[0] + ours.ci95[1] == pytest.approx(_scalar(low) + _scalar(high), abs=1e-9)
    # Where lambda is tuned, the rectifier's variance is the larger of that and the
    # jackknife's with lambda re-tuned (issue 47: labels piled at an edge): at most that
    # much wider, and within 6% of the plug-in bound from 200 labels.
    widen = 1.0
    if lam is None and ours.lam > 0:
        plug_in = float((y - ours.lam * yhat).var()) / n * n / (n - 2)
        widen = math.sqrt(max(1.0, ppi.tuned_jackknife_variance(y, yhat, yhat_all) / plug_in))
        if n >= 200:
            assert widen <= 1.06, (n, widen)
    assert quantile * (1 - 1e-9) <= ratio <= quantile * math.sqrt(n / (n - 2)) * widen + 1e-9
    assert min(n - 2, len(y)) <= ours.df + 1e-9
    if lam is None:
        assert 0 <= ours.lam <= 1


@pytest.mark.parametrize("seed", range(6))
def test_a_pass_rates_ppi_estimate_and_lambda_are_ppi_pys(ppi_py, seed):
    """A 0/1 outcome: ppi_rate keeps ppi_py's estimate and lambda and changes the interval,
    unless the judge is worth fewer labels than there are: then lambda is 0."""
    rng = np.random.default_rng(seed)
    big_n, n = int(rng.integers(100, 2000)), int(rng.integers(8, 60))
    truth = (rng.random(big_n) < rng.uniform(0.03, 0.6)).astype(float)
    judge = np.where(rng.random(big_n) < 0.85, truth, 1 - truth)
    if seed % 2:  # the judge's probability of passing (expected scores)
        judge = np.clip(judge * 0.8 + rng.uniform(0, 0.2, big_n), 0, 1)
    drawn = rng.choice(big_n, n, replace=False)
    rest = np.setdiff1d(np.arange(big_n), drawn)
    ours = ppi.ppi_rate(truth[drawn], judge[drawn], judge[rest])
    point = _scalar(ppi_py.ppi_mean_pointestimate(truth[drawn], judge[drawn], judge[rest]))
    assert 0 <= ours.ci95[0] <= ours.estimate <= ours.ci95[1] <= 1
    judged = ours.lam > 0
    if judged:
        assert ours.estimate == pytest.approx(min(1.0, max(0.0, point)), abs=1e-9)
        assert ours.lam == pytest.approx(ppi.ppi_mean(truth[drawn], judge[drawn],
                                                      judge[rest]).lam)
        # Korn & Graubard's effective n: the estimate's own p (1 - p) over its SE^2, times
        # their degrees-of-freedom adjustment (z / t_df)^2.
        assert ours.n_eff == pytest.approx(ours.estimate * (1 - ours.estimate) / ours.se ** 2
                                           * (Z95 / t_quantile(ours.df)) ** 2)
    else:  # the judge adds nothing: lambda 0, the labels' own Wilson interval
        assert ours.lam == 0 and ours.estimate == pytest.approx(truth[drawn].mean())
        assert ours.ci95 == pytest.approx(ppi.classical_rate(truth[drawn]).ci95)
    # Both ways are taken: on these draws the judge is worth more than its labels but on
    # two (41 and 12 labels), where the half pseudo-cases outweigh what it adds.
    # (Seed 5, 11 labels: since issue 47's t allowance on 9 df, the labels alone too.)
    assert judged == (seed not in (0, 3, 5))


@pytest.mark.parametrize("seed", range(5))
def test_classical_mean_equals_ppi_py(ppi_py, seed):
    y, _, _ = _data(seed)
    ours = ppi.classical_mean(y)
    low, high = ppi_py.classical_mean_ci(y, alpha=0.05)
    assert ours.estimate == pytest.approx(float(y.mean()), abs=1e-12)
    # Student's t interval: ppi_py's normal one (sd with ddof 0) times t_{n-1} / z and
    # sqrt(n / (n - 1)), which go to 1 as n grows.
    n = len(y)
    half = (_scalar(high) - _scalar(low)) / 2 * t_quantile(n - 1) / Z95 * math.sqrt(n / (n - 1))
    assert ours.ci95 == pytest.approx([float(y.mean()) - half, float(y.mean()) + half],
                                      abs=1e-9, rel=0)


def test_the_tuned_weight_is_zero_for_a_constant_judge_and_the_labels_stand_alone():
    y = np.array([1.0, 3.0, 4.0, 2.0, 5.0])
    result = ppi.ppi_mean(y, np.full(5, 3.0), np.full(50, 3.0))
    classical = ppi.classical_mean(y)
    assert result.lam == 0
    assert result.estimate == pytest.approx(classical.estimate)
    assert result.ci95 == pytest.approx(classical.ci95)


def test_ipw_with_equal_probabilities_and_lambda_one_is_plain_ppi_over_all_cases():
    y, yhat, others = _data(4)
    n, big_n = len(y), len(y) + len(others)
    # The labelled cases first: N cases with labels on n of them.
    labels = list(y) + [None] * len(others)
    judge = np.concatenate([yhat, others])
    ours = ppi.ipw_mean(judge, labels, [n / big_n] * big_n, lam=1.0, offset=0.0)
    assert ours.estimate == pytest.approx(judge.mean() + (y - yhat).mean(), abs=1e-12)


def test_every_case_labelled_gives_the_labels_mean():
    y, yhat, _ = _data(2)
    every = ppi.ppi_mean(y, yhat, [])
    assert every.estimate == pytest.approx(float(np.mean(y))) and every.lam == 0
    assert every.ci95 == pytest.approx(ppi.classical_mean(y).ci95)


def test_ipw_refuses_impossible_probabilities():
    with pytest.raises(ValueError, match="inclusion probabilities"):
        ppi.ipw_mean([1.0, 2.0], [1.0, None], [0.0, 1.0])


# --- Coverage by simulation -------------------------------------------------------------
# The issue's scenario: clinicians' labels on a 1-5 scale; the judge is biased by +0.5 and
# noisier where it is unsure (30% of cases: noise sd 1.5, else 0.3), rounded into 1-5. Its
# uncertainty (what `review --design active` uses: the sd of its score distribution) is the
# sd of its own error, sqrt(sd^2 + 1/12) with the rounding. N = 2000 cases, n = 100 labels.
# The truth is the clinicians' mean of the population the cases come from (3.15): the
# quantity the CIs are for (exchangeable cases).
LABEL_P = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
TRUE_MEAN = float((np.arange(1, 6) * LABEL_P).sum())
REPLICATES = 600


def _population(rng, big_n, bias=0.5):
    labels = rng.choice(np.arange(1, 6), big_n, p=LABEL_P).astype(float)
    sd = np.where(rng.random(big_n) < 0.3, 1.5, 0.3)
    judge = np.clip(np.round(labels + bias + rng.normal(0, sd)), 1, 5)
    return labels, judge, np.sqrt(sd ** 2 + 1 / 12)


def _replicate(seed, big_n=2000, n=100):
    rng = np.random.default_rng(seed)
    labels, judge, uncertainty = _population(rng, big_n)
    drawn = rng.choice(big_n, n, replace=False)
    rest = np.setdiff1d(np.arange(big_n), drawn)
    random = ppi.ppi_mean(labels[drawn], judge[drawn], judge[rest])
    pi = np.asarray(inclusion_probabilities(uncertainty, n))
    taken = rng.random(big_n) < pi
    active = ppi.ipw_mean(judge, [v if t else None for v, t in zip(labels, taken)],
                          np.where(taken, pi, 1.0))
    return {"random": random, "active": active, "labels only": ppi.classical_mean(labels[drawn]),
            "judge only": ppi.judge_mean(judge)}


@pytest.fixture(scope="module")
def simulated():
    return [_replicate(seed) for seed in range(REPLICATES)]


def _coverage(results, name, truth=TRUE_MEAN):
    return float(np.mean([r[name].ci95[0] <= truth <= r[name].ci95[1] for r in results]))


def _width(results, name):
    return float(np.median([r[name].ci95[1] - r[name].ci95[0] for r in results]))


def test_random_and_active_cis_cover_the_clinician_mean_in_about_95_percent(simulated):
    for name in ("random", "active", "labels only"):
        assert 0.93 <= _coverage(simulated, name) <= 0.97, (name, _coverage(simulated, name))


def test_the_judge_alone_misses_the_clinician_mean(simulated):
    assert _coverage(simulated, "judge only") < 0.5
    # Its CI is narrow and wrong: centred about +0.5 away.
    assert np.mean([r["judge only"].estimate for r in simulated]) > TRUE_MEAN + 0.3


def test_active_labels_give_narrower_cis_than_random_ones_and_both_beat_labels_alone(simulated):
    assert _width(simulated, "active") < _width(simulated, "random") < _width(simulated,
                                                                                "labels only")


def test_estimates_are_unbiased_over_replicates(simulated):
    for name in ("random", "active"):
        mean = np.mean([r[name].estimate for r in simulated])
        se = np.std([r[name].estimate for r in simulated]) / np.sqrt(REPLICATES)
        assert abs(mean - TRUE_MEAN) < 4 * se, name


def test_paired_and_independent_differences_cover_the_true_difference():
    """Two systems on the same cases (system B's clinicians' labels 0.3 higher): paired
    (one random draw for both, PPI++ on the differences) and independent (separate draws)
    CIs of B - A cover 0.3 in about 95% of replicates; the paired one is narrower here."""
    covered = {"paired": [], "independent": []}
    widths = {"paired": [], "independent": []}
    for seed in range(REPLICATES):
        rng = np.random.default_rng(10_000 + seed)
        big_n, n = 1000, 80
        la, ja, _ = _population(rng, big_n)
        lb = np.clip(la + rng.choice([0, 1], big_n, p=[0.7, 0.3]), 1, 6)
        jb = np.clip(np.round(lb + 0.5 + rng.normal(0, 0.6, big_n)), 1, 6)
        truth = 0.3  # lb - la is 1 with probability 0.3 (la + 1 <= 6: the clip never binds)
        drawn = rng.choice(big_n, n, replace=False)
        rest = np.setdiff1d(np.arange(big_n), drawn)
        paired = ppi.ppi_mean(lb[drawn] - la[drawn], (jb - ja)[drawn], (jb - ja)[rest])
        other = rng.choice(big_n, n, replace=False)
        rest_other = np.setdiff1d(np.arange(big_n), other)
        independent = ppi.independent_difference(
            ppi.ppi_mean(la[drawn], ja[drawn], ja[rest]),
            ppi.ppi_mean(lb[other], jb[other], jb[rest_other]))
        for name, result in (("paired", paired), ("independent", independent)):
            covered[name].append(result.ci95[0] <= truth <= result.ci95[1])
            widths[name].append(result.ci95[1] - result.ci95[0])
    for name in covered:
        # Up to 0.98: t on ~78 df is 0.7% wider than the normal interval this bound was set
        # for, and 600 replicates' Monte Carlo SE is 0.9 points (issue 47).
        assert 0.93 <= np.mean(covered[name]) <= 0.98, (name, np.mean(covered[name]))
    assert np.median(widths["paired"]) < np.median(widths["independent"])


def test_effective_labels_of_a_random_design_is_n_times_the_variance_ratio():
    y, yhat, yhat_all = _data(7)
    estimate = ppi.ppi_mean(y, yhat, yhat_all)
    classical = ppi.classical_mean(y)
    # classical.se is Student's (ddof 1); the labels' variance is ddof 0.
    expected = (len(y) - 1) * classical.se ** 2 / estimate.se ** 2
    assert ppi.effective_labels(ppi.labelled_variance(y), estimate) == pytest.approx(expected)


def test_independent_difference_adds_the_variances():
    a = ppi.normal_estimate(2.0, 0.3, "a")
    b = ppi.normal_estimate(2.5, 0.4, "b")
    d = ppi.independent_difference(a, b)
    assert d.estimate == pytest.approx(0.5) and d.se == pytest.approx(0.5)
    from scipy.stats import norm

    assert d.p == pytest.approx(2 * norm.sf(1.0))


def test_labels_that_are_most_of_the_cases_still_cover():
    """n close to N (45 of 50 labelled): the judge's mean is over the unlabelled cases only
    (counting the labelled ones twice covered 88% here)."""
    hits = []
    for seed in range(REPLICATES):
        rng = np.random.default_rng(20_000 + seed)
        labels, judge, _ = _population(rng, 50)
        drawn = rng.choice(50, 45, replace=False)
        rest = np.setdiff1d(np.arange(50), drawn)
        result = ppi.ppi_mean(labels[drawn], judge[drawn], judge[rest])
        hits.append(result.ci95[0] <= TRUE_MEAN <= result.ci95[1])
    assert np.mean(hits) >= 0.925, np.mean(hits)


def test_cross_fitted_active_tuning_keeps_coverage_with_few_labels(monkeypatch):
    """20 expected labels of 2,000: tuning lambda and the offset on the cases they are
    applied to covered 88%; cross-fitted, about 92% (the normal approximation's own limit
    at this n: labels alone on a random sample of 20 cover about 93%). The estimator's own
    mechanics, below the 30-label floor `estimate` withholds them at (issue 47): lifted."""
    monkeypatch.setattr(ppi, "ACTIVE_MIN_LABELS", 1)
    hits, alone = [], []
    for seed in range(REPLICATES):
        rng = np.random.default_rng(30_000 + seed)
        labels, judge, uncertainty = _population(rng, 2000)
        pi = np.asarray(inclusion_probabilities(uncertainty, 20))
        taken = rng.random(2000) < pi
        if not taken.any():
            continue
        drawn = [v if t else None for v, t in zip(labels, taken)]
        result = ppi.ipw_mean(judge, drawn, np.where(taken, pi, 1.0))
        hits.append(result.ci95[0] <= TRUE_MEAN <= result.ci95[1])
        # The labels alone (lambda 0, the offset cross-fitted too): in-sample it was 88%.
        labels_only = ppi.ipw_mean(judge, drawn, np.where(taken, pi, 1.0), lam=0.0)
        alone.append(labels_only.ci95[0] <= TRUE_MEAN <= labels_only.ci95[1])
    assert np.mean(hits) >= 0.89, np.mean(hits)
    assert np.mean(alone) >= 0.89, np.mean(alone)
    again = ppi.ipw_mean(judge, [v if t else None for v, t in zip(labels, taken)],
                         np.where(taken, pi, 1.0))
    assert again.estimate == result.estimate  # the folds are seeded: the same every time


def test_the_coverage_benchmark_runs_and_prints_its_figures_and_rerun_command(benchmark,
                                                                            capsys):
    """benchmarks/ppi_coverage.py is where the docs' coverage figures come from: its quick
    mode runs and prints coverage and width for every estimator, and how to re-run it."""
    module = benchmark
    figures = module.main(["--quick"])
    output = capsys.readouterr().out
    (row,) = figures["main"].values()
    for name in module.ESTIMATORS + module.OLD_ACTIVE:
        assert 0 <= row[name]["coverage"] <= 1 and row[name]["width"] > 0
        assert row[name]["replicates"] == 40
    assert row["judge only"]["coverage"] < 0.5 < row["random PPI++"]["coverage"]
    # Issue 34's scenario, with each coverage's own CI, and a pass rate before and after.
    (wrong,) = figures["wrong_on_20"].values()
    low, high = wrong["active PPI++"]["coverage_ci"]
    assert low <= wrong["active PPI++"]["coverage"] <= high and 0 < wrong["kish"] <= 1
    (rates,) = figures["pass_rates"].values()
    assert set(rates) == set(module.RATE_ESTIMATORS)
    assert rates["random labels only"]["outside"] > 0.5  # the normal interval went below 0
    assert "issue 34: the judge confidently wrong on 20%" in output
    assert "re-run: " in output and "benchmarks/ppi_coverage.py --quick" in output



# --- Pass rates (issue 34, item 8) --------------------------------------------------------

def test_a_pass_rate_with_every_label_the_same_gets_wilsons_interval_not_a_point():
    for outcome, interval in ((0.0, [0.0, 0.2425]), (1.0, [0.7575, 1.0])):
        labels = [outcome] * 12
        alone = ppi.classical_rate(labels)
        assert alone.ci95 == pytest.approx(interval, abs=1e-4)
        # The judge passes some unlabelled cases: lambda is 0, the labels stand alone.
        judged = ppi.ppi_rate(labels, labels, [0.0] * 200 + [1.0] * 40)
        assert judged.estimate == outcome and judged.ci95 == pytest.approx(interval, abs=1e-4)
    with pytest.raises(ValueError, match="0 or 1"):
        ppi.classical_rate([0.0, 2.0])


def test_a_judge_that_agreed_with_every_label_does_not_make_the_interval_a_point():
    """Ten labels, one a pass, and the judge right on all ten: the plain PPI SE is about
    the judge's own sampling error (an interval 0.02 wide); with the half pseudo-case per
    cell it is what ten labels can say."""
    labels = [1.0] + [0.0] * 9
    unlabelled = [1.0] * 200 + [0.0] * 1790
    plain = ppi.ppi_mean(labels, labels, unlabelled, lam=1.0)
    assert plain.ci95[1] - plain.ci95[0] < 0.03
    # Tuned, lambda's jackknife (issue 47) sees that the one pass decides it: not a point.
    assert ppi.ppi_mean(labels, labels, unlabelled).ci95[1] - plain.ci95[0] > 0.2
    rate = ppi.ppi_rate(labels, labels, unlabelled)
    assert rate.ci95[1] - rate.ci95[0] > 0.2 and 0 <= rate.ci95[0] <= rate.ci95[1] <= 1
    # With t's allowance on 8 df (issue 47) PPI++ is worth fewer than its ten labels here:
    # the labels' own Wilson interval.
    assert rate.lam == 0 and rate.ci95 == pytest.approx(ppi.classical_rate(labels).ci95)
    # With the allowance of 100 labels' df it is kept, and not a point either.
    labels = [1.0] * 10 + [0.0] * 90
    rate = ppi.ppi_rate(labels, labels, unlabelled)
    assert rate.lam > 0 and rate.ci95[1] - rate.ci95[0] > 0.04
    assert rate.n_eff == pytest.approx(rate.estimate * (1 - rate.estimate) / rate.se ** 2
                                       * (Z95 / t_quantile(rate.df)) ** 2)


def test_a_pass_rates_interval_is_scaled_by_its_own_variance_not_the_labels():
    """Korn & Graubard's n_eff = p (1 - p) / se^2 at the estimate p. Scaled instead by the
    labels' p (1 - p), Wilson's interval centred on p was off from the SE by
    sqrt(p (1 - p) / (p_lab (1 - p_lab))). One pass in ten labels, the judge right on them
    and passing 40% elsewhere: PPI++ was [0.064, 0.515], wider than the labels' own Wilson
    interval (0.386) though its SE (0.093) is below theirs (0.095)."""
    labels = [1.0] + [0.0] * 9
    rate = ppi.ppi_rate(labels, labels, [1.0] * 396 + [0.0] * 594)
    own = ppi.classical_rate(labels).ci95
    # Since issue 47 the t allowance on 8 df (Korn & Graubard's df-adjusted n_eff) made
    # PPI++'s [0.074, 0.473] wider than the labels' own: the labels stand alone.
    assert rate.lam == 0 and rate.ci95 == pytest.approx(own)
    # Three passes in thirty, the judge right on them and passing 10% elsewhere.
    labels = [1.0] * 3 + [0.0] * 27
    rate = ppi.ppi_rate(labels, labels, [1.0] * 96 + [0.0] * 894)
    own = ppi.classical_rate(labels).ci95
    assert rate.lam > 0 and rate.se < ppi.classical_rate(labels).se
    assert rate.ci95 == pytest.approx([0.0478, 0.1869], abs=1e-3)
    assert rate.ci95[1] - rate.ci95[0] < own[1] - own[0]
    # The interval's implied SE, its width / (2 t_df), is about the computed one.
    assert ((rate.ci95[1] - rate.ci95[0]) / (2 * t_quantile(rate.df))
            == pytest.approx(rate.se, rel=0.1))
    # Five of ten pass and the judge passes 5% elsewhere: SE 0.092 had the interval
    # [0.011, 0.190] (0.179 wide, as if SE 0.046); on its own n_eff 5.7, [0.003, 0.460];
    # df-adjusted (t on 8.1 df), n_eff 4.1 and [0.002, 0.532].
    labels = [1.0] * 5 + [0.0] * 5
    rate = ppi.ppi_rate(labels, labels, [1.0] * 49 + [0.0] * 941)
    assert rate.se == pytest.approx(0.0915, abs=1e-3)
    assert rate.n_eff == pytest.approx(4.11, abs=0.01)
    assert rate.ci95 == pytest.approx([0.0024, 0.5319], abs=1e-3)


def test_a_rate_at_0_keeps_half_a_case_from_the_edge_in_its_effective_n():
    """p (1 - p) is 0 at a clipped estimate of 0: n_eff is taken at half a case from it,
    0.5/m (m the labels' number), so the interval is neither all of [0, 1] nor a jump to
    m's; an SE of 0 gives m itself."""
    below = ppi.Estimate(-0.02, 0.03, None, None, "test")
    rate = ppi.bounded_rate(below, 20)
    assert rate.estimate == 0 and rate.n_eff == pytest.approx(0.025 * 0.975 / 0.03 ** 2)
    assert rate.ci95[0] == 0 and 0 < rate.ci95[1] < 1
    assert ppi.bounded_rate(ppi.Estimate(0.0, 0.0, None, None, "test"), 20).n_eff == 20
    near = ppi.bounded_rate(ppi.Estimate(0.025, 0.03, None, None, "test"), 20)
    assert near.n_eff == pytest.approx(rate.n_eff)


def test_a_mean_near_the_scales_top_is_kept_half_a_point_of_one_label_from_it():
    """Nine 5s and a 4 on 1-5: the mean 4.9 is 0.025 of the scale from its top, a quarter
    of a label's worth. Kept half a *label* from the edge (0.05) it was read as 4.8 in
    p (1 - p), n_eff doubled and the interval [4.58, 4.98] missed a truth of 4.579 in 11% of
    ten-label draws (small_n_coverage ``edge``: 86.4%); half a scale point of one label
    (0.0125) leaves it where it is: n_eff = p (1 - p) / se^2 on the unit scale, df-adjusted."""
    labels = [4.0] + [5.0] * 9
    mean = ppi.bounded_mean(ppi.classical_mean(labels), 1.0, 5.0, 10)
    unit_se = 0.1 / 4  # sd 0.316 / sqrt(10) on a span of 4
    expected = 0.975 * 0.025 / unit_se ** 2 * (ppi.Z95 / t_quantile(9)) ** 2
    assert mean.n_eff == pytest.approx(expected, rel=1e-9)
    assert mean.ci95[0] == pytest.approx(4.3733, abs=1e-3) and mean.ci95[1] < 5
    # A pass rate keeps half a case: one step of a 0/1 outcome is the unit itself.
    assert ppi.bounded_rate(ppi.Estimate(0.975, 0.025, None, None, "test"), 10).n_eff == (
        pytest.approx(0.95 * 0.05 / 0.025 ** 2))


@pytest.mark.parametrize("judge", ["good", "confidently wrong"])
def test_pass_rate_cis_stay_in_0_1_and_cover_a_rare_pass_with_20_labels(benchmark, judge,
                                                                         monkeypatch):
    """A pass rate of 0.05, 20 labels of 1,000 cases (benchmarks/ppi_coverage.py's pass
    judges): the normal intervals reached below 0 in most replicates and covered 56-64%;
    the bounded ones stay in [0, 1] and cover about 95% on an active sheet. On a random one
    the labels alone get Wilson's interval, whose coverage of a binomial at n = 20, p =
    0.05 is 92.5% (it covers 0, 1 or 2 passes, not 3), and PPI++ at least that (it falls
    back to it where the judge adds nothing, as the confidently wrong one mostly does)."""
    # Below the 30-label floor `estimate` withholds active intervals (issue 47); this is
    # the bounded interval's own coverage, so the floor is lifted.
    monkeypatch.setattr(ppi, "ACTIVE_MIN_LABELS", 1)
    hits: dict[str, list[bool]] = {name: [] for name in benchmark.RATE_ESTIMATORS}
    for seed in range(300):
        for name, (_, after) in benchmark.rate_replicate(judge, 0.05, 1000, 20,
                                                         40_000 + seed).items():
            assert after.ci95 is not None and 0 <= after.ci95[0] <= after.ci95[1] <= 1
            assert after.ci95[0] <= after.estimate <= after.ci95[1]
            hits[name].append(after.ci95[0] <= 0.05 <= after.ci95[1])
    for name, covered in hits.items():
        least = 0.88 if name.startswith("random") else 0.92
        assert np.mean(covered) >= least, (name, np.mean(covered))


def test_wilsons_coverage_of_a_rare_binomial_is_what_the_simulation_shows():
    from scipy.stats import binom

    covered = [k for k in range(21)
               if ppi.classical_rate([1.0] * k + [0.0] * (20 - k)).ci95[0] <= 0.05
               <= ppi.classical_rate([1.0] * k + [0.0] * (20 - k)).ci95[1]]
    assert covered == [0, 1, 2]
    assert binom.cdf(2, 20, 0.05) == pytest.approx(0.9245, abs=1e-4)


# --- Active designs where the judge is confidently wrong (issue 34, item 10) -------------

def test_the_default_active_design_covers_where_the_judge_is_confidently_wrong(benchmark):
    """Issue 34's scenario (benchmarks/ppi_coverage.py's wrong_on_20): 1,500 cases, 60
    labels, the judge confidently wrong on 20% of cases and compressed elsewhere. With the
    old floor (0.2) active PPI++ covered about 90% (the few labels on the sure cases carried
    the estimate); at the default floor about 94%, as the random design."""
    hits: dict[str, list[bool]] = {"active PPI++": [], "active labels only": []}
    for seed in range(500):
        result = benchmark.replicate("wrong_on_20", 1500, 60, 50_000 + seed,
                                     floors=(DEFAULT_FLOOR,))
        for name, covered in hits.items():
            ci = result[name].ci95 if name in result else None
            covered.append(ci is not None and ci[0] <= benchmark.TRUTH <= ci[1])
    for name, covered in hits.items():
        assert np.mean(covered) >= 0.925, (name, np.mean(covered))


def test_a_constant_judge_gets_lambda_zero_whatever_the_rounding():
    """A judge giving 4 on every case carries no information: lambda 0. Its residuals'
    variance is rounding noise, and the ratio of two noises gave lambda 1.0 for one such
    judge (issue 48: a constant judge presented as a correction)."""
    import random

    from evaluator.analysis.estimate.ppi import tuned_lambda

    rng = random.Random(1)
    for n, big_n in ((30, 70), (29, 71), (7, 93), (60, 540)):
        y = [float(rng.randint(1, 5)) for _ in range(n)]
        assert tuned_lambda(y, [4.0] * n, [4.0] * big_n) == 0.0
        assert tuned_lambda(y, [2.7] * n, [2.7] * big_n) == 0.0
    # One case off the constant: the judge says something, lambda is computed as before.
    y = [float(rng.randint(1, 5)) for _ in range(30)]
    assert tuned_lambda(y, y, [4.0] * 69 + [5.0]) > 0
