"""Aggregates as GEM's Table 1 computes them, and the range of values each can take."""

from __future__ import annotations

import math
from itertools import combinations_with_replacement

import pytest

from evaluator.rubrics.aggregate import (
    RangeNotDerivable,
    aggregate_range,
    aggregate_value,
    compute_aggregates,
)
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import Aggregate, ItemsCriterion


def _items(*scores):
    return [{"Score": s, "Explanation": "x"} for s in scores]


def test_ecg_aggregates_follow_gem_table_1():
    rubric = load_rubric("ecg_interpretation")
    verdict = {
        "DiagnosisAccuracy": _items(2, 0, 1, 0),          # 2 of 4 above 0 -> 50
        "AnalysisCompleteness": _items(1, 1, 0),          # sum 2
        "AnalysisRelevance": _items(2, 2, 1),             # sum 5
        "LeadAssessmentCoverage": _items(*[1] * 12),      # min(12,12)/12*100 = 100
        "LeadAssessmentAccuracy": _items(*[2] * 6 + [1] * 6),  # 18/24*100 = 75
        "GroundedECGUnderstanding": _items(80),
        "EvidenceBasedReasoning": _items(50),
        "RealisticDiagnosticProcess": _items(100),
    }
    assert compute_aggregates(rubric, verdict) == pytest.approx({
        "DiagnosisAccuracy": 50.0, "AnalysisCompleteness": 2.0, "AnalysisRelevance": 5.0,
        "LeadAssessmentCoverage": 100.0, "LeadAssessmentAccuracy": 75.0,
        "GroundedECGUnderstanding": 80.0, "EvidenceBasedReasoning": 50.0,
        "RealisticDiagnosticProcess": 100.0})


def test_coverage_is_share_of_twelve_leads():
    rubric = load_rubric("ecg_interpretation").model_copy()
    verdict = {key.key: _items(1) for key in rubric.output}
    verdict["LeadAssessmentCoverage"] = _items(*[1] * 6)
    assert compute_aggregates(rubric, verdict)["LeadAssessmentCoverage"] == pytest.approx(50.0)


def test_scalar_rubrics_have_no_aggregates():
    assert compute_aggregates(load_rubric("pathology_report"), {}) == {}


def _brute_range(rubric, agg):
    """The lowest and highest value of ``agg`` over every verdict the rubric allows for its
    key (each multiset of item scores, with every allowed number of items)."""
    field = next(f for f in rubric.output if f.key == agg.of)
    counts = (range(field.min_items, field.max_items + 1) if isinstance(field, ItemsCriterion)
              else [1])
    values = [value for k in counts
              for scores in combinations_with_replacement(map(float, field.allowed), k)
              if (value := aggregate_value(agg, scores)) is not None]
    return min(values), max(values)


@pytest.mark.parametrize("declared", [
    {"reduce": "sum"}, {"reduce": "mean"}, {"reduce": "count"}, {"reduce": "min"},
    {"reduce": "max"}, {"reduce": "share_above", "threshold": 1},
    {"reduce": "share_above", "threshold": 5},  # no score above it: always 0
    {"reduce": "share_above", "threshold": -1, "scale": 100},  # every score above: always 100
    {"reduce": "sum", "cap": 7, "divide_by": 12, "scale": 100},
    {"reduce": "sum", "scale": -2},  # a negative factor reverses the ends
    {"reduce": "mean", "divide_by": -4},
    {"reduce": "max", "cap": -1},  # a cap below every score: one value
])
@pytest.mark.parametrize("min_items", [0, 1, 3])
@pytest.mark.parametrize("values", [[0, 1, 2], [-1, 0, 3]])
def test_an_aggregates_range_is_the_lowest_and_highest_value_it_takes(declared, min_items,
                                                                      values):
    base = load_rubric("ecg_interpretation")
    field = next(f for f in base.output if f.key == "AnalysisRelevance")
    field = field.model_copy(update={"min_items": min_items, "max_items": 6,
                                     "values": values})
    agg = Aggregate.model_validate({"name": "x", "of": field.key, **declared})
    rubric = base.model_copy(update={"output": [field], "aggregates": [agg]})
    assert aggregate_range(rubric, agg) == pytest.approx(_brute_range(rubric, agg))


def test_an_aggregate_of_an_integer_criterion_has_its_scales_range():
    rubric = load_rubric("trial_eligibility")
    for declared, expected in [({"reduce": "mean", "divide_by": 5, "scale": 100}, (20, 100)),
                               ({"reduce": "share_above", "threshold": 3}, (0, 1)),
                               ({"reduce": "count"}, (1, 1)),
                               ({"reduce": "sum", "scale": -1}, (-5, -1))]:
        agg = Aggregate.model_validate({"name": "x", "of": "accuracy", **declared})
        assert aggregate_range(rubric, agg) == pytest.approx(expected)
        assert aggregate_range(rubric, agg) == pytest.approx(_brute_range(rubric, agg))


@pytest.mark.parametrize("odd", [{"scale": math.inf}, {"divide_by": math.nan},
                                 {"cap": math.nan}])
def test_a_range_that_cannot_be_derived_says_so(odd):
    rubric = load_rubric("trial_eligibility")
    agg = Aggregate.model_validate({"name": "x", "of": "accuracy", "reduce": "sum", **odd})
    with pytest.raises(RangeNotDerivable, match=f"its {next(iter(odd))} is not a finite"):
        aggregate_range(rubric, agg)


def test_a_range_that_overflows_from_finite_settings_says_so():
    """Finite but extreme settings (a scale of 1e308 on a sum) overflow to infinity: no
    range to check a gate or margin against (review finding: any margin passed)."""
    rubric = load_rubric("trial_eligibility")
    agg = Aggregate.model_validate({"name": "x", "of": "accuracy", "reduce": "sum",
                                    "scale": 1e308})
    with pytest.raises(RangeNotDerivable, match="its range overflows a number"):
        aggregate_range(rubric, agg)
