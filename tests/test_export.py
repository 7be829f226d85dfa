"""``evaluator export RESULTS --parquet OUT`` (evaluator/report/export.py,
export_columns.py): one typed row per record, read back with pandas, polars and DuckDB (the
snippets of docs/dataframes.md, run as written); no text unless --with-text; written like
every other output (0600, atomically, never over an input or through a link)."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.results import iter_records
from evaluator.judges.backends.fake import FakeBackend
from evaluator.judges.models_file import JudgeSpec
from evaluator.report import export as export_module
from evaluator.report.export_columns import export_columns
from evaluator.rubrics.load import load_rubric
from evaluator.run.runner import evaluate
from tests.conftest import ROOT, example_cases, refused_in_one_line, run_options, write_jsonl

pa = pytest.importorskip("pyarrow", reason="needs the parquet extra (pyarrow)")
pq = pytest.importorskip("pyarrow.parquet", reason="needs the parquet extra (pyarrow)")

SECRET = "PHI-EXPORT-3307"  # in case text and the judge's reasoning
RUBRIC = "pathology_report"
CRITERIA = ("critical_finding_concordance", "factual_accuracy", "factual_completeness",
            "overall_equivalence")
DOC = ROOT / "docs" / "dataframes.md"


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def refused(result, *needles: str) -> str:
    """Exit code 2, one line on stderr naming ``needles``, no traceback, no case text."""
    return refused_in_one_line(result, SECRET, *needles)


def _verdict(scores: tuple[int, int, int, int], reasoning: str) -> str:
    body = dict(zip(CRITERIA, scores), reasoning=reasoning)
    return json.dumps(body, separators=(",", ":"))


def _cases(tmp_path: Path) -> list[dict]:
    rows = [dict(row, case_id=f"p{i}", generated_report=f"{SECRET} {row['generated_report']}")
            for i, row in enumerate(example_cases(RUBRIC))]
    rows.append({"case_id": "bad", "reference_report": f"{SECRET} ref",
                 "generated_report": "  "})  # an input_error
    return rows


SCRIPT = [(4, 3, 3, 4), (2, 1, 2, 1), (3, 2, 3, 3)]


@pytest.fixture
def results(tmp_path) -> Path:
    """A finished pathology_report run (scripted verdicts whose reasoning quotes the case)
    with one input_error, its input a Parquet file (tmp_path/cases.parquet)."""
    rows = _cases(tmp_path)
    cases = tmp_path / "cases.parquet"
    pq.write_table(pa.Table.from_pylist(rows), cases)
    backend = FakeBackend([_verdict(s, f"quotes {SECRET}") for s in SCRIPT])
    output = tmp_path / "results.jsonl"
    evaluate(*run_options(rubric=RUBRIC, input_path=cases, output_path=output,
                          judge_spec=JudgeSpec(backend="fake"), backend=backend))
    return output


def export(results: Path, target: Path, *extra):
    return invoke("export", results, "--parquet", target, *extra)


def test_one_typed_row_per_record_and_no_text(results, tmp_path):
    target = tmp_path / "results.parquet"
    result = export(results, target)
    assert result.exit_code == 0, result.output
    assert "4 row(s)" in result.stderr
    table = pq.read_table(target)
    types = {f.name: str(f.type) for f in table.schema}
    for key in CRITERIA:
        assert types[f"score_{key}"] == "int64"
        assert types[f"expected_{key}"] == types[f"confidence_{key}"] == "double"
    assert types["case_id"] == types["status"] == types["reason"] == "string"
    assert types["prompt_tokens"] == types["completion_tokens"] == "int64"
    assert types["batch_seconds"] == "double" and types["record_version"] == "int64"
    assert not [name for name in types if name.startswith(("text_", "explanations_"))
                or name == "raw_output"]
    rows = {r["case_id"]: r for r in table.to_pylist()}
    records = {r.case_id: r for r in iter_records(results)}
    assert set(rows) == set(records) == {"p0", "p1", "p2", "bad"}
    for case_id, record in records.items():
        row = rows[case_id]
        assert (row["status"], row["reason"], row["judge"], row["record_version"]) == (
            record.status, record.reason, record.judge, record.record_version)
        for key in CRITERIA:
            if record.status == "ok":
                assert row[f"score_{key}"] == record.scores[key]
                assert row[f"expected_{key}"] == pytest.approx(
                    record.distributions[key].expected)
                assert row[f"confidence_{key}"] == record.distributions[key].confidence
            else:
                assert row[f"score_{key}"] is None and row[f"expected_{key}"] is None
    assert [rows[f"p{i}"]["score_critical_finding_concordance"] for i in range(3)] == [
        s[0] for s in SCRIPT]
    assert rows["bad"]["input_line"] == 4 and "row 4" in rows["bad"]["reason"]
    assert SECRET not in json.dumps(table.to_pylist())


def test_with_text_adds_the_judges_text(results, tmp_path):
    target = tmp_path / "with-text.parquet"
    result = export(results, target, "--with-text")
    assert result.exit_code == 0 and "can quote the case" in result.stderr
    table = pq.read_table(target)
    assert {"text_reasoning", "raw_output"} <= set(table.column_names)
    texts = dict(zip(table["case_id"].to_pylist(), table["text_reasoning"].to_pylist()))
    assert texts["p0"] == f"quotes {SECRET}" and texts["bad"] is None
    # The case's own text is never copied: only the judge's.
    assert not any("generated_report" in name for name in table.column_names)


def test_read_back_with_pandas_polars_and_duckdb(results, tmp_path):
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars", reason="needs the test-tools extra")
    duckdb = pytest.importorskip("duckdb", reason="needs the test-tools extra")
    target = tmp_path / "results.parquet"
    assert export(results, target).exit_code == 0
    frame = pd.read_parquet(target, dtype_backend="numpy_nullable")
    assert str(frame["score_overall_equivalence"].dtype) == "Int64"  # nullable: "bad" has none
    assert str(frame["expected_overall_equivalence"].dtype) == "Float64"
    assert frame.set_index("case_id")["score_overall_equivalence"].isna().to_dict() == {
        "p0": False, "p1": False, "p2": False, "bad": True}
    polars = pl.read_parquet(target)
    assert polars.schema["score_overall_equivalence"] == pl.Int64
    assert polars.schema["confidence_factual_accuracy"] == pl.Float64
    assert polars.schema["status"] == pl.String
    assert polars.filter(pl.col("status") == "ok")["score_overall_equivalence"].to_list() == [
        4, 1, 3]
    [(mean,)] = duckdb.sql(f"SELECT avg(score_critical_finding_concordance) FROM '{target}' "
                           "WHERE status = 'ok'").fetchall()
    assert mean == pytest.approx(sum(s[0] for s in SCRIPT) / 3)


def _doc_blocks(language: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)


def test_the_snippets_of_docs_dataframes_run_as_written(results, tmp_path, monkeypatch,
                                                        capsys):
    pytest.importorskip("polars", reason="needs the test-tools extra")
    duckdb = pytest.importorskip("duckdb", reason="needs the test-tools extra")
    python, sql = _doc_blocks("python"), _doc_blocks("sql")
    assert len(python) >= 2 and sql, "docs/dataframes.md lost its pandas/polars/SQL snippets"
    monkeypatch.chdir(tmp_path)  # the snippets read results.parquet and cases.parquet here
    assert export(results, tmp_path / "results.parquet").exit_code == 0
    for block in python:
        exec(compile(block, str(DOC), "exec"), {})
    printed = capsys.readouterr().out
    assert "score_overall_equivalence" in printed or "overall_equivalence" in printed
    for query in sql:
        rows = duckdb.sql(query).fetchall()
        assert rows, query
    assert SECRET not in printed


def test_fractional_scores_are_float64_and_items_are_lists(tmp_path):
    # Two samples reduced by their median: a score can be 2.5, so the column is float64.
    cases = write_jsonl(tmp_path / "cases.jsonl", example_cases(RUBRIC))
    output = tmp_path / "samples.jsonl"
    verdicts = [_verdict(s, "r") for s in [(2, 1, 1, 1), (3, 1, 1, 1)] * 3]
    evaluate(*run_options(rubric=RUBRIC, input_path=cases, output_path=output,
                          judge_spec=JudgeSpec(backend="fake"),
                          backend=FakeBackend(verdicts), samples=2, temperature=0.5,
                          batch_size=1))
    assert export(output, tmp_path / "samples.parquet").exit_code == 0
    table = pq.read_table(tmp_path / "samples.parquet")
    assert str(table.schema.field("score_critical_finding_concordance").type) == "double"
    assert table["score_critical_finding_concordance"].to_pylist() == [2.5, 2.5, 2.5]
    # ECG: criteria of items are list columns, one entry per item.
    ecg = tmp_path / "ecg.jsonl"
    evaluate(*run_options(rubric="ecg_interpretation",
                          input_path=write_jsonl(tmp_path / "ecg-cases.jsonl",
                                                 example_cases("ecg_interpretation")),
                          output_path=ecg, judge_spec=JudgeSpec(backend="fake"),
                          backend=FakeBackend()))
    assert export(ecg, tmp_path / "ecg.parquet").exit_code == 0
    table = pq.read_table(tmp_path / "ecg.parquet")
    for name, inner in (("score_DiagnosisAccuracy", pa.int64()),
                        ("expected_DiagnosisAccuracy", pa.float64())):
        kind = table.schema.field(name).type
        assert pa.types.is_list(kind) and kind.value_type == inner, (name, kind)
    assert str(table.schema.field("aggregate_DiagnosisAccuracy").type) == "double"
    record = next(iter_records(ecg))
    row = table.to_pylist()[0]
    assert row["score_DiagnosisAccuracy"] == [i["Score"] for i in
                                              record.scores["DiagnosisAccuracy"]]
    assert row["aggregate_LeadAssessmentCoverage"] == pytest.approx(
        record.aggregates["LeadAssessmentCoverage"])


def test_a_pairwise_results_file_gives_each_criterions_outcome(tmp_path):
    rubric = "trial_eligibility_pairwise"
    cases = write_jsonl(tmp_path / "pairs.jsonl", example_cases(rubric))
    output = tmp_path / "pairs-results.jsonl"
    evaluate(*run_options(rubric=rubric, input_path=cases, output_path=output,
                          judge_spec=JudgeSpec(backend="fake"), backend=FakeBackend()))
    assert export(output, tmp_path / "pairs.parquet").exit_code == 0
    table = pq.read_table(tmp_path / "pairs.parquet")
    records = list(iter_records(output))
    choices = [f.key for f in load_rubric(rubric).choices()]
    assert choices
    for key in choices:
        assert str(table.schema.field(f"outcome_{key}").type) == "string"
        assert table[f"outcome_{key}"].to_pylist() == [
            r.pairwise.outcome[key] if r.pairwise and r.pairwise.outcome else None
            for r in records]
    assert table["system_a"].to_pylist() == [r.pairwise.systems["A"] for r in records]
    assert table["length_b"].to_pylist() == [r.pairwise.lengths["B"] for r in records]
    assert not [n for n in table.column_names if n.startswith(("score_", "text_"))]
    # --with-text: each string field as written in each order.
    assert export(output, tmp_path / "pairs-text.parquet", "--with-text").exit_code == 0
    texts = pq.read_table(tmp_path / "pairs-text.parquet")
    strings = [f.key for f in load_rubric(rubric).output if f.type == "string"]
    assert strings
    for key in strings:
        for side, first in (("a", "A"), ("b", "B")):
            assert texts[f"text_{key}_{side}_first"].to_pylist() == [
                next(o.verdict[key] for o in r.pairwise.orders if o.first == first)
                for r in records]


def test_written_in_batches_with_mode_0600_and_no_temporary_file_left(results, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setattr(export_module, "BATCH_ROWS", 3)
    target = tmp_path / "out" / "new" / "results.parquet"
    old = os.umask(0)
    try:
        assert export(results, target).exit_code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert pq.ParquetFile(target).metadata.num_row_groups == 2  # 3 + 1 records
    assert [p.name for p in target.parent.iterdir()] == ["results.parquet"]


def test_a_large_results_file_is_streamed_in_batches(tmp_path, monkeypatch):
    """The records reach the writer a batch at a time, no batch larger than BATCH_ROWS,
    and the first batch is written before the rest of the file is read."""
    path = _results_of(tmp_path, 50)
    monkeypatch.setattr(export_module, "BATCH_ROWS", 8)
    read = [0]
    real_lines = export_module.analysis_lines

    def counted(reader):
        for line in real_lines(reader):
            read[0] += 1
            yield line

    written: list[tuple[int, int]] = []  # (rows in the batch, records read so far)
    real_write = pq.ParquetWriter.write_batch

    def spy(self, batch, *args, **kwargs):
        written.append((batch.num_rows, read[0]))
        return real_write(self, batch, *args, **kwargs)

    monkeypatch.setattr(export_module, "analysis_lines", counted)
    monkeypatch.setattr(pq.ParquetWriter, "write_batch", spy)
    assert export(path, tmp_path / "many.parquet").exit_code == 0
    assert [rows for rows, _ in written] == [8] * 6 + [2]
    assert written[0][1] == 50 + 8  # the whole first pass, then one batch of the second
    assert pq.read_table(tmp_path / "many.parquet").num_rows == 50


def _results_of(tmp_path: Path, n: int) -> Path:
    rows = [{"case_id": f"c{i}", "reference_report": "r", "generated_report": "g"}
            for i in range(n)]
    output = tmp_path / "many.jsonl"
    evaluate(*run_options(rubric=RUBRIC, input_path=write_jsonl(tmp_path / "m.jsonl", rows),
                          output_path=output, judge_spec=JudgeSpec(backend="fake"),
                          backend=FakeBackend()))
    return output


# --- where it may write ---------------------------------------------------------------------

def test_never_over_the_results_the_case_file_or_a_copy_of_it(results, tmp_path):
    cases = tmp_path / "cases.parquet"
    before = cases.read_bytes()
    for extra in ((), ("--overwrite",)):
        refused(export(results, cases, *extra), "own inputs", "cases.parquet")
    copy = tmp_path / "copy.parquet"  # the run's input under another name (manifest hash)
    copy.write_bytes(before)
    refused(export(results, copy, "--overwrite"), "copy.parquet", "case file")
    named = tmp_path / "results.parquet"  # a results file named .parquet
    named.write_bytes(results.read_bytes())
    refused(export(named, named, "--overwrite"), "own inputs")
    refused(export(results, tmp_path / "results.csv"), "ending in .parquet")

    assert cases.read_bytes() == before and copy.read_bytes() == before


def test_the_case_files_name_beside_the_results_is_free_when_no_file_is_there(tmp_path,
                                                                            monkeypatch):
    """cases.parquet judged (from its own folder) into out/cases.jsonl: out/cases.parquet is
    the case file's relative name read beside the results, but no file is there, so nothing
    can be overwritten (it was refused as 'one of the export's own inputs', even with
    --overwrite); the case file itself stays refused."""
    monkeypatch.chdir(tmp_path)
    pq.write_table(pa.Table.from_pylist(_cases(tmp_path)), "cases.parquet")
    (tmp_path / "out").mkdir()
    results = Path("out") / "cases.jsonl"
    evaluate(*run_options(rubric=RUBRIC, input_path=Path("cases.parquet"),
                          output_path=results, judge_spec=JudgeSpec(backend="fake"),
                          backend=FakeBackend()))
    done = export(results, Path("out") / "cases.parquet")
    assert done.exit_code == 0, done.output
    assert pq.read_table(tmp_path / "out" / "cases.parquet").num_rows == 4
    refused(export(results, Path("cases.parquet"), "--overwrite"), "own inputs")

def test_never_through_a_symbolic_link(results, tmp_path):
    real = tmp_path / "real.parquet"
    real.write_bytes(b"keep")
    link = tmp_path / "link.parquet"
    link.symlink_to(real)
    for extra in ((), ("--overwrite",)):
        refused(export(results, link, *extra), "symbolic link")
    assert real.read_bytes() == b"keep" and link.is_symlink()


def test_another_file_needs_overwrite_and_an_export_is_replaced(results, tmp_path):
    mine = tmp_path / "mine.parquet"
    pq.write_table(pa.table({"x": [1]}), mine)
    before = mine.read_bytes()
    refused(export(results, mine), "not a Parquet export written by evaluator", "--overwrite")
    assert mine.read_bytes() == before
    assert export(results, mine, "--overwrite").exit_code == 0
    assert "score_overall_equivalence" in pq.read_schema(mine).names
    assert export(results, mine).exit_code == 0  # an export of ours: replaced without it


def test_unusable_results_are_one_line(results, tmp_path):
    target = tmp_path / "x.parquet"
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(results.read_text().splitlines()[0] + "\n{not a record}\n")
    refused(export(damaged, target), "damaged.jsonl line 2", "not a result record")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    refused(export(empty, target), "no records")
    renamed = tmp_path / "other.jsonl"
    renamed.write_text(results.read_text().replace('"rubric":"pathology_report"',
                                                   '"rubric":"trial_eligibility"'))
    refused(export(renamed, target), "scores.critical_finding_concordance", "does not declare")
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    refused(export(fifo, target), "FIFO")
    assert not target.exists()


def test_a_torn_last_line_is_left_out_and_said_so(results, tmp_path):
    # A run killed mid-write leaves its last line cut short: not a record, so not exported,
    # but the user is told (a row silently missing would look like a complete export).
    lines = results.read_text().splitlines(keepends=True)
    torn = tmp_path / "torn.jsonl"
    torn.write_text("".join(lines[:-1]) + lines[-1][:40])
    target = tmp_path / "torn.parquet"
    result = export(torn, target)
    assert result.exit_code == 0, result.output
    assert pq.read_table(target).num_rows == len(lines) - 1
    note = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(note) == 1 and "torn.jsonl" in note[0] and "cut short" in note[0], result.stderr
    assert SECRET not in result.stderr
    assert "note:" not in export(results, tmp_path / "whole.parquet").stderr


def test_without_pyarrow_it_says_which_extra_to_install(results, tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    refused(export(results, tmp_path / "x.parquet"), "pip install 'evaluator[parquet]'")


def test_column_names_are_plain_identifiers_for_every_builtin_rubric():
    for path in sorted((ROOT / "prompts").glob("*.yaml")):
        rubric = load_rubric(path.stem)
        names = [c.name for c in export_columns(rubric, with_text=True)]
        assert len(names) == len(set(names)), path.stem
        assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n) for n in names), path.stem
