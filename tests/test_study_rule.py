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


def test_not_shown_says_where_the_ci_reaches_and_what_a_new_study_would_need():
    d = decide(rule(), 0.1, (-0.3, 0.5), 30, 200)
    assert d.verdict == "not shown"
    assert "the CI reaches -0.300, below the pre-declared margin -0.250" in d.sentence
    # n (1.43 x 0.4 / 0.35)^2 with n = 30: 80.2 -> about 81 per system in a new study (not
    # more labels on this one: labelling on until the CI clears breaks the 2.5% level).
    assert d.label_more == 81
    assert "a new study would need about 81 labelled cases per system" in d.sentence
    assert "this one is not extended" in d.sentence
    capped = decide(rule(), 0.1, (-0.3, 0.5), 30, 60)
    assert capped.label_more is None and "more than the 60 cases judged" in capped.sentence


def test_an_estimate_on_the_wrong_side_of_the_margin_promises_no_study_size():
    d = decide(rule(), -0.3, (-0.6, 0.0), 30, 200)
    assert d.verdict == "not shown" and d.label_more is None
    assert "no study of this size or larger would be expected to show it" in d.sentence


def test_an_end_that_prints_as_the_threshold_is_given_to_six_decimals():
    shown = decide(rule("superiority"), 0.3, (0.0003, 0.6), 30, 200)
    assert shown.verdict == "shown"
    assert "(95% CI 0.000 to 0.600), above 0 (its lower end to six decimals: 0.000300)." \
        in shown.sentence
    not_shown = decide(rule(), 0.2, (-0.2504, 0.6), 30, 200)
    assert not_shown.verdict == "not shown"
    assert ("the CI reaches -0.250 (its lower end to six decimals: -0.250400), below the "
            "pre-declared margin -0.250") in not_shown.sentence


def test_under_the_minimum_no_verdict_whatever_the_interval():
    d = decide(rule(), 2.0, (1.5, 2.5), MIN_LABELS_DIFFERENCE - 1, 50)
    assert d.verdict == "too few labels"
    assert d.sentence.startswith(f"Too few labels to decide: {MIN_LABELS_DIFFERENCE - 1} "
                                 f"labelled, at least {MIN_LABELS_DIFFERENCE} needed")
    assert "non-inferior" not in d.sentence and "better" not in d.sentence
    assert decide(rule(), 2.0, (1.5, 2.5), MIN_LABELS_DIFFERENCE, 50).verdict == "shown"


def test_no_interval_is_no_verdict_and_says_why():
    d = decide(rule(), 0.0, None, 40, 50, why_no_ci="every labelled pair agrees")
    assert d.verdict == "no interval"
    assert d.sentence == ("No verdict: the difference New - Current on mean accuracy has no "
                          "interval from its 40 labelled cases: every labelled pair agrees; "
                          "nothing is decided.")
