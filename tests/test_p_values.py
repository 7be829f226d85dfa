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
