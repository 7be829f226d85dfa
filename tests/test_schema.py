"""Rubric -> output model, JSON schema and token budget, with no model at all."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from evaluator.judges.backends.fake import minimal_instance
from evaluator.rubrics.load import load_rubric
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, StringField
from evaluator.rubrics.schema import (
    UnboundedSchemaError,
    build_output_model,
    max_new_tokens,
    max_output_bytes,
    output_json_schema,
    string_pattern,
)


def _longest_instance(rubric):
    """The longest valid verdict: widest score literal, longest strings, most items."""
    verdict = {}
    for field in rubric.output:
        widest = max(field.allowed, key=lambda v: len(str(v))) if not isinstance(
            field, StringField) else None
        if isinstance(field, IntegerCriterion):
            verdict[field.key] = widest
        elif isinstance(field, ItemsCriterion):
            verdict[field.key] = [{field.score_key: widest,
                                   field.explanation_key: "~" * field.explanation_max_length}
                                  ] * field.max_items
        else:
            verdict[field.key] = "~" * field.max_length
    return verdict


def test_budget_is_exactly_the_longest_valid_verdict(builtin_rubric):
    schema = output_json_schema(builtin_rubric)
    longest = _longest_instance(builtin_rubric)
    build_output_model(builtin_rubric).model_validate(longest)  # it is valid
    text = json.dumps(longest, separators=(",", ":"))
    assert max_output_bytes(schema) == len(text.encode())
    assert max_new_tokens(schema) == len(text.encode()) + 1


def test_schema_keeps_rubric_key_order_and_forbids_extras(builtin_rubric):
    schema = output_json_schema(builtin_rubric)
    assert list(schema["properties"]) == [f.key for f in builtin_rubric.output]
    assert schema["additionalProperties"] is False
    assert schema["required"] == [f.key for f in builtin_rubric.output]


def test_scores_are_enums_not_ranges(builtin_rubric):
    """outlines does not enforce ge/le: every score must be an enum."""
    text = json.dumps(output_json_schema(builtin_rubric))
    assert "minimum" not in text and "maximum" not in text
    assert '"enum"' in text


def test_model_rejects_out_of_range_extra_keys_and_long_strings():
    model = build_output_model(load_rubric("trial_eligibility"))
    good = {"hallucination": 5, "hallucination_reasoning": "ok", "accuracy": 1,
            "accuracy_reasoning": "ok", "clarity": 3, "clarity_reasoning": "ok"}
    model.model_validate(good)
    for bad in ({**good, "accuracy": 6}, {**good, "extra": 1},
                {**good, "clarity_reasoning": "x" * 401}, {**good, "clarity_reasoning": ""},
                {**good, "clarity_reasoning": 'has "quote"'}):
        with pytest.raises(ValidationError):
            model.model_validate(bad)


def test_items_bounds_enforced():
    model = build_output_model(load_rubric("ecg_interpretation"))
    verdict = minimal_instance(output_json_schema(load_rubric("ecg_interpretation")))
    model.model_validate(verdict)
    too_many = dict(verdict, LeadAssessmentCoverage=[{"Score": 1, "Explanation": "lead"}] * 13)
    with pytest.raises(ValidationError):
        model.model_validate(too_many)
    empty = dict(verdict, DiagnosisAccuracy=[])
    with pytest.raises(ValidationError):
        model.model_validate(empty)
    off_anchor = dict(verdict, EvidenceBasedReasoning=[{"Score": 60, "Explanation": "x"}])
    with pytest.raises(ValidationError):
        model.model_validate(off_anchor)


@pytest.mark.parametrize("schema, where", [
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
      "additionalProperties": False}, "string without a bounding pattern"),
    ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}},
      "required": ["a"], "additionalProperties": False}, "string without a bounding pattern"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "^.{1,3}$"}},
      "required": ["a"], "additionalProperties": False}, "cannot bound pattern"),
    ({"type": "object", "properties": {"a": {"type": "integer", "minimum": 1}},
      "required": ["a"], "additionalProperties": False}, "unbounded"),
    ({"type": "array", "items": {"enum": [1]}}, "without maxItems"),
    ({"type": "object", "properties": {}}, "extra keys"),
])
def test_unbounded_schemas_are_refused(schema, where):
    with pytest.raises(UnboundedSchemaError, match=where):
        max_output_bytes(schema)


def test_unicode_strings_budget_four_bytes_per_char():
    schema = {"type": "object", "properties": {"a": {
        "type": "string", "pattern": string_pattern("unicode", 1, 10)}},
              "required": ["a"], "additionalProperties": False}
    assert max_output_bytes(schema) == len('{"a":""}') + 40
    ascii_schema = {"type": "object", "properties": {"a": {
        "type": "string", "pattern": string_pattern("ascii", 1, 10)}},
              "required": ["a"], "additionalProperties": False}
    assert max_output_bytes(ascii_schema) == len('{"a":""}') + 10
