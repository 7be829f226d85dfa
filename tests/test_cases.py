"""Reading and validating cases: every problem names file, line, case id and field."""

from __future__ import annotations

import json

import pytest

from evaluator.data.cases import Case, InputFileError, InputProblem, read_cases
from evaluator.rubrics.load import load_rubric
from tests.conftest import BUILTIN, EXAMPLES, PAIRWISE_BUILTIN, write_jsonl

SECRET = "PATIENT-MARKER-7f3a"  # stands in for PHI: must never reach an error message


@pytest.fixture
def drug():
    return load_rubric("drug_monograph_similarity")


def test_examples_are_all_valid():
    for name in BUILTIN + PAIRWISE_BUILTIN:
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
    assert "expected text, got array" in problems[2].message
    assert "not valid JSON" in problems[3].message
    assert "UTF-8" in problems[5].message
    assert items[-1].case_id == "line-9"
    for problem in problems:
        text = problem.describe()
        assert str(path) in text and f":{problem.line} " in text
        assert SECRET not in text


def test_a_null_case_id_is_marked_not_silent(tmp_path, drug):
    """A row whose id column holds null gets line-N, marked (``null_id``) so the run can
    say so; a row without the column is the documented line-N, unmarked."""
    path = tmp_path / "cases.jsonl"
    path.write_text('{"case_id": "a", "Resp": "r", "Truth": "t"}\n'
                    '{"case_id": null, "Resp": "r", "Truth": "t"}\n'
                    '{"Resp": "r", "Truth": "t"}\n')
    a, null, missing = read_cases(path, drug)
    assert (a.case_id, a.null_id) == ("a", False)
    assert (null.case_id, null.null_id) == ("line-2", True)
    assert (missing.case_id, missing.null_id) == ("line-3", False)


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
    with pytest.raises(InputFileError, match=r"duplicate case ids \(lines 1 and 2 have"):
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


def test_bom_crlf_and_very_long_lines_are_accepted(tmp_path, drug):
    big = "x" * 5_000_000 + SECRET
    path = tmp_path / "cases.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"case_id": "a", "Resp": "r", "Truth": "t"}\r\n'
                     + json.dumps({"case_id": "b", "Resp": big, "Truth": "t"}).encode() + b"\r\n"
                     + b'\xef\xbb\xbf{"case_id": "c", "Resp": "r", "Truth": "t"}\n')  # concatenated
    items = read_cases(path, drug)
    assert [(type(i).__name__, i.case_id) for i in items] == [("Case", "a"), ("Case", "b"),
                                                               ("Case", "c")]
    assert items[1].fields["Resp"] == big
    csv_path = tmp_path / "cases.csv"
    csv_path.write_bytes(b"\xef\xbb\xbfcase_id,Resp,Truth\r\n1,\"" + big.encode()
                         + b"\r\nsecond line\",t\r\n2,r,t\r\n")
    items = read_cases(csv_path, drug)  # a field far above csv's default 128 KiB limit
    assert [(type(i).__name__, i.case_id, i.line) for i in items] == [("Case", "1", 2),
                                                                       ("Case", "2", 4)]


