"""Issue 47: the small-sample intervals keep their 95% at 10 labels where the normal ones did
not (a small run of benchmarks/small_n_coverage.py), and the t quantile is scipy's."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="needs the stats extra")
stats = pytest.importorskip("scipy.stats", reason="needs the stats extra")

from evaluator.analysis.estimate import ppi
from evaluator.analysis.intervals import Z95, t_p_value, t_quantile

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("small_n_coverage",
                                                  ROOT / "benchmarks" / "small_n_coverage.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_t_quantile_and_p_value_are_scipys():
    assert t_quantile(9) == pytest.approx(stats.t.ppf(0.975, 9), rel=1e-12)
    assert t_quantile(9) == pytest.approx(2.2621571627, abs=1e-9)  # tables: t_{0.975, 9}
    assert t_quantile(8.4) == pytest.approx(stats.t.ppf(0.975, 8.4), rel=1e-12)
    assert t_quantile(None) == Z95
    assert t_p_value(2.2621571627, 9) == pytest.approx(0.05, abs=1e-9)
    # Ten labels: the labels-only interval is mean +- t_9 sd(ddof 1) / sqrt(10).
    y = np.array([1.0, 2, 2, 3, 3, 3, 4, 4, 5, 5])
    ci = ppi.classical_mean(y).ci95
    half = stats.t.ppf(0.975, 9) * y.std(ddof=1) / np.sqrt(10)
    assert ci == pytest.approx([y.mean() - half, y.mean() + half], abs=1e-12)
    # Welch-Satterthwaite: two equal parts on 9 df each give 18.
    assert ppi.satterthwaite_df([(1.0, 9.0), (1.0, 9.0)]) == pytest.approx(18.0)


@pytest.mark.parametrize("scenario", ["decent", "lenient", "scale_0_10"])
def test_ten_labels_on_a_random_sheet_cover_and_the_normal_interval_did_not(bench, scenario):
    """200 replicates at n = 10: t's PPI++ and labels-only intervals cover >= 90% (Monte
    Carlo SE about 1.5 points at 95%); the normal quantile on the same estimates covered
    less, by at least a point, in each (its 87-92% is what docs/statistics.md quoted)."""
    cells = bench.cell_figures(scenario, 10, 200, seed=1)
    for what in ("labels only", "PPI++"):
        cell = cells[("random", what)]
        assert cell["coverage"] >= 0.90, (what, cell)
    ppi_cell = cells[("random", "PPI++")]
    # (The jackknife SE of a tuned lambda, issue 47, lifts the normal quantile's too.)
    assert ppi_cell["normal"] <= ppi_cell["coverage"], ppi_cell


def test_the_minimum_is_read_with_the_monte_carlo_error_over_every_scenario(bench):
    """The benchmark's minimum: the smallest n at and above which no random-sheet cell, in
    any scenario, covers under 93% beyond the Monte Carlo error; a cell above the band (too
    wide) and an active sheet's cell do not count against it."""
    key, rate = ("random", "PPI++"), ("random", "rate B - A paired")
    active = ("active", "PPI++")

    def cell(coverage):
        return {"coverage": coverage}

    table = {("decent", 10): {key: cell(0.91), rate: cell(1.0), active: cell(0.5)},
             ("decent", 20): {key: cell(0.912), rate: cell(1.0), active: cell(0.5)},
             ("decent", 30): {key: cell(0.95), rate: cell(0.99), active: cell(None)},
             ("edge", 30): {key: cell(0.96), rate: cell(1.0), active: cell(0.5)}}
    slack = bench.monte_carlo_slack(500)
    assert slack == pytest.approx(0.0191, abs=1e-4)
    assert bench.minimum(table, [key, rate, active], slack) == 20  # 91.2% is within 1.9
    assert bench.minimum(table, [key, rate, active]) == 30  # strictly: only from 30
    table[("edge", 60)] = {key: cell(0.90), rate: cell(1.0), active: cell(0.5)}
    assert bench.minimum(table, [key], slack) is None  # a miss above undoes every n below


def test_system_b_differs_from_a_both_ways_within_the_scale(bench):
    """B's label is A's + 1 on B_UP of cases and - 1 on B_DOWN, clipped to the scale: the
    paired differences have discordant pairs on both sides (issue 47's review: B was never
    worse than A, so the paired rate difference had almost none)."""
    s = bench.systems("decent", np.random.default_rng(3), 200_000)
    step = s["lb"] - s["la"]
    assert set(np.unique(step)) <= {-1.0, 0.0, 1.0}
    assert s["lb"].min() >= 1 and s["lb"].max() <= 5
    # Unclipped where A is 2-4: the shares are B_UP and B_DOWN.
    middle = (s["la"] >= 2) & (s["la"] <= 4)
    assert np.mean(step[middle] == 1) == pytest.approx(bench.B_UP, abs=0.01)
    assert np.mean(step[middle] == -1) == pytest.approx(bench.B_DOWN, abs=0.01)
    truth = bench.truths("decent")
    assert truth["A only"] > 0.02 and truth["B only"] > truth["A only"]


def test_a_cell_never_runs_into_the_next_nor_shows_a_figure_from_a_few_draws(bench, capsys):
    full = {"coverage": 0.95, "width": 0.5, "missing": 0.0}
    assert bench._cell({"coverage": None, "width": None, "missing": 1.0}) == "withheld"
    assert bench._cell({"coverage": 1.0, "width": 1.5, "missing": 0.998}) == "\u2014 (99.8% no CI)"
    almost_all = {"coverage": 1.0, "width": 1.5, "missing": 0.9996}
    assert bench._cell(almost_all) == "\u2014 (>99.9% no CI)"
    assert bench._cell({**full, "missing": 0.002}) == "95.0 / 0.500 (<1% no CI)"
    assert bench._cell({**full, "coverage": 0.9, "missing": 0.46}) == "90.0 / 0.500 (46% no CI) *"
    assert not bench.has_figure({"coverage": 1.0, "missing": 0.995})
    bench._print_rows(["n 10", "n 15"], [("active PPI++", ["withheld",
                                                           "100.0 / 1.501 (98% no CI) *"])])
    row = capsys.readouterr().out.splitlines()[1]
    assert "withheld  " in row and "withheld1" not in row


def test_the_bias_benchmarks_intervals_are_the_methods_they_name():
    """benchmarks/bias_interval.py: on symmetric differences Johnson's shift is 0 (the t
    interval), and t is Student's; on right-skewed ones Johnson's moves up; the
    bootstrap-t is an interval about the mean."""
    spec = importlib.util.spec_from_file_location("bias_interval",
                                                  ROOT / "benchmarks" / "bias_interval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(0)
    d = np.array([-2.0, -1, 0, 0, 1, 2])
    got = module.intervals(d, rng)
    half = stats.t.ppf(0.975, 5) * d.std(ddof=1) / np.sqrt(6)
    assert got["t"] == pytest.approx((-half, half), abs=1e-12)
    assert got["Johnson"] == pytest.approx(got["t"], abs=1e-12)
    skewed = np.array([0.0] * 16 + [3, 4, 3, 4])
    got = module.intervals(skewed, rng)
    assert got["Johnson"][0] > got["t"][0] and got["Johnson"][1] > got["t"][1]
    low, high = got["bootstrap-t"]
    assert low < skewed.mean() < high
