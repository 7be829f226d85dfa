"""How a run read its cases, kept in its manifest (issue 37): :func:`run_entry` records the
cases file and the reading options, :func:`case_reading` reads them back from the last run
(a jury's from its first member), finding the file where it is now."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evaluator.data.sheet import CasesRef
from evaluator.run.manifest import case_reading, manifest_path_for, run_entry


def _manifest(results: Path, *entries: dict) -> None:
    manifest_path_for(results).write_text(json.dumps(
        {"manifest_version": 1, "results_file": results.name, "runs": list(entries)}))


def test_run_entry_records_the_reading_options_and_case_reading_reads_them_back(tmp_path):
    cases = tmp_path / "cases.csv"
    cases.write_text("pid,text\np1,x\n")
    versus = tmp_path / "other.csv"
    versus.write_text("pid,text\np1,y\n")
    entry = run_entry(cases, versus, mapping={"answer_a": "text"}, id_column="pid",
                      answer_column="text")
    assert entry["input_sha256"] == hashlib.sha256(cases.read_bytes()).hexdigest()
    assert entry["reading"]["mapping"] == {"answer_a": "text"}
    results = tmp_path / "results.jsonl"
    older = run_entry(cases)  # an earlier run of the same file: the last one counts
    _manifest(results, older, entry)
    assert case_reading(results) == CasesRef(
        path=str(cases.resolve()), sha256=entry["input_sha256"], mapping={"answer_a": "text"},
        id_column="pid", versus=str(versus.resolve()), versus_sha256=entry["versus_sha256"],
        answer_column="text")


def test_a_moved_folder_finds_the_cases_beside_the_results(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.chdir(run_dir)
    Path("cases.jsonl").write_text('{"case_id": "a"}\n')
    entry = run_entry(Path("cases.jsonl"))
    moved = tmp_path / "moved"
    run_dir.rename(moved)
    monkeypatch.chdir(tmp_path)
    _manifest(moved / "results.jsonl", entry)
    ref = case_reading(moved / "results.jsonl")
    assert ref is not None and ref.path == str((moved / "cases.jsonl").resolve())


def test_a_jury_reads_its_first_member_and_old_or_damaged_manifests_give_none(tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"case_id": "a"}\n')
    member = tmp_path / "jury.members" / "judge-a.jsonl"
    member.parent.mkdir()
    _manifest(member, run_entry(cases, id_column="id"))
    jury = tmp_path / "jury.jsonl"
    manifest_path_for(jury).write_text(json.dumps(
        {"manifest_version": 1, "kind": "jury", "results_file": jury.name,
         "members": [{"judge": "judge-a", "results_file": "jury.members/judge-a.jsonl"}]}))
    ref = case_reading(jury)
    assert ref is not None and ref.id_column == "id" and ref.path == str(cases.resolve())
    old = run_entry(cases)
    del old["reading"]
    _manifest(tmp_path / "old.jsonl", old)
    assert case_reading(tmp_path / "old.jsonl") is None
    damaged = run_entry(cases)
    damaged["reading"]["mapping"] = ["not", "a", "mapping"]
    _manifest(tmp_path / "damaged.jsonl", damaged)
    assert case_reading(tmp_path / "damaged.jsonl") is None
    assert case_reading(tmp_path / "none.jsonl") is None
