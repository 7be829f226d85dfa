"""Reading cases (JSONL, CSV, Parquet) and validating them against a rubric's input fields.

Every problem is reported with file, line, case id and field, and never with the case text
itself (it may be PHI): messages name only columns, types, lengths and line numbers. A bad
row becomes an :class:`InputProblem`; the good rows go on.

What counts as malformed: a line that is not UTF-8 or not one JSON object (raw control
characters inside JSON strings included; an escaped ``\\u0000`` is text), a CSV row with the
wrong number of values, a NUL byte or a quoting error, a missing, empty or non-text field, an
unusable id. A byte-order mark, CRLF line ends and fields of any size are accepted.

Parquet (:mod:`evaluator.data.parquet_input`) is a third source of the same rows: only the
id and input columns are read, batch by batch, and each cell is judged as a JSON value of
the same kind would be (a string is the text; a finite number, a decimal included, is its
text; null, a boolean, a list, a struct, a date, a timestamp or binary data is not text). A
row's ``line`` is its row number (the first row is 1).
"""

from __future__ import annotations

import codecs
import datetime
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from evaluator.common.errors import UserError
from evaluator.data.case_ids import CaseIds
from evaluator.data.csv_files import (
    QUOTING_HINT,
    SEMICOLON_HINT,
    UTF16,
    MalformedCsv,
    csv_records,
    not_utf8,
    semicolon_separated,
)
from evaluator.data.parquet_input import NotUtf8, ParquetInputError, ParquetRows
from evaluator.rubrics.rubric import InputField, Rubric

SUPPORTED_SUFFIXES = (".jsonl", ".csv", ".parquet")
MAX_ID_LENGTH = 200
_NAME_LIMIT = 60


class InputFileError(UserError, ValueError):
    """The input file as a whole cannot be used (unreadable, unknown format, duplicate ids)."""


@dataclass(frozen=True)
class Case:
    """One valid case: its id, where it came from, and the rubric's input fields.
    ``null_id``: the row has the id column but it is null (JSON ``null``, a Parquet null),
    so the id is ``line-N``; the run says how many rows that happened to."""

    case_id: str
    line: int
    fields: dict[str, str]
    null_id: bool = False


@dataclass(frozen=True)
class InputProblem:
    """A row that cannot be judged, with what to do about it."""

    case_id: str
    line: int
    field: str | None
    message: str
    file: str = ""

    def describe(self, *, with_id: bool = True) -> str:
        """``file:line case 'id': field 'name': message`` (``file row N ...`` for Parquet),
        with no case text. Pass ``with_id=False`` for the terminal: an id read from a wrong
        ``--id-column`` is case text, and the line already says which row it is."""
        where = (f"{self.file} row {self.line}" if line_word(self.file) == "row"
                 else f"{self.file}:{self.line}")
        case = f" case {self.case_id!r}:" if with_id else ""
        column = f" field {self.field!r}:" if self.field else ""
        return f"{where}{case}{column} {self.message}"


@dataclass
class _Row:
    line: int
    data: dict[str, object] | None = None
    problem: str | None = None
    field: str | None = None


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    value = dict(pairs)
    if len(value) != len(pairs):  # json.loads would silently keep the last one
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return value


def line_word(path: Path | str) -> str:
    """How a position in a case file is named in messages: ``row`` in a Parquet file (it
    has no lines), else ``line``."""
    return "row" if Path(path).suffix.lower() == ".parquet" else "line"


def _short_name(name: str) -> str:
    """A key or column name from the file, cut to a length fit for a message."""
    return name if len(name) <= _NAME_LIMIT else name[:_NAME_LIMIT - 3] + "..."


