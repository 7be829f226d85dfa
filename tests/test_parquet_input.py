"""Parquet input (evaluator/data/parquet_input.py through evaluator/data/cases.py): the same
reader as JSONL and CSV, so the same mapping, ids, per-row validation and resume; a bad row
names the file, the row and the field, never the cell; a file that cannot be read is one
line and exit code 2."""

from __future__ import annotations

import datetime
import json
import os
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from evaluator.cli.main import cli
from evaluator.data.cases import Case, InputFileError, InputProblem, iter_cases, read_cases
from evaluator.data.parquet_input import ParquetRows
from evaluator.data.results import iter_records
from evaluator.rubrics.load import load_rubric
from tests.conftest import write_jsonl

pa = pytest.importorskip("pyarrow", reason="needs the parquet extra (pyarrow)")
pq = pytest.importorskip("pyarrow.parquet", reason="needs the parquet extra (pyarrow)")

SECRET = "PHI-PARQUET-5521"  # in case text: never in a message, a reason or stderr
RUBRIC = "drug_monograph_similarity"   # inputs Resp and Truth


@pytest.fixture
def drug():
    return load_rubric(RUBRIC)


def write_parquet(path: Path, columns: dict, **options) -> Path:
    """A Parquet file of ``columns`` (name -> a pyarrow array or a list)."""
    pq.write_table(pa.table(columns), path, **options)
    return path


def _good(n: int, start: int = 0) -> dict:
    return {"case_id": [f"c{i}" for i in range(start, start + n)],
            "Resp": [f"{SECRET} answer {i}" for i in range(start, start + n)],
            "Truth": [f"{SECRET} truth {i}" for i in range(start, start + n)]}


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def run(cases: Path, output: Path, *extra):
    return invoke("run", "-r", RUBRIC, "-m", "fake", "-i", cases, "-o", output,
                  "--no-progress", *extra)


def one_line_error(result, *needles: str) -> str:
    """Exit code 2, one line on stderr, naming ``needles``, with no case text."""
    assert result.exit_code == 2, result.output
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.output, result.output
    assert message.startswith("error: ") and SECRET not in result.output, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


# --- the reader -----------------------------------------------------------------------------

def test_string_columns_are_the_text_and_the_rows_come_in_file_order(tmp_path, drug):
    path = write_parquet(tmp_path / "cases.parquet", _good(2500), row_group_size=700)
    items = list(iter_cases(path, drug))
    assert [i.case_id for i in items] == [f"c{i}" for i in range(2500)]
    assert [i.line for i in items] == list(range(1, 2501))  # across batches and row groups
    assert items[1234] == Case("c1234", 1235, {"Resp": f"{SECRET} answer 1234",
                                               "Truth": f"{SECRET} truth 1234"})


def test_cells_are_judged_as_json_values_of_the_same_kind(tmp_path, drug):
    """Strings are text; finite numbers (decimals too) are their text, as in JSONL; null,
    booleans, NaN, lists, structs, maps, dates and binary are not text."""
    secret_bytes = SECRET.encode()
    rows = [
        ("ok", pa.array(["plain"], pa.string())),
        ("int", pa.array([42], pa.int64())),
        ("float", pa.array([1.5], pa.float64())),
        ("decimal", pa.array([Decimal("12.50")], pa.decimal128(6, 2))),
        ("dict", pa.array(["category"]).dictionary_encode()),
        ("large", pa.array(["large"], pa.large_string())),
        ("null", pa.array([None], pa.string())),
        ("bool", pa.array([True], pa.bool_())),
        ("nan", pa.array([float("nan")], pa.float64())),
        ("list", pa.array([[SECRET]], pa.list_(pa.string()))),
        ("struct", pa.array([{"text": SECRET}])),
        ("map", pa.array([[(SECRET, 1)]], pa.map_(pa.string(), pa.int64()))),
        ("date", pa.array([datetime.date(2020, 1, 2)], pa.date32())),
        ("timestamp", pa.array([datetime.datetime(2020, 1, 2, 3, 4)], pa.timestamp("us"))),
        ("binary", pa.array([secret_bytes], pa.binary())),
    ]
    got = {}
    for name, cell in rows:
        path = write_parquet(tmp_path / f"{name}.parquet",
                             {"case_id": ["x"], "Resp": cell, "Truth": ["t"]})
        [item] = read_cases(path, drug)
        got[name] = item
    assert {k: v.fields["Resp"] for k, v in got.items() if isinstance(v, Case)} == {
        "ok": "plain", "int": "42", "float": "1.5", "decimal": "12.50", "dict": "category",
        "large": "large"}
    kinds = {"null": "null", "bool": "boolean", "nan": "NaN or Infinity", "list": "array",
             "struct": "object", "map": "array", "date": "a date or time",
             "timestamp": "a date or time", "binary": "binary data"}
    for name, kind in kinds.items():
        problem = got[name]
        assert isinstance(problem, InputProblem), name
        assert problem.field == "Resp" and problem.line == 1
        assert f"expected text, got {kind};" in problem.message, (name, problem.message)
        text = problem.describe()
        assert text.startswith(f"{tmp_path / name}.parquet row 1 case 'x': field 'Resp':")
        assert SECRET not in text


