"""p-values are shown one way everywhere (issue 38 item 4): two significant digits, and
``<1e-4`` below 1e-4 (never ``0.000``), in the terminal's text and in the HTML report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluator.analysis.intervals import format_p
from evaluator.report.html import environment

TEMPLATES = Path(__file__).resolve().parent.parent / "evaluator" / "report" / "templates"


@pytest.mark.parametrize(("p", "shown"), [
    (None, "-"), (float("nan"), "-"), (0.0, "<1e-4"), (3e-9, "<1e-4"), (9.99e-5, "<1e-4"),
    (1e-4, "0.0001"), (0.0123, "0.012"), (0.5, "0.5"), (1.0, "1"),
])
def test_a_p_value_is_two_significant_digits_or_below_1e_4(p, shown):
    assert format_p(p) == shown


def test_the_report_shows_a_tiny_p_as_the_terminal_does():
    page = environment().from_string("<td>{{ p | pval }}</td>").render(p=2e-12)
    assert page == "<td>&lt;1e-4</td>"  # escaped in the page, "<1e-4" on screen


def test_no_report_template_formats_a_p_value_as_a_plain_number():
    """Every ``.p`` a template shows goes through ``pval`` (``num(3)`` printed 0.000)."""
    for template in TEMPLATES.glob("*.j2"):
        shown = re.findall(r"\{\{\s*([\w.]*\.p)\s*\|\s*(\w+)", template.read_text())
        assert all(f == "pval" for _, f in shown), (template.name, shown)
        assert not re.search(r"\.p\s*\|\s*num", template.read_text()), template.name


def test_every_p_beside_a_ci_of_its_own_method_agrees_with_it_about_0():
    """The p-values printed next to a CI that comes from the same statistic: estimate's
    differences (normal, a pass rate's clipped to [-1, 1]) and the subgroups' Welch
    differences. p < 0.05 exactly when the 95% CI excludes 0, on random inputs near the
    boundary. (The verbosity correlation's: tests/test_diagnostics.py. Agreement's Spearman
    and Kendall p beside a bootstrap CI can disagree: a warning says so.)"""
    np = pytest.importorskip("numpy", reason="needs the stats extra")
    from evaluator.analysis.estimate import ppi
    from evaluator.analysis.intervals import welch_diff_ci

    rng = np.random.default_rng(3)
    checked = significant = 0
    for _ in range(3000):
        se_a, se_b = rng.uniform(0.01, 0.3, 2)
        gap = rng.normal(0, 1.96 * float(np.hypot(se_a, se_b)))
        a = ppi.Estimate(0.5, float(se_a), None, None, "")
        b = ppi.Estimate(0.5 + gap, float(se_b), None, None, "")
        for figure in (ppi.independent_difference(a, b),
                       ppi.rate_difference(ppi.independent_difference(a, b))):
            low, high = figure.ci95
            assert (figure.p < 0.05) == (not low <= 0 <= high)
            checked += 1
            significant += figure.p < 0.05
    for _ in range(600):
        n = int(rng.integers(2, 30))
        x = rng.integers(1, 6, n).tolist()
        y = (rng.integers(1, 6, int(rng.integers(2, 30))) + rng.normal(0, 0.5)).tolist()
        figure = welch_diff_ci(x, y)
        if figure["ci95"] is None:
            continue
        low, high = figure["ci95"]
        assert (figure["p"] < 0.05) == (not low <= 0 <= high)
        checked += 1
    assert checked > 6000 and 0.2 < significant / 6000 < 0.8
