"""Aggregates as GEM's Table 1 computes them."""

from __future__ import annotations

import pytest

from evaluator.rubrics.aggregate import compute_aggregates
from evaluator.rubrics.load import load_rubric


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
