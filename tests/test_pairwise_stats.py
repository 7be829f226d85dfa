"""The pairwise statistics (evaluator.analysis.pairwise.pairwise, bradley_terry, logit): scripted
judges give the figures they must (always-first: no consistency, full position bias;
prefers-longer: a length slope whose CI excludes 0; honest: clean), the logistic fits match
scikit-learn and statsmodels, Bradley-Terry recovers a known order and its CIs cover, and
kappa matches scikit-learn."""

from __future__ import annotations

import pytest

from evaluator.analysis.logit import fit_logit
from evaluator.analysis.pairwise.bradley_terry import Battles, bradley_terry, fit_strengths
from evaluator.analysis.pairwise.pairwise import (
    label_agreement,
    length_bias,
    pairs_from_records,
    position_bias,
    position_consistency,
    reconcile,
    win_rate,
)
from tests.pairwise_world import (
    always_first,
    bt_tournament,
    honest,
    pair_record,
    prefers_longer,
    run_judge,
)

np = pytest.importorskip("numpy")
pytest.importorskip("sklearn")


def figures(records, resamples=1000):
    pairs = pairs_from_records(records, "accuracy")
    return pairs, {
        "win": win_rate(pairs.outcome, resamples=resamples),
        "consistency": position_consistency(pairs.first, pairs.second),
        "position": position_bias(pairs.first, pairs.second, resamples=resamples),
        "length": length_bias(pairs.outcome, pairs.length_a, pairs.length_b,
                              resamples=resamples)}


def covers(ci, value):
    return ci is not None and ci[0] <= value <= ci[1]


def test_reconcile_and_counts():
    assert reconcile("A", "A") == "A" and reconcile("tie", "tie") == "tie"
    assert reconcile("A", "B") == "inconsistent" and reconcile("A", "tie") == "inconsistent"
    win = win_rate(["A", "A", "B", "tie", "inconsistent"])
    # Inconsistent is half a win, like a tie: (2 + 0.5 + 0.5) / 5.
    assert win["value"] == pytest.approx(0.6)
    assert (win["a_wins"], win["b_wins"], win["ties"], win["inconsistent"], win["n"]) == (
        2, 1, 1, 1, 5)
    assert win["ci95"][0] < 0.6 < win["ci95"][1]


def test_pairs_read_in_candidate_terms_whatever_the_orders_sequence():
    record = pair_record("c1", "A", "B")
    record.pairwise.orders.reverse()  # the B-first order stored first
    pairs = pairs_from_records([record, pair_record("c2", "B", "B", (300, 100))], "accuracy")
    assert pairs.first == ["A", "B"] and pairs.second == ["B", "B"]
    assert pairs.outcome == ["inconsistent", "B"]
    assert (pairs.length_a, pairs.length_b) == ([100, 300], [100, 100])
    assert pairs.systems == {"A": "alpha", "B": "beta"}
    failed = pair_record("c3", "A", "A", status="invalid_output")
    assert len(pairs_from_records([failed], "accuracy")) == 0


def test_always_first_judge():
    pairs, f = figures(run_judge(always_first, 200, seed=1))
    assert set(pairs.outcome) == {"inconsistent"}
    assert f["consistency"]["value"] == 0 and f["consistency"]["ci95"][1] < 0.03
    # Every pair the same: the Wilson interval over the 200 pairs, not a zero-width one.
    assert f["position"]["value"] == 1 and f["position"]["ci95"][1] == 1.0
    assert 0.97 < f["position"]["ci95"][0] < 1.0 and "Wilson" in f["position"]["method"]
    assert f["position"]["inconsistent_first_both"] == 200
    assert f["position"]["inconsistent_second_both"] == 0
    assert f["win"]["value"] == 0.5


def test_prefers_longer_judge_has_a_length_slope():
    _, f = figures(run_judge(prefers_longer, 300, seed=2))
    slope = f["length"]["slope"]
    assert slope["value"] > 0 and slope["ci95"][0] > 0, slope
    assert f["length"]["longer_wins"]["value"] > 0.6
    # Its position is clean: the pull is towards length, not the first place.
    assert covers(f["position"]["ci95"], 0.5)


def test_honest_judge_is_clean():
    _, f = figures(run_judge(honest, 300, seed=3, edge=0.5))
    assert covers(f["position"]["ci95"], 0.5)
    assert covers(f["length"]["slope"]["ci95"], 0.0)
    assert f["consistency"]["value"] > 0.5
    # A is better by 0.5 sd: it wins more than half, at any length.
    assert f["win"]["ci95"][0] > 0.5 and f["length"]["controlled_win_rate"]["ci95"][0] > 0.5