def test_the_same_cells_in_jsonl_give_the_same_result(tmp_path, drug):
    """Numbers, null, lists and objects: the Parquet reader agrees with the JSONL one."""
    cells = [7, 2.25, None, [SECRET], {"a": SECRET}, True]
    for n, cell in enumerate(cells):
        row = {"case_id": "x", "Resp": cell, "Truth": "t"}
        [from_json] = read_cases(write_jsonl(tmp_path / f"{n}.jsonl", [row]), drug)
        [from_parquet] = read_cases(write_parquet(tmp_path / f"{n}.parquet",
                                                  {k: [v] for k, v in row.items()}), drug)
        assert type(from_json) is type(from_parquet), cell
        if isinstance(from_json, Case):
            assert from_json.fields == from_parquet.fields
        else:
            assert from_json.message == from_parquet.message


def test_bad_rows_name_row_and_field_and_the_others_go_on(tmp_path, drug):
    columns = _good(5)
    columns["Resp"][1] = None           # null in a required field
    columns["Truth"][2] = "   "         # blank
    columns["case_id"][3] = "x" * 500   # an id too long (a wrong --id-column, say)
    path = write_parquet(tmp_path / "cases.parquet", columns)
    items = read_cases(path, drug)
    problems = [i for i in items if isinstance(i, InputProblem)]
    assert [(p.line, p.field) for p in problems] == [(2, "Resp"), (3, "Truth"), (4, "case_id")]
    assert [i.case_id for i in items if isinstance(i, Case)] == ["c0", "c4"]
    for problem in problems:
        text = problem.describe()
        assert f"cases.parquet row {problem.line} " in text and SECRET not in text
        assert "x" * 50 not in text


def test_text_that_is_not_utf8_is_a_bad_row_not_a_bad_file(tmp_path, drug):
    # A string column holding bytes that are not UTF-8 (a writer that did not validate).
    resp = pa.array([b"fine", b"\xff\xfe" + SECRET.encode(), b"also fine"]).view(pa.string())
    path = write_parquet(tmp_path / "cases.parquet",
                         {"case_id": ["a", "b", "c"], "Resp": resp, "Truth": ["t"] * 3})
    items = read_cases(path, drug)
    assert [type(i).__name__ for i in items] == ["Case", "InputProblem", "Case"]
    assert items[1].field == "Resp" and "UTF-8" in items[1].message
    assert SECRET not in items[1].describe()


def test_map_id_column_and_numeric_ids(tmp_path, drug):
    path = write_parquet(tmp_path / "cases.parquet", {
        "row_id": pa.array([101, 102], pa.int64()), "answer": ["a", "b"], "reference": ["r", "s"],
        "unused": pa.array([[1, 2], None])})
    items = read_cases(path, drug, mapping={"Resp": "answer", "Truth": "reference"},
                       id_column="row_id")
    assert items == [Case("101", 1, {"Resp": "a", "Truth": "r"}),
                     Case("102", 2, {"Resp": "b", "Truth": "s"})]


def test_only_the_id_and_input_columns_are_read(tmp_path):
    path = write_parquet(tmp_path / "cases.parquet", {
        "case_id": ["a"], "Resp": ["r"], "Truth": ["t"], "huge": [SECRET * 1000]})
    assert ParquetRows(path, ["case_id", "Resp", "Truth", "absent"]).columns == [
        "case_id", "Resp", "Truth"]


def test_a_missing_column_is_an_input_error_on_every_row_as_in_csv(tmp_path, drug):
    columns = _good(3)
    del columns["Truth"]
    parquet = read_cases(write_parquet(tmp_path / "cases.parquet", columns), drug)
    csv_path = tmp_path / "cases.csv"
    csv_path.write_text("case_id,Resp\n" + "".join(f"c{i},r\n" for i in range(3)))
    from_csv = read_cases(csv_path, drug)
    assert [(p.line, p.field, p.message) for p in parquet] == [
        (n, "Truth", p.message) for n, p in enumerate(from_csv, start=1)]
    assert "required field is missing" in parquet[0].message and "--map" in parquet[0].message


