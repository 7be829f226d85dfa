"""The ceiling's statistics (evaluator.analysis.agreement.ceiling) checked as a statistician
checks them: on simulated ratings every clinician-vs-clinician and judge-vs-clinician figure
equals scikit-learn's cohen_kappa_score, scipy's spearmanr and krippendorff.alpha on the same
data; and the 95% CI of the difference (judge vs clinicians minus clinician vs clinician)
covers the true difference in 93-97% of the simulated studies that give it one (of 500), in
three scenarios, for every statistic (within-one agreement's difference by the jackknife t
interval, checked against scipy's t interval of the per-case differences, and none with too
few disagreements: how often none is given is printed). ``pytest -s`` prints the coverage
(docs/statistics.md, "The ceiling", has the figures)."""

from __future__ import annotations

import math

import pytest

krippendorff = pytest.importorskip("krippendorff", reason="needs the stats extra")
np = pytest.importorskip("numpy", reason="needs the stats extra")
spearmanr = pytest.importorskip("scipy.stats", reason="needs the stats extra").spearmanr
cohen_kappa_score = pytest.importorskip(
    "sklearn.metrics", reason="needs the stats extra").cohen_kappa_score

from evaluator.analysis.agreement.ceiling import (
    CEILING_STATISTICS,
    alpha_from_coincidences,
    ceiling,
    kappa_from_counts,
    reading,
    share_from_counts,
    spearman_from_counts,
)
from evaluator.analysis.agreement.records import CeilingFigure

SCALE = [1, 2, 3, 4, 5]


def _rate(truth, rng, noise):
    """A rater: the true score, one point off (either way) with probability ``noise``,
    kept on the scale."""
    step = rng.choice([-1, 0, 1], size=truth.shape, p=[noise / 2, 1 - noise, noise / 2])
    return np.clip(truth + step, 1, 5)


# Scenario -> (true-score probabilities on 1-5, the clinicians' noise, the judge).
SCENARIOS = {
    # Systematically one point high on 2 and 3, otherwise as noisy as a clinician.
    "confidently wrong": ([0.15, 0.25, 0.25, 0.2, 0.15], 0.3,
                          lambda t, rng: np.where((t == 2) | (t == 3), t + 1,
                                                  _rate(t, rng, 0.3))),
    # Most true scores at 1 or 5; a judge noisier than the clinicians.
    "edge of the scale": ([0.42, 0.06, 0.04, 0.06, 0.42], 0.2,
                          lambda t, rng: _rate(t, rng, 0.5)),
    # A judge exactly as good as a clinician: the true difference is 0.
    "as good as clinicians": ([0.1, 0.2, 0.3, 0.25, 0.15], 0.35,
                              lambda t, rng: _rate(t, rng, 0.35)),
}


def _study(scenario, n, rng):
    probabilities, noise, judge = SCENARIOS[scenario]
    truth = rng.choice(SCALE, size=n, p=probabilities)
    return judge(truth, rng), _rate(truth, rng, noise), _rate(truth, rng, noise)


def _confusion(x, y):
    return np.bincount((x - 1) * 5 + (y - 1), minlength=25).reshape(5, 5).astype(float)


def _population(scenario):
    """Each statistic's difference in the population: the figures of one very large study
    (two million cases), computed from its counts."""
    judge, a, b = _study(scenario, 2_000_000, np.random.default_rng(7))
    ab, ja, jb = _confusion(a, b), _confusion(judge, a), _confusion(judge, b)
    out = {}
    for key, _ in CEILING_STATISTICS:
        if key == "kappa_quadratic":
            f = lambda c: float(kappa_from_counts(c, SCALE))
        elif key == "spearman":
            f = lambda c: float(spearman_from_counts(c))
        elif key == "krippendorff_alpha_ordinal":
            f = lambda c: float(alpha_from_coincidences(c + c.T))
        else:
            within = 0 if key == "exact" else 1
            f = lambda c, w=within: float(share_from_counts(c, SCALE, w))
        out[key] = (f(ja) + f(jb)) / 2 - f(ab)
    return out


def _ratings(a, b, c=None):
    rows = []
    for i in range(len(a)):
        row = {"ana": float(a[i]), "ben": float(b[i])}
        if c is not None and not math.isnan(c[i]):
            row["cy"] = float(c[i])
        rows.append(row)
    return rows


