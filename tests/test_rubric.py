"""Rubric files: the four built-ins load, and the format is strict."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evaluator.rubrics.load import (
    BUILTIN_RUBRICS_DIR,
    available_rubrics,
    load_rubric,
    load_rubric_file,
)
from evaluator.rubrics.rubric import IntegerCriterion, ItemsCriterion, RubricError, StringField
from tests.conftest import BUILTIN, PAIRWISE_BUILTIN

SHARED_RUBRICS = Path(__file__).resolve().parent.parent.parent / "shared" / "rubrics"


def test_all_builtins_are_listed():
    assert {*BUILTIN, *PAIRWISE_BUILTIN} <= set(available_rubrics())


def test_trial_eligibility_keys_and_scales():
    rubric = load_rubric("trial_eligibility")
    assert [f.key for f in rubric.output] == [
        "hallucination", "hallucination_reasoning", "accuracy", "accuracy_reasoning",
        "clarity", "clarity_reasoning"]
    for key in ("hallucination", "accuracy", "clarity"):
        field = next(f for f in rubric.output if f.key == key)
        assert isinstance(field, IntegerCriterion) and field.allowed == [1, 2, 3, 4, 5]
    assert list(rubric.inputs) == ["patient_profile", "trial_id", "trial_title",
                                   "eligibility_criteria", "ground_truth_label",
                                   "ground_truth_explanation", "workflow_answer"]


def test_pathology_keys_scales_and_no_think():
    rubric = load_rubric("pathology_report")
    scales = {f.key: f.allowed for f in rubric.output if isinstance(f, IntegerCriterion)}
    assert scales == {"critical_finding_concordance": [1, 2, 3, 4],
                      "factual_accuracy": [1, 2, 3], "factual_completeness": [1, 2, 3],
                      "overall_equivalence": [1, 2, 3, 4]}
    assert [f.key for f in rubric.output][-1] == "reasoning"
    assert rubric.chat_template_kwargs == {"enable_thinking": False}
    assert rubric.system is not None and "\\no_think" in rubric.system


def test_drug_monograph_keys_and_artefacts_cleaned():
    rubric = load_rubric("drug_monograph_similarity")
    assert [f.key for f in rubric.output] == ["Score", "Rationale"]
    assert rubric.output[0].allowed == list(range(11))
    for artefact in ("Back to Discover", "placeholder", "vbnet", "Copy\n", "β"):
        assert artefact not in rubric.template
    assert "**8–9**" in rubric.template and "mismatches—availability" in rubric.template


def test_ecg_items_and_anchors():
    rubric = load_rubric("ecg_interpretation")
    keys = [f.key for f in rubric.output]
    assert keys == ["DiagnosisAccuracy", "AnalysisCompleteness", "AnalysisRelevance",
                    "LeadAssessmentCoverage", "LeadAssessmentAccuracy",
                    "GroundedECGUnderstanding", "EvidenceBasedReasoning",
                    "RealisticDiagnosticProcess"]
    assert all(isinstance(f, ItemsCriterion) for f in rubric.output)
    by_key = {f.key: f for f in rubric.output}
    assert by_key["DiagnosisAccuracy"].allowed == [0, 1, 2]
    assert by_key["AnalysisCompleteness"].allowed == [0, 1]
    assert by_key["LeadAssessmentCoverage"].max_items == 12
    for key in ("GroundedECGUnderstanding", "EvidenceBasedReasoning",
                "RealisticDiagnosticProcess"):
        assert by_key[key].allowed == [0, 50, 80, 100]
    assert rubric.aliases == {"ECGFeatureGrounding": "GroundedECGUnderstanding",
                              "ClinicalDiagnosticFidelity": "RealisticDiagnosticProcess"}


PAGE_ARTEFACTS = ("Back to Discover", "Similarity Measure", "Prompt", "vbnet", "Copy", "Edit")


def _normalise(text: str) -> str:
    # The drug prompt's "β" is a mis-decoded en/em dash: compare all dashes as one.
    for dash in ("β", "–", "—"):
        text = text.replace(dash, "-")
    return " ".join(text.split())


def _original_lines(name: str) -> list[str]:
    """The original prompt's lines, normalised, bar page artefacts, placeholders and the
    'System Prompt:' label."""
    original = SHARED_RUBRICS / f"{name}.txt"
    if not original.is_file():
        pytest.skip(f"original prompt not found at {original}")
    lines = []
    for line in original.read_text(encoding="utf-8").splitlines():
        line = _normalise(line.removeprefix("System Prompt:"))
        if (not line or "__INPUT_TEXT__" in line or line.startswith(PAGE_ARTEFACTS)
                or "{" in line and "Resp" in line + "Truth" or line.startswith("π")):
            continue
        if "{" in line and "}" in line and "'" not in line:
            continue  # Python-format placeholders ({patient_profile}) became Jinja2 fields
        if line in ("{{", "}}"):
            continue  # Python-format literal braces in the trial prompt's JSON example
        lines.append(line)
    return lines


@pytest.mark.parametrize("name", BUILTIN)
def test_original_wording_is_kept(name):
    """Every line of the users' original prompt (bar page artefacts, placeholders and the
    'System Prompt:' label) appears verbatim in the rubric, so the wording cannot drift."""
    rubric = load_rubric(name)
    text = _normalise((rubric.system or "") + "\n" + rubric.template)
    lines = _original_lines(name)
    for line in lines:
        assert line in text, f"{name}: original line not found: {line!r}"
    assert len(lines) >= 10


# The lines of an original that its pairwise version rewords, by their start: the task, the
# rules and labels that speak of one generated text, and the output format (a choice instead
# of a score). Every other line (each criterion, its definition and scale, the examples) is
# kept verbatim. trial_eligibility_pairwise is not listed: it rewrites the 1-5 anchors as
# best ... worst.
PAIRWISE_REWORDED = {
    "ecg_interpretation": ("# Your task:", "## Generated ECG Interpretation:"),
    "drug_monograph_similarity": ("You are an expert evaluator.", "- A numeric **Score",
                                  "- A short **Rationale**", "### Sample Case:",
                                  "Score (0-10):"),
    "pathology_report": ("You are an expert pathologist.", "The Core Problem:",
                         "1. Carefully read both reports", "2. Evaluate the",
                         "4. Provide a score", "You will provide scores",
                         "Briefly explain your scores", "Now it's your turn."),
}


@pytest.mark.parametrize("name", sorted(PAIRWISE_REWORDED))
def test_pairwise_versions_keep_the_originals_criteria_verbatim(name):
    rubric = load_rubric(f"{name}_pairwise")
    text = _normalise((rubric.system or "") + "\n" + rubric.template)
    reworded = PAIRWISE_REWORDED[name]
    kept = [line for line in _original_lines(name) if not line.startswith(reworded)]
    for line in kept:
        assert line in text, f"{name}_pairwise: original line not found: {line!r}"
    assert len(kept) >= 40
    assert ("Judge the content only: the order in which the answers are shown and their "
            "length must not influence your choice.") in text


# The built-ins whose prompt defines every score of an integer criterion in words: their
# rubric files give those words as the criterion's ``levels`` (for the labelling page).
LEVELLED = {"trial_eligibility": {"hallucination", "accuracy", "clarity"},
            "pathology_report": {"critical_finding_concordance", "factual_accuracy",
                                 "factual_completeness", "overall_equivalence"},
            "drug_monograph_similarity": {"Score"}}


@pytest.mark.parametrize("name", [*BUILTIN, *PAIRWISE_BUILTIN])
def test_every_level_text_is_the_prompts_own_words(name):
    """A criterion's ``levels`` are copied verbatim from the same file's prompt (each is a
    line's text after its score), so the page's scale and the judge's cannot drift apart;
    every built-in whose prompt defines the levels has them, for every score."""
    rubric = load_rubric(name)
    prompt = (rubric.system or "") + "\n" + rubric.template
    levelled = set()
    for field in rubric.output:
        if isinstance(field, IntegerCriterion) and field.levels:
            levelled.add(field.key)
            assert sorted(field.levels) == sorted(field.allowed), field.key
            for value, text in field.levels.items():
                assert text in prompt, f"{name}.{field.key} level {value}: {text!r}"
    assert levelled == LEVELLED.get(name, set())


def test_levels_leave_the_rendered_prompt_unchanged(tmp_path):
    from evaluator.rubrics.render import render_messages

    with_levels = _minimal()
    with_levels["output"][0]["levels"] = {1: "poor", 2: "fair", 3: "good"}
    (tmp_path / "a").mkdir()
    plain = load_rubric_file(_write(tmp_path / "a", _minimal()))
    levelled = load_rubric_file(_write(tmp_path, with_levels))
    assert levelled.output[0].levels == {1: "poor", 2: "fair", 3: "good"}
    case = {"answer": "the case"}
    assert render_messages(plain, case) == render_messages(levelled, case)


def _write(tmp_path: Path, data: dict, name: str = "custom") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _minimal() -> dict:
    return {
        "format_version": 1, "name": "custom", "title": "Custom",
        "inputs": {"answer": {"description": "the answer"}},
        "output": [{"key": "score", "type": "integer", "range": [1, 3]},
                   {"key": "why", "type": "string", "max_length": 50}],
        "template": "Rate this:\n{{ answer | fence }}",
    }


def test_user_rubric_dir_adds_a_rubric_without_code(tmp_path):
    _write(tmp_path, _minimal())
    rubric = load_rubric("custom", [tmp_path])
    assert rubric.name == "custom" and rubric.source_sha256


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(temprature=0), "temprature"),
    (lambda d: d["output"][0].update(range=[3, 1]), "min is greater than max"),
    (lambda d: d["output"][0].update(values=[1, 2]), "exactly one of"),
    (lambda d: d["output"].append({"key": "score", "type": "integer", "values": [1]}),
     "repeated"),
    (lambda d: d.update(aggregates=[{"name": "a", "of": "nope", "reduce": "sum"}]),
     "not an output key"),
    (lambda d: d.update(aggregates=[{"name": "a", "of": "why", "reduce": "sum"}]),
     "is a string"),
    (lambda d: d.update(template="Rate: {{ answer }}"), "without '| fence'"),
    (lambda d: d.update(template="Rate: {{ answer | fence }} {{ other | fence }}"),
     "not declared"),
    (lambda d: d.update(template="Rate: {{ answer | upper | fence }}"), "without '| fence'"),
    (lambda d: d.update(template="Rate: {% if %}"), "syntax error"),
    (lambda d: d.update(template="nothing"), "never used"),
    (lambda d: d.update(name="other"), "must match the file name"),
    (lambda d: d["output"][1].pop("max_length"), "max_length"),
    (lambda d: d["output"][0].update(levels={4: "beyond the scale"}),
     "not on the criterion's scale"),
    (lambda d: d["output"][0].update(levels={2: ""}), "levels"),
])
def test_invalid_rubrics_fail_with_the_file_named(tmp_path, mutate, message):
    data = _minimal()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(RubricError) as info:
        load_rubric_file(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_unknown_rubric_lists_the_available_ones():
    with pytest.raises(RubricError, match="trial_eligibility"):
        load_rubric("no_such_rubric")


def test_builtin_dir_is_the_projects_prompts_folder():
    assert BUILTIN_RUBRICS_DIR.name == "prompts"
    assert all(isinstance(f, (IntegerCriterion, ItemsCriterion, StringField))
               for f in load_rubric("pathology_report").output)