def test_honest_length_slope_ci_covers_zero_in_most_replicates():
    hits = 0
    for seed in range(20):
        pairs = pairs_from_records(run_judge(honest, 150, seed=100 + seed), "accuracy")
        result = length_bias(pairs.outcome, pairs.length_a, pairs.length_b, resamples=400,
                             seed=seed)
        hits += covers(result["slope"]["ci95"], 0.0)
    assert hits >= 16, hits


def test_length_model_degenerate_cases_give_notes():
    few = length_bias(["A", "B"] * 4, [1, 2] * 4, [2, 1] * 4)
    assert "at least 10" in few["note"] and few["slope"]["value"] is None
    same = length_bias(["A", "B", "tie"] * 5, [100] * 15, [100] * 15)
    assert "same length difference" in same["note"]
    # The longer always wins: separable, no finite slope.
    separable = length_bias(["A", "B"] * 10, [200, 100] * 10, [100, 200] * 10)
    assert "separable" in separable["note"] and separable["slope"]["ci95"] is None
    assert separable["longer_wins"]["value"] == 1.0


def test_position_bias_without_decisive_verdicts():
    result = position_bias(["tie"] * 5, ["tie"] * 5)
    assert result["value"] is None and result["decisive"] == 0


@pytest.fixture
def logistic_data():
    rng = np.random.default_rng(7)
    n = 400
    x = np.column_stack([np.ones(n), np.tanh(rng.normal(size=n))])
    p = 1 / (1 + np.exp(-(0.3 + 0.9 * x[:, 1])))
    y = np.where(rng.random(n) < 0.2, 0.5, (rng.random(n) < p).astype(float))
    return x, y


def test_logit_matches_statsmodels_and_sklearn(logistic_data):
    sm = pytest.importorskip("statsmodels.api")
    from sklearn.linear_model import LogisticRegression

    x, y = logistic_data
    beta, fitted = fit_logit(x, y, np.ones(len(y)))
    assert fitted
    reference = sm.GLM(y, x, family=sm.families.Binomial()).fit(tol=1e-12).params
    assert np.allclose(beta, reference, atol=1e-6)
    # scikit-learn takes a tie as two half-weight rows, a win and a loss.
    rows = np.vstack([x, x])
    wins = np.r_[np.ones(len(y)), np.zeros(len(y))]
    model = LogisticRegression(C=np.inf, tol=1e-12, max_iter=10_000).fit(
        rows[:, 1:], wins, sample_weight=np.r_[y, 1 - y])
    assert np.allclose(beta, [model.intercept_[0], model.coef_[0, 0]], atol=1e-6)


def test_logit_batch_equals_one_fit_per_weighting(logistic_data):
    x, y = logistic_data
    rng = np.random.default_rng(0)
    counts = rng.multinomial(len(y), np.full(len(y), 1 / len(y)), size=5).astype(float)
    batch, fitted = fit_logit(x, y, counts)
    assert fitted.all()
    for row, beta in zip(counts, batch):
        assert np.allclose(fit_logit(x, y, row)[0], beta, atol=1e-9)


TRUE = {"w": 0.8, "x": 0.3, "y": -0.2, "z": -0.9}


def _battles(games):
    return [Battles(a, b, outcomes) for (a, b), outcomes in games.items()]


def test_bradley_terry_matches_a_reference_fit():
    sm = pytest.importorskip("statsmodels.api")
    from sklearn.linear_model import LogisticRegression

    games = bt_tournament(TRUE, 60, seed=5)
    games[("w", "z")][:6] = ["tie"] * 6
    names = sorted(TRUE)
    strengths = fit_strengths(_battles(games), names)
    assert abs(sum(strengths)) < 1e-9
    # statsmodels: the same model with the first system anchored at 0, then centred.
    rows, y = [], []
    for (a, b), outcomes in games.items():
        row = [0.0] * len(names)
        row[names.index(a)], row[names.index(b)] = 1.0, -1.0
        for o in outcomes:
            rows.append(row[1:])
            y.append({"A": 1.0, "B": 0.0, "tie": 0.5}[o])
    params = sm.GLM(np.array(y), np.array(rows), family=sm.families.Binomial()).fit(
        tol=1e-12).params
    full = np.r_[0.0, params]
    assert np.allclose(strengths, full - full.mean(), atol=1e-6)
    # Chatbot Arena's fit: +1/-1 columns for every system, no intercept, no penalty,
    # a tie as two half-weight rows.
    design, wins, weight = [], [], []
    for (a, b), outcomes in games.items():
        row = [0.0] * len(names)
        row[names.index(a)], row[names.index(b)] = 1.0, -1.0
        for o in outcomes:
            value = {"A": 1.0, "B": 0.0, "tie": 0.5}[o]
            design += [row, row]
            wins += [1, 0]
            weight += [value, 1 - value]
    keep = np.array(weight) > 0
    model = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10_000)
    model.fit(np.array(design)[keep], np.array(wins)[keep], sample_weight=np.array(weight)[keep])
    arena = model.coef_[0] - model.coef_[0].mean()
    assert np.allclose(strengths, arena, atol=1e-5)