def test_figures_equal_scikit_learn_scipy_and_krippendorff_on_the_same_data():
    rng = np.random.default_rng(3)
    judge, a, b = _study("confidently wrong", 120, rng)
    third = _rate(rng.choice(SCALE, size=120), rng, 0.3).astype(float)
    third[rng.random(120) < 0.4] = np.nan  # a third labeller on some cases only
    for raters in ((a, b), (a, b, third)):
        result = ceiling("accuracy", judge.tolist(), _ratings(*raters), scale=SCALE,
                         resamples=200)
        stats = result.statistics
        names = ["ana", "ben", "cy"][:len(raters)]
        pairs = [(raters[i], raters[k]) for i in range(len(raters))
                 for k in range(i + 1, len(raters))]

        def both(x, y):
            keep = ~(np.isnan(x) | np.isnan(y))
            return x[keep].astype(int), y[keep].astype(int)

        def mean_over(pairs_, f):
            return np.mean([f(*both(np.asarray(x, float), np.asarray(y, float)))
                            for x, y in pairs_])

        def kappa(x, y):
            return cohen_kappa_score(x, y, weights="quadratic", labels=SCALE)

        def rho(x, y):
            return spearmanr(x, y).statistic

        judged = [(judge, r) for r in raters]
        checks = {
            "kappa_quadratic": (mean_over(pairs, kappa), mean_over(judged, kappa)),
            "spearman": (mean_over(pairs, rho), mean_over(judged, rho)),
            "exact": (mean_over(pairs, lambda x, y: np.mean(x == y)),
                      mean_over(judged, lambda x, y: np.mean(x == y))),
            "within_one": (mean_over(pairs, lambda x, y: np.mean(abs(x - y) <= 1)),
                           mean_over(judged, lambda x, y: np.mean(abs(x - y) <= 1))),
            "krippendorff_alpha_ordinal": (
                krippendorff.alpha(reliability_data=np.vstack(raters).astype(float),
                                   level_of_measurement="ordinal"),
                mean_over(judged, lambda x, y: krippendorff.alpha(
                    reliability_data=np.vstack([x, y]).astype(float),
                    level_of_measurement="ordinal"))),
        }
        assert result.labellers == names and result.n == 120
        for key, (clinicians, versus) in checks.items():
            figure = stats[key]
            assert figure.clinicians.value == pytest.approx(clinicians, abs=1e-9), key
            assert figure.judge.value == pytest.approx(versus, abs=1e-9), key
            assert figure.difference.value == pytest.approx(versus - clinicians, abs=1e-9)
            assert figure.difference.ci95[0] < figure.difference.value < figure.difference.ci95[1]
        # On observed values 1-5, sklearn's default labels (the observed ones) are the scale.
        assert stats["kappa_quadratic"].clinicians.value == pytest.approx(
            cohen_kappa_score(a, b, weights="quadratic"), abs=1e-9) or len(raters) == 3


def test_kappa_from_counts_is_scikit_learns_on_every_bootstrap_like_resample():
    rng = np.random.default_rng(11)
    x, y = rng.integers(1, 6, 50), rng.integers(1, 6, 50)
    for _ in range(20):
        pick = rng.integers(0, 50, 50)
        counts = _confusion(x[pick], y[pick])
        assert float(kappa_from_counts(counts, SCALE)) == pytest.approx(
            cohen_kappa_score(x[pick], y[pick], weights="quadratic", labels=SCALE), abs=1e-9)
        assert float(spearman_from_counts(counts)) == pytest.approx(
            spearmanr(x[pick], y[pick]).statistic, abs=1e-9)


def test_an_undefined_statistic_gives_no_interval_and_says_why():
    judge = [3] * 30
    ratings = [{"ana": 3.0, "ben": 3.0} for _ in range(30)]
    result = ceiling("accuracy", judge, ratings, scale=SCALE, resamples=200)
    kappa = result.statistics["kappa_quadratic"]
    assert kappa.clinicians.value is None and kappa.clinicians.ci95 is None
    exact = result.statistics["exact"]
    assert exact.clinicians.value == 1.0 and exact.difference.value == 0.0
    assert exact.difference.ci95 is None and "same value" in exact.difference.ci_method


def _difference(low, high):
    return CeilingFigure(value=(low + high) / 2, ci95=[low, high], ci_method="BCa")


