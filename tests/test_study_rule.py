"""The study's decision rule (issue 48, item 3): the claim is shown exactly when the whole
95% CI lies beyond the threshold on the better side; under the minimum no verdict; the
sentence's numbers are the figures given, written as the tables write them."""

from __future__ import annotations

import re

import pytest

from evaluator.analysis.minimum import MIN_LABELS_DIFFERENCE
from evaluator.study.rule import Rule, decide

NUMBER = re.compile(r"[-+]?\d+\.\d+")


def rule(kind="non-inferiority", better="higher", margin=0.25):
    return Rule(kind, better, margin if kind == "non-inferiority" else None, "mean accuracy",
                "Current", "New")


@pytest.mark.parametrize(("kind", "better", "ci", "verdict"), [
    ("non-inferiority", "higher", (-0.24, 0.5), "shown"),
    ("non-inferiority", "higher", (-0.25, 0.5), "not shown"),  # at the margin: not beyond
    ("non-inferiority", "higher", (-0.26, 0.5), "not shown"),
    ("non-inferiority", "lower", (-0.5, 0.24), "shown"),
    ("non-inferiority", "lower", (-0.5, 0.26), "not shown"),
    ("superiority", "higher", (0.01, 0.5), "shown"),
    ("superiority", "higher", (0.0, 0.5), "not shown"),
    ("superiority", "higher", (-0.01, 0.5), "not shown"),
    ("superiority", "lower", (-0.5, -0.01), "shown"),
    ("superiority", "lower", (-0.5, 0.01), "not shown"),
])
def test_the_claim_is_shown_exactly_when_the_ci_lies_beyond_the_threshold(kind, better, ci,
                                                                         verdict):
    estimate = (ci[0] + ci[1]) / 2
    assert decide(rule(kind, better), estimate, ci, 30, 50).verdict == verdict


def test_the_sentence_carries_the_figures_given_and_the_margin():
    d = decide(rule(), 0.73, (0.38, 1.09), 30, 50)
    assert d.sentence == ("New is non-inferior to Current on mean accuracy: New - Current = "
                          "+0.730 (95% CI 0.380 to 1.090), above the pre-declared margin "
                          "-0.250.")
    assert [float(x) for x in NUMBER.findall(d.sentence)] == [0.73, 0.38, 1.09, -0.25]


def test_not_shown_says_where_the_ci_reaches_and_how_many_more_labels():
    d = decide(rule(), 0.1, (-0.3, 0.5), 30, 200)
    assert d.verdict == "not shown"
    assert "the CI reaches -0.300, below the pre-declared margin -0.250" in d.sentence
    # n (1.43 x 0.4 / 0.35)^2 - n with n = 30: 50.2 -> 51 more.
    assert d.label_more == 51
    assert "about 51 more labelled cases per system" in d.sentence


def test_an_estimate_on_the_wrong_side_of_the_margin_promises_no_number_of_labels():
    d = decide(rule(), -0.3, (-0.6, 0.0), 30, 200)
    assert d.verdict == "not shown" and d.label_more is None
    assert "more labels would not be expected to show it" in d.sentence


def test_under_the_minimum_no_verdict_whatever_the_interval():
    d = decide(rule(), 2.0, (1.5, 2.5), MIN_LABELS_DIFFERENCE - 1, 50)
    assert d.verdict == "too few labels"
    assert d.sentence.startswith(f"Too few labels to decide: {MIN_LABELS_DIFFERENCE - 1} "
                                 f"labelled, at least {MIN_LABELS_DIFFERENCE} needed")
    assert "non-inferior" not in d.sentence and "better" not in d.sentence
    assert decide(rule(), 2.0, (1.5, 2.5), MIN_LABELS_DIFFERENCE, 50).verdict == "shown"


def test_no_interval_is_no_verdict():
    assert decide(rule(), 0.5, None, 40, 50).verdict == "too few labels"