def test_bradley_terry_recovers_the_order_and_its_cis_cover():
    result = bradley_terry(_battles(bt_tournament(TRUE, 300, seed=11)), resamples=1000)
    assert [s["name"] for s in result["systems"]] == ["w", "x", "y", "z"]
    assert [s["rank"] for s in result["systems"]] == [1, 2, 3, 4]
    covered = total = 0
    for seed in range(40):
        result = bradley_terry(_battles(bt_tournament(TRUE, 80, seed=1000 + seed)),
                               resamples=300, seed=seed)
        for system in result["systems"]:
            total += 1
            covered += covers(system["ci95"], TRUE[system["name"]])
    # 160 intervals: 95% coverage gives 152 +- 5.5 (sd 2.8).
    assert 0.88 <= covered / total <= 0.99, covered / total


def test_bradley_terry_degenerate_cases():
    unbeaten = {("w", "x"): ["A"] * 10, ("x", "y"): ["A", "B"] * 5, ("w", "y"): ["A"] * 10}
    assert "every battle" in bradley_terry(_battles(unbeaten))["note"]
    apart = {("w", "x"): ["A", "B"] * 5, ("y", "z"): ["A", "B"] * 5}
    result = bradley_terry(_battles(apart))
    assert "do not connect" in result["note"] and result["systems"] == []


def test_kappa_matches_sklearn_and_perfect_labels_give_one():
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(3)
    outcome = list(rng.choice(["A", "B", "tie", "inconsistent"], size=120))
    labels = list(rng.choice(["A", "B", "tie"], size=120))
    judge = ["tie" if o == "inconsistent" else o for o in outcome]
    result = label_agreement(outcome, labels, resamples=500)
    assert result["kappa"]["value"] == pytest.approx(cohen_kappa_score(judge, labels), abs=1e-12)
    assert covers(result["kappa"]["ci95"], result["kappa"]["value"])
    assert result["agreement"]["agreed"] == sum(j == v for j, v in zip(judge, labels))
    perfect = label_agreement(outcome, judge, resamples=200)
    assert perfect["kappa"]["value"] == 1.0 and perfect["agreement"]["value"] == 1.0
    # Every resample gives kappa 1: [1, 1] is a point, not a 95% CI, and the method says so.
    assert perfect["kappa"]["ci95"] is None
    assert "no interval: every resample gave the same value" in perfect["kappa"]["method"]


def test_all_ties_give_a_flat_length_model_with_no_interval():
    """Every pair a tie (or inconsistent): the estimate is exactly 0 slope and a 0.5 win
    rate at equal lengths; the solver's path to an optimum it starts at must not read as a
    failed fit. Every resample gives the same fit: no CI (a point), and the method says
    why."""
    import numpy as np

    rng = np.random.default_rng(3)
    lengths_a = rng.integers(10, 500, 40).tolist()
    lengths_b = rng.integers(10, 500, 40).tolist()
    result = length_bias(["inconsistent"] * 20 + ["tie"] * 20, lengths_a, lengths_b,
                         resamples=200)
    assert result["note"] is None
    assert result["slope"]["value"] == pytest.approx(0, abs=1e-9)
    assert result["slope"]["ci95"] is None and result["controlled_win_rate"]["ci95"] is None
    assert "no interval: every pair has the same outcome" in result["slope"]["method"]
    assert result["controlled_win_rate"]["value"] == pytest.approx(0.5)


def test_bradley_terry_with_only_ties_shows_no_point_intervals():
    """Every battle a tie: each system's strength is 0 in every resample, and was shown as
    "0.000 [0.000, 0.000]"; a point is not a 95% CI."""
    ties = {("w", "x"): ["tie"] * 6, ("x", "y"): ["tie"] * 6, ("w", "y"): ["tie"] * 6}
    result = bradley_terry(_battles(ties), resamples=200)
    assert [s["ci95"] for s in result["systems"]] == [None, None, None]
    assert "no interval for w, x, y" in result["note"]