def test_the_reading_decides_only_on_enough_cases_and_never_calls_a_wide_ci_equivalence():
    # The review's 6 overlap cases: figures shown, no decision.
    few = reading(6, _difference(-0.97, 0.77))
    assert few.startswith("too few overlap cases (6) to decide") and "about as well" not in few
    assert "too few" in reading(29, _difference(-0.05, 0.04))
    # A CI that includes 0 but spans most of the scale: no difference detected, said as the
    # interval, never "about as well".
    wide = reading(80, _difference(-0.97, 0.77))
    assert wide == ("no difference detected: the judge's kappa is anything from 0.97 lower "
                    "to 0.77 higher than the clinicians'")
    same = reading(80, _difference(-0.05, 0.04))
    assert "about as well" in same and "within 0.1" in same
    assert "0.05 to 0.30 lower" in reading(100, _difference(-0.30, -0.05))
    assert "0.05 to 0.30 higher" in reading(100, _difference(0.05, 0.30))
    # Between 30 and 60 cases: read, with a warning that the interval may cover less.
    middle = reading(40, _difference(-0.30, -0.05))
    assert "lower" in middle and "may cover less than 95%" in middle
    assert "may cover less" not in reading(60, _difference(-0.30, -0.05))
    assert ceiling("accuracy", [3, 2, 4, 5, 1, 3], [{"ana": v, "ben": v} for v in
                                                    (3, 2, 4, 5, 1, 2)],
                   scale=SCALE, resamples=200).reading.startswith("too few overlap cases (6)")


REPLICATES = 500
CASES = 100
# Fewer intervals than this and their coverage is not measured (only printed).
MEASURABLE = 100


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_differences_95_ci_covers_the_true_difference(scenario):
    # Every figure's difference, in every scenario: among the studies that give it an
    # interval, the interval covers the true difference 93-97% of the time; how often none
    # is given is printed (within-one agreement gives none with too few disagreements).
    truth = _population(scenario)
    rng = np.random.default_rng(2026)
    covered = {key: 0 for key, _ in CEILING_STATISTICS}
    given = {key: 0 for key, _ in CEILING_STATISTICS}
    for replicate in range(REPLICATES):
        judge, a, b = _study(scenario, CASES, rng)
        result = ceiling("accuracy", judge.tolist(), _ratings(a, b), scale=SCALE,
                         resamples=1000, seed=replicate)
        for key, _ in CEILING_STATISTICS:
            ci = result.statistics[key].difference.ci95
            if ci is not None:
                given[key] += 1
                covered[key] += ci[0] <= truth[key] <= ci[1]
    coverage = {key: covered[key] / given[key] if given[key] else None for key in covered}
    print(f"\n{scenario}: true differences "
          + ", ".join(f"{k} {v:+.3f}" for k, v in truth.items()))
    print(f"{scenario}: coverage of the difference's 95% CI over {REPLICATES} studies of "
          f"{CASES} overlap cases, among those with an interval (no interval): "
          + ", ".join(f"{k} " + (f"{coverage[k]:.1%}" if coverage[k] is not None else "-")
                      + f" ({1 - given[k] / REPLICATES:.1%})" for k in coverage))
    for key, value in coverage.items():
        if given[key] >= MEASURABLE:
            assert 0.93 <= value <= 0.97, (scenario, key, value, given[key])
        else:
            # Too few intervals to measure their coverage: the figure mostly has none (with
            # its reason), never an interval that undercovers.
            assert key == "within_one" and given[key] <= 0.2 * REPLICATES, (scenario, key)


def test_within_ones_difference_interval_is_the_t_interval_of_the_per_case_differences():
    # Two labellers on every case: the within-one difference is the mean of each case's
    # (judge within one of ana + of ben) / 2 - (ana within one of ben), and its interval
    # scipy's one-sample t interval of those values.
    from scipy.stats import ttest_1samp

    judge, a, b = _study("confidently wrong", 100, np.random.default_rng(11))
    result = ceiling("accuracy", judge.tolist(), _ratings(a, b), scale=SCALE, resamples=200)
    near = lambda x, y: (np.abs(x - y) <= 1).astype(float)
    per_case = (near(judge, a) + near(judge, b)) / 2 - near(a, b)
    assert np.count_nonzero(per_case) >= 10
    reference = ttest_1samp(per_case, 0.0).confidence_interval(0.95)
    difference = result.statistics["within_one"].difference
    assert difference.value == pytest.approx(per_case.mean(), abs=1e-9)
    assert difference.ci95 == pytest.approx([reference.low, reference.high], abs=1e-9)
    assert difference.ci_method.startswith("jackknife t")
    # Fewer than 10 cases more than one point apart: no interval, and why.
    few = ceiling("accuracy", a.tolist(), _ratings(a, a), scale=SCALE, resamples=200)
    within = few.statistics["within_one"]
    assert within.difference.ci95 is None and "too few disagreements" in \
        within.difference.ci_method