def test_json_control_characters_nan_and_odd_ids(tmp_path, drug):
    path = tmp_path / "cases.jsonl"
    long_key = "k" * 500 + "\x07"
    path.write_bytes(
        b'{"case_id": "a", "Resp": "nul \\u0000 ' + SECRET.encode() + b'", "Truth": "t"}\n'
        b'{"case_id": "b", "Resp": "raw \x00 ' + SECRET.encode() + b'", "Truth": "t"}\n'
        b'{"case_id": "c", "Resp": "raw \t tab", "Truth": "t"}\n'
        b'{"case_id": "d", "Resp": NaN, "Truth": "t"}\n'
        b'{"case_id": ["' + SECRET.encode() + b'"], "Resp": "r", "Truth": "t"}\n'
        b'{"case_id": NaN, "Resp": "r", "Truth": "t"}\n'
        b'{"case_id": true, "Resp": "r", "Truth": "t"}\n'
        b'{"case_id": "' + SECRET.encode() * 50 + b'", "Resp": "r", "Truth": "t"}\n'
        b'{"case_id": "i", "Resp": "\\ud800 ' + SECRET.encode() + b'", "Truth": "t"}\n'
        + json.dumps({"case_id": "j", "Resp": "r", "Truth": "t"})[:-1].encode()
        + b', "Resp": "' + SECRET.encode() + b'"}\n'
        + json.dumps({"case_id": "k", long_key: 1, "Resp": "r", "Truth": "t"})[:-1].encode()
        + b", " + json.dumps(long_key).encode() + b": 2}\n"
        b'{"case_id": "l", "Resp": "r", "Truth": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"
        b'{"case_id": "m", "Resp": ' + b"9" * 5000 + b', "Truth": "t"}\n')
    items = read_cases(path, drug)
    assert isinstance(items[0], Case) and items[0].fields["Resp"].startswith("nul \x00 ")
    problems = items[1:]
    assert all(isinstance(p, InputProblem) for p in problems)
    assert [(p.case_id, p.field) for p in problems] == [
        ("line-2", None), ("line-3", None), ("d", "Resp"), ("line-5", "case_id"),
        ("line-6", "case_id"), ("line-7", "case_id"), ("line-8", "case_id"), ("i", "Resp"),
        ("line-10", "Resp"), ("line-11", "k" * 57 + "..."), ("line-12", None),
        ("line-13", None)]
    messages = [p.message for p in problems]
    assert "Invalid control character at column" in messages[0]
    assert "expected text, got NaN or Infinity" in messages[2]
    assert "got array" in messages[3] and "got boolean" in messages[5]
    assert f"{len(SECRET) * 50} characters long" in messages[6]
    assert "surrogate" in messages[7]
    assert "more than once" in messages[8] and "more than once" in messages[9]
    assert "nested too deeply" in messages[10] and "number is too long" in messages[11]
    for problem in problems:
        assert SECRET not in problem.describe() and "\x07" not in problem.describe()


def test_csv_syntax_errors_skip_only_their_lines(tmp_path, drug):
    path = tmp_path / "cases.csv"
    path.write_bytes(
        b"case_id,Resp,Truth\r\n"
        b'1,"' + SECRET.encode() + b'"trailing,t\r\n'       # text after a closing quote
        b"2,ok,t\r\n"
        b"3,only two\r\n"                                   # too few values
        b"4,nul \x00 " + SECRET.encode() + b",t\r\n"
        b'5,"opened ' + SECRET.encode() + b",t\r\n"         # swallows until the next quote...
        b"6,ok,t\r\n"
        b'7,"x"y,t\r\n'                                     # ...which is followed by a y
        b"8,ok,t\r\n"
        b'9,"never closed ' + SECRET.encode() + b",t\r\n"
        b"10,ok,t\r\n")
    items = read_cases(path, drug)
    assert [(type(i).__name__, i.case_id, i.line) for i in items] == [
        ("InputProblem", "line-2", 2), ("Case", "2", 3), ("InputProblem", "line-4", 4),
        ("InputProblem", "line-5", 5), ("InputProblem", "line-6", 6), ("Case", "8", 9),
        ("InputProblem", "line-10", 10)]
    assert "CSV syntax error on line 2" in items[0].message
    assert "2 values but the header has 3 columns" in items[2].message
    assert "NUL byte" in items[3].message
    assert "CSV syntax error on line 8" in items[4].message and "lines 6-8" in items[4].message
    assert "never closed" in items[6].message and "lines 10-11" in items[6].message
    for item in items:
        assert isinstance(item, Case) or SECRET not in item.describe()


def test_unusable_csv_files_are_one_clear_error(tmp_path, drug):
    repeated = tmp_path / "repeated.csv"
    repeated.write_text("case_id,Resp,Resp,Truth\n1,a,b,c\n", encoding="utf-8")
    with pytest.raises(InputFileError, match=r"columns 2 and 3 of the header row"):
        read_cases(repeated, drug)
    semicolons = tmp_path / "semicolons.csv"
    semicolons.write_text('case_id;Resp;Truth\n1;"a, b";c\n', encoding="utf-8-sig")
    with pytest.raises(InputFileError, match=r"semicolons.csv looks ';'-separated \(a "
                       r"spreadsheet's regional setting\): save it as comma-separated CSV$"):
        read_cases(semicolons, drug)
    utf16 = tmp_path / "utf16.csv"
    utf16.write_bytes("case_id,Resp,Truth\n1,a,b\n".encode("utf-16"))
    with pytest.raises(InputFileError, match="UTF-16"):
        read_cases(utf16, drug)
    missing = tmp_path / "missing.csv"
    missing.write_text("case_id,Answer,Truth\n1,a,b\n", encoding="utf-8")
    [problem] = read_cases(missing, drug)
    assert problem.field == "Resp" and "--map Resp=COLUMN" in problem.message
