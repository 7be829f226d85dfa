"""Several verdicts per case: reduction rules and agreement across raters."""

from __future__ import annotations

import pytest

from evaluator.analysis.panel import (
    combine_verdicts,
    rater_agreement,
    reduce_verdicts,
    reduction_of,
)
from evaluator.data.results import ResultRecord
from evaluator.rubrics.load import load_rubric

krippendorff = pytest.importorskip("krippendorff", reason="needs the stats extra")

TRIAL = load_rubric("trial_eligibility")
ECG = load_rubric("ecg_interpretation")  # items criteria only, with aggregates


def _trial(h, a, c, text="why"):
    return {"hallucination": h, "hallucination_reasoning": text, "accuracy": a,
            "accuracy_reasoning": text, "clarity": c, "clarity_reasoning": text}


def test_median_mean_and_majority_per_integer_criterion():
    verdicts = [(_trial(1, 5, 2, "first"), None), (_trial(2, 4, 2, "second"), None),
                (_trial(4, 4, 5, "third"), None), (_trial(2, 1, 5, "fourth"), None)]
    median, _ = reduce_verdicts(TRIAL, verdicts, "median")
    assert (median["hallucination"], median["accuracy"], median["clarity"]) == (2, 4, 3.5)
    mean, _ = reduce_verdicts(TRIAL, verdicts, "mean")
    assert (mean["hallucination"], mean["accuracy"], mean["clarity"]) == (2.25, 3.5, 3.5)
    majority, _ = reduce_verdicts(TRIAL, verdicts, "majority")
    # clarity ties between 2 and 5: the lower median of the tied scores, a score some gave
    assert (majority["hallucination"], majority["accuracy"], majority["clarity"]) == (2, 4, 2)
    # free text is the first verdict's, never blended
    assert median["accuracy_reasoning"] == mean["clarity_reasoning"] == "first"
    assert isinstance(median["hallucination"], int)


def test_aggregates_are_reduced_from_each_verdict():
    verdicts = [({}, {"score": 1.0, "n": 2.0}), ({}, {"score": 3.0, "n": None}),
                ({}, {"score": 8.0, "n": 4.0})]
    _, medians = reduce_verdicts(ECG, [(dict(v[0]), v[1]) for v in verdicts], "median")
    assert medians == {"score": 3.0, "n": 3.0}
    _, means = reduce_verdicts(ECG, verdicts, "majority")
    assert means == {"score": 4.0, "n": 3.0}  # aggregates: mean unless median is asked for
    assert reduction_of("majority") == {"integer": "majority", "aggregates": "mean",
                                        "other": "first"}
    with pytest.raises(ValueError, match="unknown reduction 'mode'"):
        reduction_of("mode")


def _record(status, scores=None, reason=None, **extra):
    return ResultRecord(case_id="c1", rubric="trial_eligibility", judge="j", status=status,
                        scores=scores, reason=reason, input_line=3, **extra)


def test_combine_keeps_every_verdict_and_names_the_failing_one():
    ok = _record("ok", _trial(2, 3, 4), completion_tokens=10)
    bad = _record("invalid_output", reason="verdict failed validation: x", raw_output="{",
                  completion_tokens=7)
    combined = combine_verdicts(TRIAL, [ok, bad, ok], "median", "samples", [0, 1, 2])
    assert combined.status == "invalid_output" and combined.scores is None
    assert combined.reason == "sample 2 of 3: verdict failed validation: x"
    assert [v.status for v in combined.samples] == ["ok", "invalid_output", "ok"]
    assert combined.samples[1].raw_output == "{" and combined.raw_output is None
    assert combined.completion_tokens == 27 and combined.input_line == 3

    jury = combine_verdicts(TRIAL, [ok, _record("ok", _trial(4, 5, 4))], "mean", "jury",
                            ["a", "b"], judge="jury(a,b)")
    assert jury.status == "ok" and jury.judge == "jury(a,b)"
    assert jury.scores["hallucination"] == 3 and jury.scores["accuracy"] == 4
    assert [v.judge for v in jury.jury] == ["a", "b"] and jury.samples is None
    assert jury.reduction["integer"] == "mean"

    # an input error is the case's own problem: its reason is kept as is
    input_error = _record("input_error", reason="cases.jsonl:3: field 'x' is missing")
    assert combine_verdicts(TRIAL, [input_error, input_error], "median", "jury", ["a", "b"]
                            ).reason == "cases.jsonl:3: field 'x' is missing"


def test_rater_agreement_matches_krippendorff_and_treats_failures_as_missing():
    import numpy as np

    table = [[(_trial(1, 2, 3), None), (_trial(1, 3, 3), None), (_trial(2, 2, 3), None)],
             [(_trial(4, 4, 5), None), (_trial(5, 4, 5), None), (None, None)],
             [(_trial(2, 1, 1), None), (_trial(2, 1, 2), None), (_trial(2, 1, 1), None)],
             [(_trial(5, 5, 4), None), (_trial(5, 4, 4), None), (_trial(5, 5, 4), None)]]
    result = rater_agreement(TRIAL, table)
    expected = krippendorff.alpha(
        reliability_data=np.array([[1, 4, 2, 5], [1, 5, 2, 5], [2, np.nan, 2, 5]]),
        level_of_measurement="ordinal")
    assert result["alpha"]["hallucination"] == pytest.approx(expected)
    assert result["cases"] == 4 and result["complete_cases"] == 3
    # clarity: case 0 (3,3,3) and case 3 (4,4,4) unanimous, case 2 not; case 1 incomplete
    assert result["unanimous"]["clarity"] == pytest.approx(2 / 3)


def test_alpha_is_none_when_undefined():
    same = [[(_trial(3, 3, 3), None), (_trial(3, 3, 3), None)]] * 5
    assert rater_agreement(TRIAL, same)["alpha"] == {"hallucination": None, "accuracy": None,
                                                     "clarity": None}
    one_case = [[(_trial(1, 2, 3), None), (_trial(4, 5, 1), None)]]
    assert rater_agreement(TRIAL, one_case)["alpha"]["accuracy"] is None
