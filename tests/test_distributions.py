"""Score distributions on records (issue 16): record_version 2 with old files still read,
the summary numbers (expected score, confidence, entropy), and the expected-score view."""

from __future__ import annotations

import json
import math

import pytest

from evaluator.analysis.distributions import expected_verdict, summarize, verdict_view
from evaluator.data.results import RECORD_VERSION, ResultRecord, ResultWriter, read_results
from evaluator.judges.backends.fake import FAKE_CONFIDENCE, FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.score_paths import score_slots, value_offsets
from evaluator.run.runner import evaluate
from tests.conftest import run_options, write_jsonl


def test_summary_numbers_of_a_distribution():
    dist = summarize({1: 2.0, 2: 1.0, 5: 1.0}, 1)  # normalised here
    assert dist.probabilities == {"1": 0.5, "2": 0.25, "5": 0.25}
    assert dist.expected == pytest.approx(0.5 + 0.5 + 1.25)
    assert dist.confidence == 0.5
    assert dist.entropy == pytest.approx(1.5)  # bits
    assert summarize({3: 1.0}, 3).entropy == 0.0
    assert summarize({1: 0.5, 2: 0.5}, 1.5).confidence is None
    with pytest.raises(ValueError):
        summarize({1: 0.0}, 1)


def test_version_1_records_still_load_and_new_ones_are_version_2(tmp_path):
    path = tmp_path / "results.jsonl"
    old = {"record_version": 1, "case_id": "a", "rubric": "trial_eligibility", "judge": "j",
           "status": "ok", "scores": {"hallucination": 5, "hallucination_reasoning": "e",
                                      "accuracy": 4, "accuracy_reasoning": "e",
                                      "clarity": 3, "clarity_reasoning": "e"}}
    path.write_text(json.dumps(old) + "\n", encoding="utf-8")
    with ResultWriter(path) as writer:
        writer.write(ResultRecord(case_id="b", rubric="trial_eligibility", judge="j",
                                  status="ok", scores=old["scores"],
                                  distributions={"accuracy": summarize({4: 0.9, 5: 0.1}, 4)}))
    first, second = read_results(path)
    assert first.record_version == 1 and first.distributions is None
    assert second.record_version == RECORD_VERSION == 2
    assert second.distributions["accuracy"].confidence == pytest.approx(0.9)
    rubric = load_rubric("trial_eligibility")
    assert verdict_view(rubric, first, "argmax")[0]["accuracy"] == 4
    assert verdict_view(rubric, first, "expected") is None  # no distributions: left out


def test_value_offsets_point_at_every_score_and_refuse_other_text():
    rubric = load_rubric("ecg_interpretation")
    item = {"Score": 100, "Explanation": 'a "quoted" \\ word'}
    keys = [f.key for f in rubric.output]
    scores = {k: [dict(item, Score=80)] if k == keys[5] else [item, dict(item, Score=0)]
              if k == keys[0] else [dict(item, Score=1)] for k in keys}
    text = json.dumps(scores, separators=(",", ":"), ensure_ascii=False)
    offsets = value_offsets(rubric, scores, text)
    slots = score_slots(rubric, scores)
    assert len(slots) == len(keys) + 1 and offsets is not None
    for slot in slots:
        assert text.encode()[offsets[slot.path]:].startswith(str(slot.value).encode())
    assert slots[1].path == f"{keys[0]}[1].Score" and slots[1].value == 0
    assert value_offsets(rubric, scores, json.dumps(scores)) is None  # not compact


def test_expected_view_recomputes_the_aggregates_from_expected_scores(tmp_path):
    """ECG's aggregates are computed from its item scores: with --score expected they are
    recomputed from the expected item scores, not copied from the argmax verdict."""
    rubric = load_rubric("ecg_interpretation")
    rows = [{"case_id": "c0", **_ecg_fields(rubric)}]
    result = evaluate(*run_options(rubric="ecg_interpretation",
                                   input_path=write_jsonl(tmp_path / "in.jsonl", rows),
                                   output_path=tmp_path / "results.jsonl",
                                   backend=FakeBackend(), judge="fake",
                                   judge_spec=JudgeSpec(backend="fake")))
    [record] = read_results(result.results_path)
    assert record.status == "ok" and record.distributions
    _, aggregates = expected_verdict(rubric, record)
    for slot in score_slots(rubric, record.scores):
        dist = record.distributions[slot.path]
        assert dist.confidence == pytest.approx(FAKE_CONFIDENCE)
        others = [v for v in slot.allowed if v != slot.value]
        assert dist.expected == pytest.approx(
            FAKE_CONFIDENCE * slot.value + (1 - FAKE_CONFIDENCE) * sum(others) / len(others))
    assert aggregates is not None and record.aggregates is not None
    assert set(aggregates) == set(record.aggregates)
    assert aggregates != record.aggregates
    # share_above: the mean probability of an item above 0 (fake: 0.7 on the 0 it wrote),
    # not the share of expected scores above 0 (0.45 > 0 for every item: 100)
    assert aggregates["DiagnosisAccuracy"] == pytest.approx(30.0)
    assert record.aggregates["DiagnosisAccuracy"] == 0.0
    items = len(record.scores["AnalysisCompleteness"])
    assert aggregates["AnalysisCompleteness"] == pytest.approx(0.3 * items)  # 0.7*0 + 0.3*1
    # a cap the sum can never exceed (12 items of 0/1, cap 12) leaves it computable
    assert aggregates["LeadAssessmentCoverage"] is not None
    argmax_scores, argmax_aggregates = verdict_view(rubric, record, "argmax")
    assert argmax_aggregates == record.aggregates and argmax_scores == record.scores
    assert all(math.isfinite(v) for v in aggregates.values() if v is not None)


