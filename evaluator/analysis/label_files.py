"""Reading a labels file (JSONL, CSV or Parquet) a user names: its rows with their line numbers, a
label cell as a number, the labels by case id (:func:`load_labels`: an empty cell is "not
labelled yet"), a grouping column (:func:`load_groups`) and ``--label-scale``; what a
``KEY.label`` field (a review worksheet's column) says: the criterion it rates
(:func:`rated_criteria`) and the scale its labels are on (:func:`rubric_label_scale`).
:mod:`evaluator.analysis.agreement.agreement` and :mod:`evaluator.analysis.estimate.estimate` read
labels through it, and :mod:`evaluator.analysis.designs` a worksheet's design columns."""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaluator.analysis import diagnostics
from evaluator.common.errors import UserError
from evaluator.common.readable import NotARegularFile, check_regular_file
from evaluator.data.csv_files import (
    SEMICOLON_HINT,
    UTF16,
    MalformedCsv,
    csv_records,
    first_line,
    not_utf8,
    read_cell,
    semicolon_separated,
    undecodable_line,
    utf16,
)
from evaluator.data.parquet_input import NotUtf8, ParquetInputError, ParquetRows
from evaluator.data.sheet import journal_with_labels
from evaluator.data.sources import LabelSource
from evaluator.rubrics.rubric import IntegerCriterion, Rubric


class AgreementError(UserError, ValueError):
    """The labels or results cannot be joined (missing field, no overlap, bad label)."""