def test_an_optional_input_may_be_missing_or_null(tmp_path):
    rubric = load_rubric("trial_eligibility")
    required = {name: ["x", "y"] for name, field in rubric.inputs.items() if field.required}
    optional = [name for name, field in rubric.inputs.items() if not field.required]
    assert optional
    items = read_cases(write_parquet(tmp_path / "a.parquet", required), rubric)
    assert all(isinstance(i, Case) and i.fields[optional[0]] == "" for i in items)
    with_nulls = dict(required, **{optional[0]: pa.array([None, "given"], pa.string())})
    items = read_cases(write_parquet(tmp_path / "b.parquet", with_nulls), rubric)
    assert [i.fields[optional[0]] for i in items] == ["", "given"]


def test_two_columns_of_one_name_are_refused(tmp_path, drug):
    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["r"]), pa.array(["x"]),
                                  pa.array(["t"])], names=["case_id", "Resp", "Resp", "Truth"])
    path = tmp_path / "dup.parquet"
    pq.write_table(table, path)
    with pytest.raises(InputFileError, match=r"dup.parquet: columns 2 and 3 are both named "
                                             r"'Resp'"):
        read_cases(path, drug)


def test_duplicate_ids_stop_before_anything_runs(tmp_path, drug):
    path = write_parquet(tmp_path / "cases.parquet", {"case_id": ["a", "b", "a"],
                                                      "Resp": ["r"] * 3, "Truth": ["t"] * 3})
    with pytest.raises(InputFileError, match=r"duplicate case ids \(rows 1 and 3"):
        read_cases(path, drug)


def test_a_fifo_named_parquet_is_refused_without_opening_it(tmp_path, drug):
    fifo = tmp_path / "cases.parquet"
    os.mkfifo(fifo)  # opening it would block until something writes to it
    with pytest.raises(InputFileError, match="FIFO"):
        iter_cases(fifo, drug)


# --- files that are not Parquet, or damaged -------------------------------------------------

