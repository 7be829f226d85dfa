"""A sheet's case text (evaluator.data.sheet_cases): read the way the run read it (the
mapping, the id column, a pairwise run's --versus file and answer column), refused in one
line when the file changed or the sheet does not say how its cases were read."""

from __future__ import annotations

import json

import pytest

from evaluator.data.files import sha256_file as file_sha256
from evaluator.data.sheet import CasesRef, SheetError, SheetInfo, now
from evaluator.data.sheet_cases import read_sheet_cases
from evaluator.rubrics.load import load_rubric


def _info(ref: CasesRef | None, kind: str = "single") -> SheetInfo:
    return SheetInfo(fingerprint="f" * 64, rubric="x", rubric_hash="r" * 64, kind=kind,
                     design="random", blind=True, criteria=["accuracy"], results=[],
                     cases=ref, created=now())


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_single_cases_are_read_with_the_runs_mapping_and_id_column(tmp_path):
    rubric = load_rubric("pathology_report")
    cases = _write(tmp_path / "c.jsonl", [
        {"rid": f"r{i}", "ref": f"reference {i}", "generated_report": f"generated {i}"}
        for i in range(5)])
    ref = CasesRef(path=str(cases), sha256=file_sha256(cases),
                   mapping={"reference_report": "ref"}, id_column="rid")
    found = read_sheet_cases(tmp_path, _info(ref), rubric, ["r3", "r1"])
    assert found == {"r3": {"reference_report": "reference 3", "generated_report": "generated 3"},
                     "r1": {"reference_report": "reference 1", "generated_report": "generated 1"}}


def test_pairwise_cases_are_joined_from_the_versus_file(tmp_path):
    rubric = load_rubric("pathology_report_pairwise")
    a = _write(tmp_path / "a.jsonl", [{"case_id": f"c{i}", "reference_report": f"ref {i}",
                                       "answer": f"A says {i}"} for i in range(3)])
    b = _write(tmp_path / "b.jsonl", [{"case_id": f"c{i}", "answer": f"B says {i}"}
                                      for i in range(3)])
    ref = CasesRef(path=str(a), sha256=file_sha256(a), versus=str(b), answer_column="answer")
    found = read_sheet_cases(tmp_path, _info(ref, "pairwise"), rubric, ["c2"])
    assert found == {"c2": {"reference_report": "ref 2", "generated_report_a": "A says 2",
                            "generated_report_b": "B says 2"}}


def test_a_relative_path_is_found_beside_the_sheet(tmp_path, monkeypatch):
    rubric = load_rubric("pathology_report")
    cases = _write(tmp_path / "c.jsonl", [{"case_id": "x", "reference_report": "r",
                                           "generated_report": "g"}])
    monkeypatch.chdir("/")
    ref = CasesRef(path="c.jsonl", sha256=file_sha256(cases))
    assert read_sheet_cases(tmp_path, _info(ref), rubric, ["x"])["x"]["generated_report"] == "g"


def test_refusals_are_one_line_without_case_text(tmp_path):
    rubric = load_rubric("pathology_report")
    cases = _write(tmp_path / "c.jsonl", [{"case_id": "x", "reference_report": "SECRET",
                                           "generated_report": "g"}])
    good = CasesRef(path=str(cases), sha256=file_sha256(cases))
    for ref, ids, says in [
        (None, ["x"], "predates recorded case reading"),
        (good.model_copy(update={"sha256": "0" * 64}), ["x"], "has changed since the run"),
        (good.model_copy(update={"path": str(tmp_path / "gone.jsonl")}), ["x"], "not there"),
        (good, ["x", "y"], r"1 case\(s\) of the sheet are not readable cases"),
    ]:
        with pytest.raises(SheetError, match=says) as caught:
            read_sheet_cases(tmp_path, _info(ref), rubric, ids)
        assert "\n" not in str(caught.value) and "SECRET" not in str(caught.value)
