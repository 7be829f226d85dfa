"""Reading and validating cases: every problem names file, line, case id and field."""

from __future__ import annotations

import pytest

from evaluator.cases import Case, InputFileError, InputProblem, read_cases
from evaluator.rubric import load_rubric
from tests.conftest import EXAMPLES, write_jsonl

SECRET = "PATIENT-MARKER-7f3a"  # stands in for PHI: must never reach an error message


@pytest.fixture
def drug():
    return load_rubric("drug_monograph_similarity")


def test_examples_are_all_valid():
    for name in ("trial_eligibility", "ecg_interpretation", "drug_monograph_similarity",
                 "pathology_report"):
        items = read_cases(EXAMPLES / f"{name}.jsonl", load_rubric(name))
        assert items and all(isinstance(i, Case) for i in items)


def test_jsonl_problems_are_reported_per_line(tmp_path, drug):
    path = tmp_path / "cases.jsonl"
    path.write_bytes(
        b'{"case_id": "a", "Resp": "r", "Truth": "t"}\n'
        b'{"case_id": "b", "Resp": "' + SECRET.encode() + b'"}\n'            # missing Truth
        b'{"case_id": "c", "Resp": "   ", "Truth": "t"}\n'                   # empty
        b'{"case_id": "d", "Resp": ["' + SECRET.encode() + b'"], "Truth": "t"}\n'  # wrong type
        b'not json ' + SECRET.encode() + b'\n'                               # bad JSON
        b'[1, 2]\n'                                                          # not an object
        b'{"case_id": "g", "Resp": "\xff\xfe", "Truth": "t"}\n'              # bad UTF-8
        b'\n'
        b'{"Resp": "r", "Truth": "t"}\n'                                      # no id
    )
    items = read_cases(path, drug)
    assert [type(i).__name__ for i in items] == [
        "Case", "InputProblem", "InputProblem", "InputProblem", "InputProblem",
        "InputProblem", "InputProblem", "Case"]
    problems = [i for i in items if isinstance(i, InputProblem)]
    assert [(p.case_id, p.line, p.field) for p in problems] == [
        ("b", 2, "Truth"), ("c", 3, "Resp"), ("d", 4, "Resp"), ("line-5", 5, None),
        ("line-6", 6, None), ("line-7", 7, None)]
    assert "missing" in problems[0].message and "--map" in problems[0].message
    assert "empty" in problems[1].message
    assert "expected text, got list" in problems[2].message
    assert "not valid JSON" in problems[3].message
    assert "UTF-8" in problems[5].message
    assert items[-1].case_id == "line-9"
    for problem in problems:
        text = problem.describe()
        assert str(path) in text and f":{problem.line} " in text
        assert SECRET not in text


def test_csv_with_mapping_and_bad_rows(tmp_path, drug):
    path = tmp_path / "cases.csv"
    path.write_bytes(
        b"id,generated,reference\n"
        b'1,"multi\nline answer",ref\n'
        b"2,,ref\n"
        b"3,too,many,values\n"
        b"4,\xff,ref\n"
        b"5,ok,ref\n")
    items = read_cases(path, drug, mapping={"Resp": "generated", "Truth": "reference"},
                       id_column="id")
    assert isinstance(items[0], Case) and items[0].fields["Resp"] == "multi\nline answer"
    assert isinstance(items[1], InputProblem) and items[1].field == "generated"
    assert isinstance(items[2], InputProblem) and "header has 3 columns" in items[2].message
    assert isinstance(items[3], InputProblem) and "UTF-8" in items[3].message
    assert isinstance(items[4], Case) and items[4].case_id == "5"


def test_duplicate_ids_stop_before_anything_runs(tmp_path, drug):
    path = write_jsonl(tmp_path / "dup.jsonl", [
        {"case_id": "x", "Resp": "a", "Truth": "b"}, {"case_id": "x", "Resp": "c", "Truth": "d"}])
    with pytest.raises(InputFileError, match=r"duplicate case ids: 'x' \(lines 1 and 2\)"):
        read_cases(path, drug)


def test_file_level_errors(tmp_path, drug):
    with pytest.raises(InputFileError, match="not found"):
        read_cases(tmp_path / "missing.jsonl", drug)
    other = tmp_path / "cases.txt"
    other.write_text("x")
    with pytest.raises(InputFileError, match="unsupported input format"):
        read_cases(other, drug)
    ok = write_jsonl(tmp_path / "ok.jsonl", [{"Resp": "a", "Truth": "b"}])
    with pytest.raises(InputFileError, match="not inputs of rubric"):
        read_cases(ok, drug, mapping={"Answer": "x"})


def test_optional_field_may_be_missing_and_numbers_become_text(tmp_path):
    rubric = load_rubric("trial_eligibility")
    row = {"case_id": 7, "patient_profile": "p", "trial_id": 12345, "trial_title": "t",
           "eligibility_criteria": "e", "ground_truth_label": "Likely Eligible",
           "workflow_answer": "w"}
    [case] = read_cases(write_jsonl(tmp_path / "c.jsonl", [row]), rubric)
    assert isinstance(case, Case)
    assert case.case_id == "7" and case.fields["trial_id"] == "12345"
    assert case.fields["ground_truth_explanation"] == ""


def test_limit(tmp_path, drug):
    rows = [{"case_id": str(i), "Resp": "a", "Truth": "b"} for i in range(10)]
    assert len(read_cases(write_jsonl(tmp_path / "c.jsonl", rows), drug, limit=3)) == 3