def _damaged(tmp_path: Path) -> dict[str, Path]:
    good = write_parquet(tmp_path / "good.parquet", _good(3000), row_group_size=1000)
    data = good.read_bytes()
    files = {"empty": b"", "text": f"case_id,Resp\n1,{SECRET}\n".encode(),
             "truncated": data[: len(data) // 2], "jsonl": b'{"case_id": "a"}\n'}
    middle = bytearray(data)
    middle[100:len(data) // 2] = bytes(len(data) // 2 - 100)  # pages zeroed, footer intact
    files["zeroed pages"] = bytes(middle)
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name.replace(' ', '_')}.parquet"
        paths[name].write_bytes(content)
    return paths


def test_a_file_that_is_not_parquet_or_is_damaged_is_one_line(tmp_path, drug):
    for name, path in _damaged(tmp_path).items():
        with pytest.raises(InputFileError) as caught:
            read_cases(path, drug)
        message = str(caught.value)
        assert message.startswith(f"{path}: ") and "\n" not in message, name
        assert SECRET not in message
        expected = "empty (0 bytes)" if name == "empty" else "cannot be read as Parquet"
        assert expected in message, (name, message)


def test_the_cli_refuses_a_damaged_parquet_file_before_judging(tmp_path):
    for name, path in _damaged(tmp_path).items():
        output = tmp_path / f"out-{path.stem}.jsonl"
        one_line_error(run(path, output), str(path))
        assert not output.exists(), name


def test_a_parquet_file_with_no_rows_is_a_run_of_no_cases(tmp_path):
    empty = write_parquet(tmp_path / "none.parquet",
                          {k: pa.array([], pa.string()) for k in ("case_id", "Resp", "Truth")})
    result = run(empty, tmp_path / "out.jsonl", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["cases"] == 0


def test_without_pyarrow_the_run_says_which_extra_to_install(tmp_path, monkeypatch):
    path = write_parquet(tmp_path / "cases.parquet", _good(2))
    for name in [m for m in sys.modules if m == "pyarrow" or m.startswith("pyarrow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    output = tmp_path / "out.jsonl"
    one_line_error(run(path, output), "pip install 'evaluator[parquet]'")
    assert not output.exists()


# --- whole runs with the fake judge ---------------------------------------------------------

def _records(path: Path) -> dict:
    return {r.case_id: r for r in iter_records(path)}


def test_a_run_on_parquet_gives_the_records_a_jsonl_run_gives(tmp_path):
    columns = _good(6)
    columns["Resp"][2] = None   # null in a required field
    columns["Truth"][4] = " "   # blank
    rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
    parquet = write_parquet(tmp_path / "cases.parquet", columns)
    jsonl = write_jsonl(tmp_path / "cases.jsonl", rows)
    for source in (parquet, jsonl):
        result = run(source, tmp_path / f"{source.suffix[1:]}.jsonl")
        assert result.exit_code == 1, result.output  # two cases have no verdict
        assert SECRET not in result.output
    from_parquet, from_jsonl = (_records(tmp_path / "parquet.jsonl"),
                                _records(tmp_path / "jsonl.jsonl"))
    assert set(from_parquet) == set(from_jsonl) == set(columns["case_id"])
    for case_id, record in from_parquet.items():
        other = from_jsonl[case_id]
        assert (record.status, record.scores, record.input_line, record.prompt_hash) == (
            other.status, other.scores, other.input_line, other.prompt_hash)
        assert record.input_file == str(parquet)
    bad = [from_parquet["c2"], from_parquet["c4"]]
    assert [r.status for r in bad] == ["input_error", "input_error"]
    assert bad[0].reason.startswith(f"{parquet} row 3 case 'c2': field 'Resp': expected text, "
                                    "got null")
    assert bad[1].reason.startswith(f"{parquet} row 5 case 'c4': field 'Truth': required "
                                    "field is empty")
    assert all(SECRET not in r.reason for r in bad)


def test_map_and_id_column_on_the_command_line(tmp_path):
    path = write_parquet(tmp_path / "cases.parquet", {
        "id": ["p", "q"], "generated": [f"{SECRET} a", f"{SECRET} b"],
        "reference": ["r", "s"]})
    result = run(path, tmp_path / "out.jsonl", "--map", "Resp=generated", "--map",
                 "Truth=reference", "--id-column", "id")
    assert result.exit_code == 0, result.output
    records = _records(tmp_path / "out.jsonl")
    assert set(records) == {"p", "q"} and {r.status for r in records.values()} == {"ok"}


def test_strict_stops_at_a_bad_parquet_row_naming_it(tmp_path):
    columns = _good(3)
    columns["Resp"][1] = None
    path = write_parquet(tmp_path / "cases.parquet", columns)
    result = run(path, tmp_path / "out.jsonl", "--strict")
    assert result.exit_code == 3, result.output
    assert "cases.parquet row 2 field 'Resp'" in result.stderr and SECRET not in result.output


def test_a_parquet_run_resumes(tmp_path):
    output = tmp_path / "out.jsonl"
    first = _good(4)
    first["Resp"][3] = None  # a bad row, fixed in the second file
    path = write_parquet(tmp_path / "cases.parquet", first)
    assert run(path, output).exit_code == 1
    assert _records(output)["c3"].status == "input_error"
    # The file is rewritten with the bad row fixed and two more cases: only those three run.
    write_parquet(path, _good(6))
    result = run(path, output)
    assert result.exit_code == 0, result.output
    assert "3 case(s) already done, 1 to judge again" in result.stderr
    lines = output.read_text().splitlines()
    assert sorted(json.loads(line)["case_id"] for line in lines) == [f"c{i}" for i in range(6)]
    assert {r.status for r in _records(output).values()} == {"ok"}
    # A finished case whose text changed is refused, naming the row and never the text.
    changed = _good(6)
    changed["Resp"][0] = f"{SECRET} edited"
    write_parquet(path, changed)
    refused = one_line_error(run(path, output), "cannot be resumed", "'c0'")
    assert "input line 1" in refused


def test_the_output_is_never_the_parquet_input(tmp_path):
    path = write_parquet(tmp_path / "cases.parquet", _good(2))
    before = path.read_bytes()
    link = tmp_path / "link.parquet"
    link.symlink_to(path)
    for output in (path, link):
        one_line_error(run(path, output), str(output))
    assert path.read_bytes() == before


def test_versus_reads_two_parquet_files(tmp_path):
    shared = {"patient_profile": "A 58-year-old woman.", "trial_id": "NCT001",
              "trial_title": "A trial", "eligibility_criteria": "Adults.",
              "ground_truth_label": "Likely Eligible"}
    a = write_parquet(tmp_path / "gpt.parquet", {
        "case_id": ["c0", "c1", "c2"], "answer": [f"{SECRET} gpt {i}" for i in range(3)],
        **{k: [v] * 3 for k, v in shared.items()}})
    b = write_parquet(tmp_path / "llama.parquet", {
        "case_id": ["c2", "c0", "c1"], "answer": ["llama 2", "llama 0", None],
        **{k: [v] * 3 for k, v in shared.items()}})
    result = invoke("run", "-r", "trial_eligibility_pairwise", "-m", "fake", "-i", a,
                    "--versus", b, "--answer-column", "answer", "-o", tmp_path / "out.jsonl",
                    "--no-progress")
    assert result.exit_code == 1, result.output  # c1's answer in llama.parquet is null
    records = _records(tmp_path / "out.jsonl")
    assert records["c0"].status == records["c2"].status == "ok"
    assert records["c0"].pairwise.systems == {"A": "gpt", "B": "llama"}
    assert records["c1"].status == "input_error"
    assert "its row in llama.parquet (row 3) cannot be used" in records["c1"].reason
    assert SECRET not in records["c1"].reason