def _ecg_fields(rubric):
    return {name: f"{name} text" for name in rubric.inputs}


def test_aggregates_that_need_the_joint_distribution_are_not_guessed():
    from evaluator.analysis.distributions import expected_aggregates
    from evaluator.rubrics.rubric import Aggregate

    rubric = load_rubric("ecg_interpretation")
    rubric = rubric.model_copy(update={"aggregates": [
        Aggregate(name="worst", of="DiagnosisAccuracy", reduce="min"),
        Aggregate(name="capped", of="DiagnosisAccuracy", reduce="sum", cap=3),
        Aggregate(name="total", of="DiagnosisAccuracy", reduce="sum"),
        Aggregate(name="n", of="DiagnosisAccuracy", reduce="count")]})
    dists = [summarize({0: 0.5, 2: 0.5}, 0), summarize({1: 1.0}, 1)]
    out = expected_aggregates(rubric, {"DiagnosisAccuracy": dists})
    assert out == {"worst": None, "capped": None, "total": pytest.approx(2.0), "n": 2.0}


def test_panels_mix_criteria_and_keep_the_first_verdicts_items():
    """Items are the first verdict's, as written, so their distributions are too, whatever
    the other samples' item counts; integer criteria are mixed."""
    from evaluator.analysis.distributions import mean_distributions

    rubric = load_rubric("ecg_interpretation")
    first = {"DiagnosisAccuracy[0].Score": summarize({0: 1.0, 1: 0.0, 2: 0.0}, 0),
             "DiagnosisAccuracy[1].Score": summarize({2: 1.0, 0: 0.0, 1: 0.0}, 2)}
    second = {"DiagnosisAccuracy[0].Score": summarize({1: 1.0, 0: 0.0, 2: 0.0}, 1)}
    scores = {"DiagnosisAccuracy": [{"Score": 0, "Explanation": "x"},
                                    {"Score": 2, "Explanation": "x"}]}
    mixed = mean_distributions(rubric, [first, second], scores)
    assert mixed == first
    trial = load_rubric("trial_eligibility")
    a = {"accuracy": summarize({4: 1.0, 5: 0.0}, 4)}
    b = {"accuracy": summarize({5: 1.0, 4: 0.0}, 5)}
    both = mean_distributions(trial, [a, b], {"accuracy": 4.5})
    assert both["accuracy"].probabilities == {"4": 0.5, "5": 0.5}
    assert both["accuracy"].confidence is None and both["accuracy"].expected == 4.5


def test_a_damaged_distribution_is_a_damaged_file_not_a_crash(tmp_path):
    from evaluator.data.results import ResultsFileDamaged

    good = ResultRecord(case_id="a", rubric="trial_eligibility", judge="j", status="ok",
                        scores={"accuracy": 4},
                        distributions={"accuracy": summarize({4: 1.0}, 4)})
    assert math.copysign(1.0, good.distributions["accuracy"].entropy) == 1.0  # not -0.0
    line = good.model_dump_json().replace('"expected":4.0', '"expected":NaN')
    assert "NaN" in line
    path = tmp_path / "results.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ResultsFileDamaged):
        read_results(path)


def test_a_distribution_sums_to_one_within_the_tolerance_and_its_expected_is_its_mean():
    """Probabilities summing to 1.8 (each in [0, 1]) and an expected score that is not the
    distribution's mean were read as they were; float rounding (1e-12) is not an edit."""
    from pydantic import ValidationError

    from evaluator.data.results import PROBABILITY_TOLERANCE, ScoreDistribution

    def distribution(probabilities, expected=None):
        mean = sum(int(v) * p for v, p in probabilities.items())
        return ScoreDistribution(probabilities=probabilities, entropy=1.0,
                                 expected=mean if expected is None else expected)

    assert PROBABILITY_TOLERANCE == 1e-6
    distribution({"1": 0.5, "2": 0.5 + 1e-12})
    for bad in ({"1": 0.9, "2": 0.9}, {"1": 0.5, "2": 0.5 - 1e-5}):
        with pytest.raises(ValidationError, match="the probabilities sum to"):
            distribution(bad)
    with pytest.raises(ValidationError, match="not the probability-weighted mean"):
        distribution({"1": 0.5, "2": 0.5}, expected=1.9)