def _kind(value: object) -> str:
    """The JSON type of a value, for messages (never the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if ((isinstance(value, float) and not math.isfinite(value))
            or (isinstance(value, Decimal) and not value.is_finite())):
        return "NaN or Infinity"
    # Parquet cells as pyarrow converts them (a map column is a list of pairs: an array).
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        return "a date or time"
    if isinstance(value, (bytes, bytearray)):
        return "binary data"
    names = {dict: "object", list: "array", tuple: "array", str: "string", int: "number",
             float: "number", Decimal: "number"}
    return names.get(type(value), type(value).__name__)


def _is_text(text: str) -> bool:
    """False for lone surrogates: undecodable CSV bytes, or unpaired ``\\udXXX`` escapes."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _parse_json_line(number: int, text: str) -> _Row:
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        return _Row(number, problem="key appears more than once in the object; keep only one",
                    field=_short_name(exc.key))
    except json.JSONDecodeError as exc:
        # The phrase before any ':' is fixed; the pure-Python decoder appends line text after it.
        reason = exc.msg.split(":")[0].removesuffix(" at")
        return _Row(number, problem=f"not valid JSON ({reason} at column {exc.colno}); each "
                                    "line must be one JSON object")
    except RecursionError:
        return _Row(number, problem="not readable: JSON nested too deeply; each line must be "
                                    "one flat JSON object of text fields")
    except ValueError:  # an integer of more than 4,300 digits
        return _Row(number, problem="not readable: a JSON number is too long; give long "
                                    "values as strings")
    if not isinstance(value, dict):
        return _Row(number, problem=f"expected a JSON object, got {_kind(value)}; each line must "
                                    "be one JSON object")
    return _Row(number, value)


def _read_jsonl(path: Path) -> Iterator[_Row]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                # utf-8-sig drops a byte-order mark: at the start of the file, or where
                # files with one were concatenated.
                text = raw.decode("utf-8-sig")
            except UnicodeDecodeError:
                yield _Row(number, problem=not_utf8("line", csv_file=False))
                continue
            if text.strip():
                yield _parse_json_line(number, text)