# A number as a person writes it in a cell: Python's float() also takes "3_0" (30), "nan",
# "inf" and "infinity", none of which is a label.
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def label_number(value: object) -> float | None:
    """A label as a float, or None when it is not a finite decimal number (bools, "3_0",
    "nan" and "inf" are not numbers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        number = float(value.strip())
        return number if math.isfinite(number) else None
    return None


def label_criterion(label_field: str, comparable: Sequence[str]) -> str | None:
    """The criterion a label field names: KEY of a ``KEY.label`` field (the column a review
    worksheet has for each criterion) when KEY is one of ``comparable``, else None."""
    key = label_field.removesuffix(".label")
    return key if key != label_field and key in comparable else None


def rated_criteria(label_field: str, criteria: Sequence[str],
                   comparable: Sequence[str]) -> list[str]:
    """The criteria labels in ``label_field`` rate: ``criteria`` (``--criterion``) when
    given, else the one a ``KEY.label`` field names (:func:`label_criterion`); [] when
    neither says. A ``--criterion`` other than the one ``KEY.label`` names is refused: it
    would be compared with labels given for another criterion."""
    named = label_criterion(label_field, comparable)
    other = next((key for key in criteria if key != named), None)
    if named is not None and other is not None:
        raise AgreementError(f"--criterion {other!r}: the labels in {label_field!r} rate "
                             f"{named!r}; drop --criterion, or give the label column of "
                             f"{other!r}")
    return list(dict.fromkeys(criteria)) or ([named] if named is not None else [])


def rubric_label_scale(rubric: Rubric, label_field: str) -> tuple[list[float], str] | None:
    """The scale labels in a ``KEY.label`` field are on when KEY is an integer criterion of
    ``rubric`` (its allowed values) and how to name it, else None (an aggregate, or a plain
    label field: any number)."""
    scales = {f.key: f.allowed for f in rubric.output if isinstance(f, IntegerCriterion)}
    key = label_criterion(label_field, list(scales))
    if key is None:
        return None
    return [float(v) for v in scales[key]], f"the scale of {key!r} in rubric {rubric.name!r}"


def _show_scale(values: Sequence[float]) -> str:
    """A scale in a message: ``1-5`` for consecutive integers, else the values."""
    ints = [int(v) for v in values if float(v).is_integer()]
    if len(ints) == len(values) > 2 and ints == list(range(ints[0], ints[0] + len(ints))):
        return f"{ints[0]}-{ints[-1]}"
    return ", ".join(f"{v:g}" for v in values)


def label_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, row) for every row of a JSONL, CSV or Parquet labels file."""
    suffix = path.suffix.lower()
    if path.is_dir():
        raise AgreementError(f"{path} is a folder without a sheet.json: give a labels file "
                             "(.csv, .jsonl or .parquet) or a labelling sheet's folder "
                             "(evaluator review --out DIR)")
    try:
        check_regular_file(path, "labels file")
        if suffix not in (".csv", ".jsonl", ".parquet"):  # an .xlsx is no encoding issue
            raise AgreementError(f"{path}: labels must be a .jsonl, .csv or .parquet file "
                                 '(from a spreadsheet: save it as "CSV UTF-8")')
        if suffix == ".parquet":
            return _parquet_label_rows(path)
        data = path.read_bytes()
    except NotARegularFile as exc:
        raise AgreementError(str(exc)) from None
    except OSError as exc:
        raise AgreementError(f"{path}: cannot read labels file ({exc})") from None
    if utf16(data):
        raise AgreementError(f"{path}: {UTF16}")
    try:
        # utf-8-sig: Excel's "CSV UTF-8", and review.csv, start with a byte-order mark;
        # a script that wrote one more in front of it leaves a second. Bytes decoded as
        # they are: a carriage return inside a quoted cell stays one.
        text = data.decode("utf-8-sig").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        # A spreadsheet's plain "CSV" is Windows-1252: the line, never its text (PHI).
        where = f"line {undecodable_line(exc)}"
        raise AgreementError(f"{path}: {not_utf8(where, csv_file=suffix == '.csv')}") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    if suffix == ".csv":
        return _csv_label_rows(path, text)
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line, object_pairs_hook=_unique_keys(path, number))
        except json.JSONDecodeError as exc:
            raise AgreementError(f"{path} line {number}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise AgreementError(f"{path} line {number}: expected a JSON object")
        rows.append((number, row))
    return rows


def _parquet_label_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """A Parquet labels file's rows (every column; "line" N is row N), a string cell that
    is not UTF-8 refused by its row and column, never its value."""
    rows: list[tuple[int, dict[str, Any]]] = []
    try:
        for number, row in ParquetRows(path, None):
            bad = next((name for name, value in row.items() if isinstance(value, NotUtf8)), None)
            if bad is not None:
                raise AgreementError(f"{path} line {number}: column {bad!r} is not UTF-8 text")
            rows.append((number, row))
    except ParquetInputError as exc:
        raise AgreementError(str(exc)) from None
    return rows


def _csv_label_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """A CSV labels file's rows (:func:`csv_records`: a quoted cell may hold line breaks,
    case text on a sheet, and be of any length), every cell as the tool was given it
    (:func:`read_cell`: a worksheet's ``'=...`` id is ``=...``)."""
    if semicolon_separated(first_line(text)):
        raise AgreementError(f"{path} {SEMICOLON_HINT}")
    rows: list[tuple[int, dict[str, Any]]] = []
    header: list[str] | None = None
    for line, values in csv_records(io.StringIO(text, newline="")):
        if isinstance(values, MalformedCsv):
            raise AgreementError(f"{path}: {values.describe()}")
        if not values:
            continue
        cells = [read_cell(value) for value in values]
        if header is None:
            header = _unique_header(path, line, cells)
            continue
        if len(cells) > len(header):
            raise AgreementError(f"{path} line {line}: more cells than the header line has "
                                 "columns")
        # A short row's missing cells are None, as csv.DictReader gives them.
        rows.append((line, dict(zip(header, cells + [None] * (len(header) - len(cells))))))
    return rows


def _unique_header(path: Path, line: int, header: list[str]) -> list[str]:
    """``header``, refused when two columns have one name: a row read into a dict keeps
    the last of them, so the other column's labels would be dropped unsaid."""
    first: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if name in first:
            raise AgreementError(f"{path} line {line}: columns {first[name]} and {position} "
                                 f"are both named {name!r}; give each column its own name")
        first[name] = position
    return header


def _unique_keys(path: Path, number: int):
    """A ``json.loads`` object hook refusing a key given twice (json keeps the last)."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for key, value in pairs:
            if key in row:
                raise AgreementError(f"{path} line {number}: the key {key!r} appears twice; "
                                     "give each field once")
            row[key] = value
        return row
    return hook


def parse_label_scale(text: str) -> list[float]:
    """``--label-scale``: comma-separated values ("0,1,2") or an integer range ("1-5",
    "1..5"), sorted."""
    match = re.fullmatch(r"\s*(-?\d+)\s*(?:-|\.\.)\s*(-?\d+)\s*", text)
    if match:
        low, high = int(match.group(1)), int(match.group(2))
        if low >= high or high - low > 100:
            raise AgreementError(f"--label-scale {text!r}: a range LOW-HIGH with LOW < HIGH "
                                 "and at most 101 values")
        return [float(v) for v in range(low, high + 1)]
    values = [label_number(part) for part in text.split(",")]
    if not values or any(v is None for v in values) or len(set(values)) != len(values):
        raise AgreementError(f"--label-scale {text!r}: give distinct numbers separated by "
                             "commas (0,1,2) or a range (1-5)")
    return sorted(v for v in values if v is not None)


class Labels(dict[str, float]):
    """Case id -> numeric label, and ``unlabelled``: the rows whose label is still empty."""

    unlabelled: int = 0


def _empty(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "")


def load_labels(source: LabelSource, path: Path | None = None, *, allow_none: bool = False,
                rows: list[tuple[int, dict[str, Any]]] | None = None,
                rubric: Rubric | None = None) -> Labels:
    """Map case id -> numeric label, read from ``path`` (default: the source's one file) as
    ``source`` says. Every row needs the id and the label field; a label that is a number
    (one of the source's scale when given) is a label, an empty one (an empty CSV cell, JSON
    null: a worksheet row not labelled yet, ``evaluator review``) is skipped and counted,
    anything else is an error (so is a file with no label at all, unless ``allow_none``: a
    worksheet nobody has filled in yet). Errors name the file, lines and field, never a case
    id (the id column may hold case text). ``rows``: the file's :func:`label_rows`, when the
    caller has read them already (one read for every use). Without a scale, the labels of a
    ``KEY.label`` field naming an integer criterion of ``rubric`` are on its scale
    (:func:`rubric_label_scale`)."""
    path = Path(str(source.path if path is None else path))
    label_field, id_column, label_scale = str(source.field), source.id_column, source.scale
    rows = label_rows(path) if rows is None else rows
    if not rows:
        raise AgreementError(f"{path}: no label rows")
    if not any(label_field in row for _, row in rows):
        if path.suffix.lower() == ".csv":
            # A CSV's "fields" are its first line, which is a case (id, text) when the
            # header line is missing: count them, never show them.
            count = len({key for _, row in rows for key in row})
            raise AgreementError(f"{path}: no column is named {label_field!r} (the header "
                                 f"line has {count} columns; is the header line missing?)")
        fields = sorted({key for _, row in rows for key in row})
        shown = ", ".join(fields[:20]) + (" ..." if len(fields) > 20 else "")
        raise AgreementError(f"{path}: no row has the label field {label_field!r}; "
                             f"fields: {shown}")
    scale_name, advice = "--label-scale", ""
    found = (rubric_label_scale(rubric, label_field)
             if label_scale is None and rubric is not None else None)
    if found is not None:
        label_scale, scale_name = found
        advice = "; correct it, or give --label-scale if the labels use another scale"
    allowed = set(label_scale) if label_scale is not None else None
    labels = Labels()
    line_of: dict[str, int] = {}
    for number, row in rows:
        case_id = row.get(id_column)
        if case_id is None or str(case_id).strip() == "":
            raise AgreementError(f"{path} line {number}: no case id in {id_column!r}")
        case_id = str(case_id)
        if label_field not in row:
            raise AgreementError(f"{path} line {number}: field {label_field!r} is missing")
        if _empty(row[label_field]):
            labels.unlabelled += 1
            continue
        value = label_number(row[label_field])
        if value is None:
            raise AgreementError(f"{path} line {number}: field {label_field!r} is not a "
                                 "number "
                                 f"({type(row[label_field]).__name__})")
        if allowed is not None and value not in allowed:
            raise AgreementError(f"{path} line {number}: field {label_field!r} is {value:g}, "
                                 f"not on {scale_name} ({_show_scale(sorted(allowed))})"
                                 f"{advice}")
        if case_id in labels:
            raise AgreementError(f"{path} lines {line_of[case_id]} and {number} have the same "
                                 f"case id (in {id_column!r})")
        labels[case_id] = value
        line_of[case_id] = number
    if not labels and not allow_none:
        raise AgreementError(no_labels_yet(path, label_field))
    return labels


def no_labels_yet(path: Path, label_field: str) -> str:
    """The line for a labels file whose ``label_field`` is empty in every row: no labels
    yet, or, when the file is a sheet's worksheet and the sheet's journal holds labels (saved
    on the labelling page, which never writes the CSV), where they are."""
    folder = Path(path).parent
    if journal_with_labels(folder):
        return (f"{path}: every row's {label_field!r} is empty; the labels are in the "
                f"sheet's journal: give --labels {folder}")
    return f"{path}: every row's {label_field!r} is empty: no labels yet"


def load_groups(path: Path, column: str, id_column: str = "case_id", *,
                rows: list[tuple[int, dict[str, Any]]] | None = None) -> dict[str, str]:
    """Case id -> the value of the grouping column ``column`` of the labels file (``--by``);
    a row without it is in group "(none)". A column with more than
    :data:`diagnostics.MAX_GROUPS` values, or long values, is refused: it is not a grouping
    column and its values would be printed. ``rows``: the file's rows, when read already."""
    rows = label_rows(Path(path)) if rows is None else rows
    if not any(column in row for _, row in rows):
        raise AgreementError(f"{path}: no row has the --by column {column!r}")
    groups: dict[str, str] = {}
    for number, row in rows:
        value = row.get(column)
        text = "(none)" if value is None or str(value).strip() == "" else str(value).strip()
        if len(text) > diagnostics.MAX_GROUP_NAME or not text.isprintable():
            raise AgreementError(f"{path} line {number}: the --by column {column!r} holds a "
                                 f"value longer than {diagnostics.MAX_GROUP_NAME} characters "
                                 "or with control characters: not a grouping column")
        groups[str(row.get(id_column))] = text
    if len(set(groups.values())) > diagnostics.MAX_GROUPS:
        raise AgreementError(f"{path}: the --by column {column!r} has "
                             f"{len(set(groups.values()))} values (at most "
                             f"{diagnostics.MAX_GROUPS}): not a grouping column")
    return groups
