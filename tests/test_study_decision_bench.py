"""Issue 48: the study's decision rule on simulated studies (a quick run of
benchmarks/study_decision.py): the guard under the minimum, the claim shown where B is far
better, and rarely shown where B is worse by exactly the margin."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

np = pytest.importorskip("numpy", reason="needs the stats extra")
pytest.importorskip("scipy", reason="needs the stats extra")

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("study_decision",
                                                  ROOT / "benchmarks" / "study_decision.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def quick(bench):
    return bench.main(["--quick"])


def test_the_population_has_exactly_the_settings_difference(bench):
    """B - A is set exactly in the finite population, for a mean and a pass rate."""
    rng = np.random.default_rng(3)
    for scenario in bench.SCENARIOS:
        pop = bench.population(scenario, "mean", -0.25, rng)
        assert (pop["lb"] - pop["la"]).sum() == -75
        assert set(np.unique(pop["lb"])) <= {1.0, 2.0, 3.0, 4.0, 5.0}
        pop = bench.population(scenario, "pass rate", 0.15, rng)
        passes = (pop["lb"] >= 4).astype(int) - (pop["la"] >= 4).astype(int)
        assert passes.sum() == 45


def test_under_the_minimum_every_verdict_is_too_few_labels(quick):
    assert quick["guard"]
    for shares in quick["guard"].values():
        assert all(share == 1.0 for share in shares.values()), shares


def test_at_the_margin_non_inferiority_is_rarely_shown(quick):
    """Loose (30 replicates a cell): at most 20% where the declared level is 2.5%."""
    assert len(quick["null"]) == 6
    for name, row in quick["null"].items():
        assert all(share <= 0.20 for share in row.values()), (name, row)


def test_a_clear_advantage_is_shown_at_60_pairs(quick):
    row = quick["power"]["mean +0.5, superiority | decent"]
    assert row[60] >= 0.8, row


def test_a_huge_advantage_is_shown_in_most_studies_and_never_a_loss(bench):
    setting = bench.Setting("mean", 1.0, (("superiority", None), ("non-inferiority", 0.25)))
    superiority, non_inferiority = bench.cell(setting, "lenient", 60, 20, seed=5)
    assert superiority["shown"] >= 0.9 and non_inferiority["shown"] >= 0.9
    # And the opposite: a huge loss is never declared non-inferior.
    loss = bench.Setting("mean", -1.0, (("non-inferiority", 0.25),))
    assert bench.cell(loss, "lenient", 60, 20, seed=5)[0]["shown"] == 0.0