def _read_csv(path: Path) -> Iterator[_Row]:
    # surrogateescape keeps undecodable bytes as lone surrogates, so one bad row is
    # reported on its own instead of failing the whole file.
    with path.open("r", encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
        line = handle.readline()
        while line and not line.strip():
            line = handle.readline()
        if semicolon_separated(line):
            raise InputFileError(f"{path} {SEMICOLON_HINT}")
        handle.seek(0)  # back to the start (a BOM is skipped again)
        header: list[str] | None = None
        for start, values in csv_records(handle):
            if isinstance(values, MalformedCsv):
                if header is None:
                    raise InputFileError(f"{path}: header row cannot be read: "
                                         f"{values.reason}") from None
                yield _Row(start, problem=values.describe(skipped=True))
                continue
            if not values or (len(values) == 1 and not values[0].strip()):
                continue
            if header is None:
                header = _check_header(path, values)
            elif len(values) != len(header):
                yield _Row(start, problem=f"row has {len(values)} values but the header has "
                                          f"{len(header)} columns; {QUOTING_HINT}")
            elif any("\0" in value for value in values):
                yield _Row(start, problem="row contains a NUL byte; is the file binary or UTF-16? "
                                          "Save it as UTF-8 CSV")
            elif not all(_is_text(value) for value in values):
                yield _Row(start, problem=not_utf8("row", csv_file=True))
            else:
                yield _Row(start, dict(zip(header, values)))


def _check_header(path: Path, header: list[str]) -> list[str]:
    if not all(_is_text(name) for name in header):
        raise InputFileError(f"{path}: {not_utf8('the header row', csv_file=True)}")
    # Columns are named by position, never by their text: in a file without a header row
    # the "names" are the first case's values.
    first: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if name in first:
            raise InputFileError(f"{path}: columns {first[name]} and {position} of the header "
                                 "row (line 1) have the same name; each column needs a unique "
                                 "name (does the file have a header row?)")
        first[name] = position
    return header


def _read_parquet(rows: ParquetRows) -> Iterator[_Row]:
    try:
        for number, data in rows:
            bad = next((name for name, value in data.items() if isinstance(value, NotUtf8)),
                       None)
            if bad is not None:
                yield _Row(number, problem="not valid UTF-8 text; write the column as UTF-8 "
                                           "strings", field=_short_name(bad))
            else:
                yield _Row(number, data)
    except ParquetInputError as exc:
        raise InputFileError(str(exc)) from None


def _rows(path: Path, columns: list[str]) -> Iterator[_Row]:
    """The file's rows; ``columns`` are the ones the caller reads (Parquet reads no other)."""
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise InputFileError(f"{path}: unsupported input format {suffix!r}; use "
                             f"{', '.join(SUPPORTED_SUFFIXES)}")
    if suffix == ".parquet":
        try:
            return _read_parquet(ParquetRows(path, columns))  # the footer is read now
        except ParquetInputError as exc:
            raise InputFileError(str(exc)) from None
    with path.open("rb") as handle:
        start = handle.read(2)
    if start in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        raise InputFileError(f"{path}: {UTF16}")
    return _read_jsonl(path) if suffix == ".jsonl" else _read_csv(path)


def _as_text(value: object) -> str | None:
    """Strings as they are, finite numbers as their JSON text (a Parquet decimal as its
    digits); None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        return str(value)
    if isinstance(value, Decimal) and value.is_finite():
        return str(value)
    return None


def iter_cases(path: Path, rubric: Rubric, *, mapping: Mapping[str, str] | None = None,
               id_column: str = "case_id", limit: int | None = None,
               ) -> Iterator[Case | InputProblem]:
    """Read and validate rows one at a time, in file order (the file is never held whole).

    The file and ``mapping`` are checked at the call, the rows as they are iterated.
    ``mapping`` maps a rubric input name to the column that holds it. A row without an id
    column, or a null in it, gets ``line-N`` (a null is marked: :attr:`Case.null_id`). Ids
    are not checked for uniqueness here: see :class:`UniqueIds`.
    """
    mapping = dict(mapping or {})
    unknown = sorted(set(mapping) - set(rubric.inputs))
    if unknown:
        raise InputFileError(f"--map names {unknown}, which are not inputs of rubric "
                             f"{rubric.name!r} (its inputs: {', '.join(rubric.inputs)})")
    return iter_rows(path, rubric.inputs, mapping=mapping, id_column=id_column, limit=limit)


def iter_rows(path: Path, inputs: Mapping[str, InputField], *,
              mapping: Mapping[str, str] | None = None, id_column: str = "case_id",
              limit: int | None = None) -> Iterator[Case | InputProblem]:
    """:func:`iter_cases` for any set of input fields (``inputs``: name -> field), e.g. the
    columns one file of a pair must have."""
    path = Path(path)
    if not path.is_file():
        if not path.exists():
            raise InputFileError(f"{path}: input file not found")
        # A FIFO or device could not be read twice (the run streams the file more than
        # once), and opening a FIFO blocks until something writes to it.
        kind = "a folder" if path.is_dir() else (
            "a FIFO (named pipe)" if path.is_fifo() else "a device or socket")
        raise InputFileError(f"{path}: is {kind}, not a regular file; save the cases to a "
                             ".jsonl, .csv or .parquet file")
    columns = [id_column, *((mapping or {}).get(name, name) for name in inputs)]
    rows = _rows(path, columns)
    return _validated(rows, path, dict(inputs), dict(mapping or {}), id_column, limit)


def _validated(rows: Iterator[_Row], path: Path, inputs: Mapping[str, InputField],
               mapping: Mapping[str, str], id_column: str, limit: int | None,
               ) -> Iterator[Case | InputProblem]:
    count = 0
    try:
        for row in rows:
            if limit is not None and count >= limit:
                return
            count += 1
            yield _validate_row(row, inputs, mapping, id_column, str(path))
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the file ({exc.strerror or exc})") from None


class UniqueIds:
    """Collects case ids as rows stream by; :meth:`check` raises :class:`InputFileError`
    naming every repeated id and its lines. A results file keyed by case id must never hold
    two verdicts for one id, so this runs over the whole input before any case is judged.
    The ids are held as digests (:class:`~evaluator.data.case_ids.CaseIds`): ~24 bytes per
    row, so a million rows fit in ~25 MB."""

    def __init__(self, path: Path, id_column: str):
        self.path = path
        self.id_column = id_column
        self._seen = CaseIds(lines=True)
        self._duplicates: list[str] = []

    def add(self, item: Case | InputProblem) -> None:
        """Note one row's id."""
        first = self._seen.add(item.case_id, item.line)
        if first is not None and first != item.line:
            # Lines only, never the id: with a wrong --id-column the "ids" are case text.
            self._duplicates.append(f"{line_word(self.path)}s {first} and {item.line}")

    def check(self) -> None:
        """Raise if any id was seen twice; then forget the ids."""
        self._seen = CaseIds(lines=True)
        if self._duplicates:
            shown = "; ".join(self._duplicates[:10]) + (" ..." if len(self._duplicates) > 10
                                                         else "")
            raise InputFileError(f"{self.path}: duplicate case ids ({shown} have the same id). "
                                 f"Each case needs a unique id in column {self.id_column!r}; "
                                 "is that the id column (--id-column)?")


def read_cases(path: Path, rubric: Rubric, *, mapping: Mapping[str, str] | None = None,
               id_column: str = "case_id", limit: int | None = None) -> list[Case | InputProblem]:
    """Every row, validated, as a list (:func:`iter_cases`); duplicate case ids are an
    :class:`InputFileError`."""
    ids = UniqueIds(Path(path), id_column)
    items = []
    for item in iter_cases(path, rubric, mapping=mapping, id_column=id_column, limit=limit):
        ids.add(item)
        items.append(item)
    ids.check()
    return items


def _id_problem(value: object) -> str | None:
    """What is wrong with a case id, or None when it is usable."""
    text = _as_text(value)
    if text is None:
        return f"case id must be a string or number, got {_kind(value)}"
    if not text.strip():
        return "case id is empty; give every row an id, or drop the id column"
    if len(text) > MAX_ID_LENGTH:
        return (f"case id is {len(text)} characters long (at most {MAX_ID_LENGTH}); check that "
                "--id-column names the id column")
    if not text.isprintable():
        return "case id contains control characters or invalid text; use printable characters"
    return None


def _validate_row(row: _Row, inputs: Mapping[str, InputField], mapping: Mapping[str, str],
                  id_column: str, file: str) -> Case | InputProblem:
    fallback_id = f"line-{row.line}"
    if row.data is None:
        return InputProblem(fallback_id, row.line, row.field, row.problem or "unreadable row",
                            file)
    raw_id = row.data.get(id_column)
    null_id = raw_id is None and id_column in row.data
    if raw_id is None:  # no id column, or null: the line number is the id
        case_id = fallback_id
    else:
        problem = _id_problem(raw_id)
        if problem is not None:
            return InputProblem(fallback_id, row.line, id_column, problem, file)
        case_id = str(_as_text(raw_id))
    fields: dict[str, str] = {}
    for name, spec in inputs.items():
        column = mapping.get(name, name)
        value = row.data.get(column)
        if value is None and not spec.required:
            fields[name] = ""
            continue
        if column not in row.data:
            return InputProblem(case_id, row.line, column, "required field is missing; add it, "
                                f"or map another column with --map {name}=COLUMN", file)
        text = _as_text(value)
        if text is None:
            return InputProblem(case_id, row.line, column, f"expected text, got {_kind(value)}; "
                                "give the field as a string", file)
        if not _is_text(text):
            return InputProblem(case_id, row.line, column, "not valid text: an unpaired "
                                "surrogate escape (\\ud800-\\udfff); fix the escape", file)
        if spec.required and not text.strip():
            return InputProblem(case_id, row.line, column, "required field is empty or only "
                                "whitespace; fill it in or remove the row", file)
        fields[name] = text
    return Case(case_id, row.line, fields, null_id)
